package runner

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/engine"
)

// fakePredictor answers deterministically from the request: a tap whose y
// encodes the history length, so tests can check what history was given.
type fakePredictor struct {
	mu          sync.Mutex
	predicts    int
	vision      int
	cancelAt    int // cancel on this Predict call (1-based); 0: never
	cancel      context.CancelFunc
	histories   map[string][]action.Action // goal/step -> history seen
	lastFeature []float32
}

func (f *fakePredictor) Predict(ctx context.Context, req engine.Request) (*engine.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.predicts++
	if f.cancelAt > 0 && f.predicts == f.cancelAt {
		f.cancel()
		return nil, ctx.Err()
	}
	if len(req.Features) == 0 {
		return nil, fmt.Errorf("no features")
	}
	f.lastFeature = req.Features
	y := 0.01 + 0.1*float64(len(req.History))
	a := action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: 0.5}, Lift: action.Point{Y: y, X: 0.5}}
	res := &engine.Result{Action: a, Raw: "raw", TokenIDs: []int64{5, 6, 7, 1},
		Timings: engine.Timings{DecoderCalls: 2, Encoder: 3 * time.Millisecond, FirstStep: time.Millisecond, LaterSteps: time.Millisecond}}
	if len(req.History) == 2 {
		res.Action = action.Action{}
		res.ParseErr = fmt.Errorf("bad text")
	}
	return res, nil
}

func (f *fakePredictor) ImageFeatures(ctx context.Context, img image.Image) ([]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vision++
	b := img.Bounds()
	r, g, bl, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	return []float32{float32(r >> 8), float32(g >> 8), float32(bl >> 8), float32(b.Dx()), float32(b.Dy())}, nil
}

func testOptions(t *testing.T, out string) Options {
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Files: files, OutDir: out, CacheDir: filepath.Join(out, "features"), CacheKey: "fake", History: HistoryGold}
}

func TestRunResumeAfterInterrupt(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := &fakePredictor{cancelAt: 8, cancel: cancel}
	sum, err := Run(ctx, fp, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || sum.Predicted != 7 {
		t.Fatalf("first run: %+v", sum)
	}
	ps, err := aitw.ReadPredictions(sum.Path)
	if err != nil || ps.Lines != 7 {
		t.Fatalf("after interrupt: %v lines, %v", ps, err)
	}
	// Simulate a kill mid-write: a torn last line.
	f, _ := os.OpenFile(sum.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"episode_id": "123", "step_id": 4, "action_ty`)
	f.Close()

	fp2 := &fakePredictor{}
	sum2, err := Run(context.Background(), fp2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !sum2.TornTail || sum2.AlreadyDone != 7 || sum2.Predicted != 55-7 || sum2.Interrupted {
		t.Fatalf("resume: %+v", sum2)
	}
	ps, err = aitw.ReadPredictions(sum.Path)
	if err != nil || ps.Lines != 55 || ps.Duplicates != 0 || len(ps.ByStep) != 55 || ps.TornTail {
		t.Fatalf("final file: %+v %v", ps, err)
	}
	// Third run: nothing to do, and the vision cache was complete.
	fp3 := &fakePredictor{}
	sum3, err := Run(context.Background(), fp3, opts)
	if err != nil || sum3.Predicted != 0 || sum3.AlreadyDone != 55 || fp3.predicts != 0 {
		t.Fatalf("third run: %+v %v", sum3, err)
	}
}

func TestFeatureCache(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	opts.Limit = 5
	fp := &fakePredictor{}
	sum, err := Run(context.Background(), fp, opts)
	if err != nil || sum.Predicted != 5 || !sum.LimitHit || fp.vision != 5 || sum.CacheMisses != 5 {
		t.Fatalf("%+v %v vision=%d", sum, err, fp.vision)
	}
	// Same screens in a fresh output dir sharing the cache: no vision calls.
	opts2 := opts
	opts2.OutDir = t.TempDir()
	fp2 := &fakePredictor{}
	sum2, err := Run(context.Background(), fp2, opts2)
	if err != nil || fp2.vision != 0 || sum2.CacheHits != 5 {
		t.Fatalf("%+v %v vision=%d", sum2, err, fp2.vision)
	}
	if fmt.Sprint(fp.lastFeature) != fmt.Sprint(fp2.lastFeature) {
		t.Errorf("cached features %v != %v", fp2.lastFeature, fp.lastFeature)
	}
	// A different cache key misses.
	opts3 := opts2
	opts3.OutDir = t.TempDir()
	opts3.CacheKey = "other"
	fp3 := &fakePredictor{}
	if _, err := Run(context.Background(), fp3, opts3); err != nil || fp3.vision != 5 {
		t.Fatalf("other key: vision=%d %v", fp3.vision, err)
	}
}

func TestHistoryModes(t *testing.T) {
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		out := t.TempDir()
		opts := testOptions(t, out)
		opts.History = mode
		sp, err := aitw.ReadSplits("../testdata/splits/standard.json")
		if err != nil {
			t.Fatal(err)
		}
		opts.Split, _ = sp.IDs("test")
		rec := &recordingPredictor{goals: goalIndex}
		sum, err := Run(context.Background(), rec, opts)
		if err != nil {
			t.Fatal(err)
		}
		gold, _, _ := aitw.LoadEpisodes(opts.Files, aitw.ReadOptions{Keep: func(id string) bool { return opts.Split[id] }})
		steps := 0
		for _, ep := range gold {
			steps += len(ep.Steps)
		}
		if sum.Predicted != steps || sum.Episodes != 5 {
			t.Fatalf("%s: %+v, want %d steps", mode, sum, steps)
		}
		for _, ep := range gold {
			for i, s := range ep.Steps {
				h := rec.seen[ep.ID+"/"+fmt.Sprint(s.StepID)]
				if len(h) != i {
					t.Fatalf("%s: %s step %d history %d", mode, ep.ID, i, len(h))
				}
				for j := range h {
					want := ep.Steps[j].Action
					if mode == HistoryPredicted {
						want = rec.answer(ep.ID, j)
					}
					if h[j] != want {
						t.Errorf("%s: %s step %d history[%d] = %+v, want %+v", mode, ep.ID, i, j, h[j], want)
					}
				}
			}
		}
	}
}

// recordingPredictor remembers each request's history, keyed by the step it
// must be for (goal carries the episode; history length is the step).
type recordingPredictor struct {
	mu    sync.Mutex
	seen  map[string][]action.Action
	goals map[string]string
}

func (r *recordingPredictor) answer(ep string, step int) action.Action {
	y := 0.5 + 0.01*float64(step)
	return action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: 0.1}, Lift: action.Point{Y: y, X: 0.1}}
}

