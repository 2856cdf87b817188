package engine

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/autoui/autoui/engine/preprocess"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// Same tokens with 1 and 2 intra-op threads, and whoever spins.
func TestThreadCountsAgree(t *testing.T) {
	cases := loadGolden(t)[:6]
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, so := range []SessionOptions{{IntraOpThreads: 1}, {IntraOpThreads: 2}, {IntraOpThreads: 2, Spin: SpinDecoder}, {IntraOpThreads: 2, Spin: SpinOn}} {
		p, err := NewPredictor(b, Options{Truncation: TruncateRight, Session: so})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := p.Settings().Spin, so.Spin; got != want || (so.Spin == SpinDecoder && got.String() != "decoder") {
			t.Errorf("%+v: settings say spin %q, want %q", so, got, want)
		}
		for _, c := range cases {
			res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
				t.Errorf("%+v %s: ids differ from golden", so, c.ID)
			}
		}
		p.Close()
	}
}

func TestPrecomputedFeatures(t *testing.T) {
	p := tiny(t)
	c := loadGolden(t)[0]
	res, err := p.Predict(context.Background(), predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
		t.Fatalf("ids from golden features differ")
	}
	if res.Timings.Vision != 0 {
		t.Error("vision ran although features were given")
	}
	_, err = p.Predict(context.Background(), predict.Request{Features: []float32{1, 2, 3}, Goal: "x"})
	if err == nil || !strings.Contains(err.Error(), "image_dim") {
		t.Fatalf("wrong feature length: %v", err)
	}
	if _, err := p.Predict(context.Background(), predict.Request{Goal: "x"}); err == nil {
		t.Fatal("no screen and no features accepted")
	}
}

func TestCancelledContext(t *testing.T) {
	p := tiny(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Predict(ctx, predict.Request{Features: make([]float32, p.cfg.ImageDim), Goal: "open settings"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestKeepGoalTruncation(t *testing.T) {
	p := tiny(t)
	long := action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: strings.Repeat("a very long typed text ", 40)}
	hist := []action.Action{long, long, long}
	goal := "open the settings app"
	text, ids, err := buildPrompt(p.tok, 1, goal, hist, 8, 512, action.ScrollFixed, KeepGoal)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) > 512 || !strings.HasSuffix(text, "Goal: "+goal) {
		t.Fatalf("keep-goal lost the goal: %d tokens, %q", len(ids), text[max(0, len(text)-60):])
	}
	_, rids, _ := buildPrompt(p.tok, 1, goal, hist, 8, 512, action.ScrollFixed, TruncateRight)
	if len(rids) != 512 || rids[511] != 1 {
		t.Fatalf("right truncation: %d tokens, last %d", len(rids), rids[len(rids)-1])
	}
	if SourceText("g", nil, 8, action.ScrollFixed) != "Previous Actions: Goal: g" || SourceText("g  x", hist, 0, action.ScrollFixed) != "Goal: g x" {
		t.Fatal("prompt forms")
	}
}

func TestBundleErrors(t *testing.T) {
	src := filepath.Join(testdata, "tiny")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(dir, e.Name()), raw, 0o644)
	}
	// point the encoder entry at the fusion graph (checksums updated): only
	// the graph input/output check can tell
	raw, err := os.ReadFile(filepath.Join(dir, models.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	files := m["files"].(map[string]any)
	enc, fus := files["encoder"].(map[string]any), files["fusion"].(map[string]any)
	for _, k := range []string{"path", "sha256", "size"} {
		enc[k] = fus[k]
	}
	raw, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(dir, models.ManifestFile), raw, 0o644)
	b, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPredictor(b, Options{})
	if !errors.Is(err, models.ErrIOMismatch) || !strings.Contains(err.Error(), "fusion_model.onnx") {
		t.Fatalf("swapped graphs: got %v", err)
	}
	// A manifest claiming a billion decoder layers is refused before a
	// name is built per layer (that filled memory).
	raw, _ = os.ReadFile(filepath.Join(src, models.ManifestFile))
	m = nil
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["model"].(map[string]any)["num_decoder_layers"] = 1 << 30
	raw, _ = json.Marshal(m)
	os.WriteFile(filepath.Join(dir, models.ManifestFile), raw, 0o644)
	if b, err = models.Load(dir, models.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err = NewPredictor(b, Options{}); err == nil || !strings.Contains(err.Error(), "1073741824 layers") {
		t.Fatalf("a billion layers: got %v", err)
	}
}

// An output cut before it parses carries no usable point: AITW's [-1, -1],
// not a tap at the origin (issue 22).
func TestUnparsedOutputHasNoPoint(t *testing.T) {
	p := tiny(t)
	c := loadGolden(t)[0]
	res, err := p.Predict(context.Background(), predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, MaxNewTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.ParseErr == nil {
		t.Fatalf("3 tokens parsed: %q", res.Raw)
	}
	if res.Action.Type.Valid() || res.Action.Touch != action.NoPoint || res.Action.Lift != action.NoPoint {
		t.Errorf("unparsed output's action %+v", res.Action)
	}
}

// A shrunk screen (what serve holds while a request waits) gives the same
// vision features as the whole screenshot, bit for bit, for every kind of
// image preprocessing reads: RGB, gray, paletted, translucent, JPEG, phone
// sized, and one already at the input size.
func TestShrinkKeepsFeatures(t *testing.T) {
	p := tiny(t)
	pngs, err := filepath.Glob(filepath.Join("preprocess", "testdata", "*[0-9].png"))
	jpegs, _ := filepath.Glob(filepath.Join("preprocess", "testdata", "*[0-9].jpg"))
	files := append(pngs, jpegs...)
	if err != nil || len(files) < 8 {
		t.Fatalf("test screens: %v %v", files, err)
	}
	for _, f := range files {
		img, err := preprocess.DecodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shrunk := p.Shrink(img)
		if b := shrunk.Bounds(); b.Dx() != p.prep.Width || b.Dy() != p.prep.Height {
			t.Fatalf("%s: shrunk to %v", f, b)
		}
		for _, pair := range [][2]image.Image{{img, shrunk}, {shrunk, p.Shrink(shrunk)}} {
			a, err := p.ImageFeatures(context.Background(), pair[0])
			if err != nil {
				t.Fatal(err)
			}
			b, err := p.ImageFeatures(context.Background(), pair[1])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, b) {
				t.Errorf("%s: features of the shrunk screen differ", filepath.Base(f))
			}
		}
	}
}
