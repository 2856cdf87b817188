package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/npy"
	"github.com/autoui/autoui/predict"
)

const testdata = "../models/testdata"

// tinyDir is the tiny bundle the predictor tests open: the committed one, or
// $AUTOUI_TEST_TINY, a variant of it with the same weights and other graphs
// (python -m scripts.attention), which must give the same tokens.
func tinyDir() string {
	return cmp.Or(os.Getenv("AUTOUI_TEST_TINY"), filepath.Join(testdata, "tiny"))
}

type goldenAction struct {
	ActionType string     `json:"action_type"`
	Touch      [2]float64 `json:"touch_point"`
	Lift       [2]float64 `json:"lift_point"`
	Text       string     `json:"typed_text"`
}

func (g goldenAction) action(t *testing.T) action.Action {
	typ, err := action.ParseType(g.ActionType)
	if err != nil {
		t.Fatal(err)
	}
	return action.Action{Type: typ, Touch: action.Point{Y: g.Touch[0], X: g.Touch[1]}, Lift: action.Point{Y: g.Lift[0], X: g.Lift[1]}, Text: g.Text}
}

type goldenCase struct {
	ID           string            `json:"id"`
	Screen       string            `json:"screen"`
	Goal         string            `json:"goal"`
	History      []goldenAction    `json:"history"`
	SourceText   string            `json:"source_text"`
	InputIDs     []int64           `json:"input_ids"`
	Truncated    bool              `json:"truncated"`
	MaxNewTokens int               `json:"max_new_tokens"`
	GeneratedIDs []int64           `json:"generated_ids"`
	Text         string            `json:"text"`
	Tensors      map[string]string `json:"tensors"`
}

func (c goldenCase) history(t *testing.T) []action.Action {
	out := make([]action.Action, len(c.History))
	for i, h := range c.History {
		out[i] = h.action(t)
	}
	return out
}

type goldenFile struct {
	Cases []goldenCase `json:"cases"`
	// Tolerances against the PyTorch reference per tensor, written by the
	// fixture script from the differences it measured (float32 on both
	// sides; ORT fuses and reorders reductions). Ids and text match exactly.
	Tolerances map[string]struct {
		Atol float64 `json:"atol"`
	} `json:"tolerances"`
}