func (r *recordingPredictor) Predict(ctx context.Context, req engine.Request) (*engine.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string][]action.Action{}
	}
	// Recover the episode id from the features (see ImageFeatures: none), so
	// use the goal, which the fixtures make unique per episode via a lookup.
	id := r.goals[req.Goal]
	r.seen[id+"/"+fmt.Sprint(len(req.History))] = append([]action.Action(nil), req.History...)
	return &engine.Result{Action: r.answer(id, len(req.History))}, nil
}

func (r *recordingPredictor) ImageFeatures(ctx context.Context, img image.Image) ([]float32, error) {
	return []float32{1}, nil
}

func init() {
	// Goal -> episode id for recordingPredictor; the fixtures' goals are unique.
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		return
	}
	eps, _, _ := aitw.LoadEpisodes(files, aitw.ReadOptions{})
	goals := map[string]string{}
	for _, ep := range eps {
		goals[ep.Goal] = ep.ID
	}
	goalIndex = goals
}

var goalIndex map[string]string

func TestShardsCoverEverythingOnce(t *testing.T) {
	all := map[aitw.StepKey]int{}
	for i := 0; i < 3; i++ {
		out := t.TempDir()
		opts := testOptions(t, out)
		opts.Shard = aitw.Shard{I: i, N: 3}
		if _, err := Run(context.Background(), &fakePredictor{}, opts); err != nil {
			t.Fatal(err)
		}
		ps, err := aitw.ReadPredictions(filepath.Join(out, PredictionsFile))
		if err != nil {
			t.Fatal(err)
		}
		for k := range ps.ByStep {
			all[k]++
		}
	}
	if len(all) != 55 {
		t.Fatalf("%d steps over 3 shards", len(all))
	}
	for k, n := range all {
		if n != 1 {
			t.Errorf("%v predicted %d times", k, n)
		}
	}
}

func TestParseErrorsRecorded(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	sum, err := Run(context.Background(), &fakePredictor{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(sum.Path)
	// Decoding totals add up over the new predictions.
	if d := sum.Decode; d.Calls != 2*sum.Predicted || d.Tokens != 4*sum.Predicted ||
		d.Decode != time.Duration(sum.Predicted)*2*time.Millisecond || d.TextPath != time.Duration(sum.Predicted)*5*time.Millisecond {
		t.Errorf("decode stats %+v for %d predictions", d, sum.Predicted)
	}
	if sum.ParseErrors == 0 || !bytes.Contains(b, []byte(`"parse_error":"bad text"`)) || !bytes.Contains(b, []byte(`"action_type":0`)) {
		t.Errorf("parse errors %d", sum.ParseErrors)
	}
	// Non-TTY progress prints plain lines.
	var buf bytes.Buffer
	opts.OutDir = t.TempDir()
	opts.Progress = &buf
	opts.Limit = 2
	if _, err := Run(context.Background(), &fakePredictor{}, opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "steps/s") || strings.Contains(buf.String(), "\r") {
		t.Errorf("progress %q", buf.String())
	}
}