func readGolden(t testing.TB) goldenFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testdata, "golden", "cases.json"))
	if err != nil {
		t.Fatalf("golden fixtures: %v (regenerate with `make fixtures`)", err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 20 {
		t.Fatalf("only %d golden cases", len(g.Cases))
	}
	// The reference generated with up to 128 new tokens; requests may ask
	// for at most the bundle's 127. No case comes near either limit, so the
	// tokens are the same under both.
	for i := range g.Cases {
		c := &g.Cases[i]
		if len(c.GeneratedIDs) >= models.DefaultMaxTargetTokens {
			t.Fatalf("golden case %s generated %d tokens: its limit matters", c.ID, len(c.GeneratedIDs))
		}
		c.MaxNewTokens = min(c.MaxNewTokens, models.DefaultMaxTargetTokens)
	}
	return g
}

func loadGolden(t testing.TB) []goldenCase { return readGolden(t).Cases }

// tolerance is the golden file's absolute tolerance for a tensor.
func tolerance(t testing.TB, tensor string) float64 {
	t.Helper()
	tol, ok := readGolden(t).Tolerances[tensor]
	if !ok || tol.Atol <= 0 {
		t.Fatalf("golden file has no tolerance for %s", tensor)
	}
	return tol.Atol
}

func loadNpy(t testing.TB, rel string) []float32 {
	t.Helper()
	f, err := os.Open(filepath.Join(testdata, "golden", rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, _, err := npy.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return v
}

func maxAbsDiff(t testing.TB, what string, got, want []float32) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, golden has %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	return worst
}

var (
	tinyOnce sync.Once
	tinyPred *Predictor
	tinyErr  error
)

// tiny returns a shared predictor on the committed tiny bundle, with Auto-UI's
// right truncation so prompts match the PyTorch reference.
func tiny(t testing.TB) *Predictor {
	t.Helper()
	tinyOnce.Do(func() {
		b, err := models.Load(tinyDir(), models.LoadOptions{})
		if err != nil {
			tinyErr = err
			return
		}
		tinyPred, tinyErr = NewPredictor(b, Options{Truncation: TruncateRight})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyPred
}

// tinyWith opens a predictor of its own on the tiny bundle with opts, closed
// when the test ends.
func tinyWith(t testing.TB, opts Options) *Predictor {
	t.Helper()
	b, err := models.Load(tinyDir(), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func screen(t testing.TB, rel string) image.Image {
	t.Helper()
	img, err := preprocess.DecodeFile(filepath.Join(testdata, rel))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestGoldenParity(t *testing.T) {
	p := tiny(t)
	ctx := context.Background()
	tolPixels, tolFeatures := tolerance(t, "pixel_values"), tolerance(t, "image_features")
	tolEncoder, tolFused, tolLogits := tolerance(t, "encoder_hidden_states"), tolerance(t, "fused_hidden_states"), tolerance(t, "logits")
	worst := map[string]float64{}
	track := func(stage string, d float64) float64 {
		worst[stage] = math.Max(worst[stage], d)
		return d
	}
	defer func() { t.Logf("worst max-abs diffs vs PyTorch over all cases: %v", worst) }()
	for _, c := range loadGolden(t) {
		t.Run(c.ID, func(t *testing.T) {
			img := screen(t, c.Screen)
			// preprocessing
			if rel, ok := c.Tensors["pixel_values"]; ok {
				if d := track("pixels", maxAbsDiff(t, "pixels", p.prep.Pixels(img), loadNpy(t, rel))); d > tolPixels {
					t.Errorf("pixel_values max abs diff %g > %g", d, tolPixels)
				}
			}
			// vision
			feat, err := p.ImageFeatures(ctx, img)
			if err != nil {
				t.Fatal(err)
			}
			if d := track("vision", maxAbsDiff(t, "image_features", feat, loadNpy(t, c.Tensors["image_features"]))); d > tolFeatures {
				t.Errorf("image_features max abs diff %g > %g", d, tolFeatures)
			}
			// prompt and tokens
			hist := c.history(t)
			if got := SourceText(c.Goal, hist, 8, action.ScrollFixed); got != c.SourceText {
				t.Errorf("source text\n got %q\nwant %q", got, c.SourceText)
			}
			_, ids, err := buildPrompt(p.tok, 1, c.Goal, hist, 8, 512, action.ScrollFixed, TruncateRight)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, c.InputIDs) {
				t.Fatalf("input ids\n got %v\nwant %v", ids, c.InputIDs)
			}
			// encoder and fusion on the golden vision vector, so each stage is
			// compared on its own inputs
			goldFeat := loadNpy(t, c.Tensors["image_features"])
			mask := make([]int64, len(ids))
			for i := range mask {
				mask[i] = 1
			}
			enc, err := p.runEncoder(1, len(ids), ids, mask)
			if err != nil {
				t.Fatal(err)
			}
			if d := track("encoder", maxAbsDiff(t, "encoder", enc.host, loadNpy(t, c.Tensors["encoder_hidden_states"]))); d > tolEncoder {
				t.Errorf("encoder_hidden_states max abs diff %g > %g", d, tolEncoder)
			}
			fused, err := p.runFusion(1, len(ids), enc, goldFeat, mask)
			if err != nil {
				t.Fatal(err)
			}
			if d := track("fusion", maxAbsDiff(t, "fused", fused.host, loadNpy(t, c.Tensors["fused_hidden_states"]))); d > tolFused {
				t.Errorf("fused_hidden_states max abs diff %g > %g", d, tolFused)
			}
			// first 3 decode steps' logits, teacher-forced on the golden ids
			r, err := p.newCall(1, fused, mask, 4, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			wantLogits := loadNpy(t, c.Tensors["logits"])
			V := p.cfg.VocabSize
			tok := int64(0)
			for s := 0; s < 3 && s < len(c.GeneratedIDs); s++ {
				r.input(1)[0] = tok
				out, err := r.step(1, true)
				if err != nil {
					t.Fatal(err)
				}
				l := out.logits
				if d := track("logits", maxAbsDiff(t, "logits", l, wantLogits[s*V:(s+1)*V])); d > tolLogits {
					t.Errorf("step %d logits max abs diff %g > %g", s, d, tolLogits)
				}
				tok = c.GeneratedIDs[s]
			}
			// the whole pipeline from the screenshot
			res, err := p.Predict(ctx, predict.Request{Screen: img, Goal: c.Goal, History: hist, MaxNewTokens: c.MaxNewTokens})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
				t.Fatalf("generated ids\n got %v\nwant %v", res.TokenIDs, c.GeneratedIDs)
			}
			if res.Raw != c.Text {
				t.Errorf("text\n got %q\nwant %q", res.Raw, c.Text)
			}
		})
	}
}
