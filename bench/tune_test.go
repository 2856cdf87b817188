package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// tunePredictor fakes a predictor opened with some session options: its
// speed depends on the thread count and optimisation level, and one
// setting (1 thread, basic) gives other tokens.
type tunePredictor struct {
	so     engine.SessionOptions
	closed *int
}

func (f *tunePredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, f, reqs)
}

func (f *tunePredictor) Predict(_ context.Context, req predict.Request) (*predict.Result, error) {
	ids := make([]int64, req.MaxNewTokens)
	for i := range ids {
		ids[i] = int64(10 + i + len(req.History))
	}
	if f.so.IntraOpThreads == 1 && f.so.GraphOptimization == engine.OptimizeBasic {
		ids[len(ids)-1] = 99
	}
	unit := time.Duration(10/f.so.IntraOpThreads) * time.Millisecond
	if f.so.GraphOptimization == engine.OptimizeAll {
		unit -= time.Millisecond
	}
	if f.so.DisableMemArena {
		unit += 2 * time.Millisecond
	}
	n := len(ids)
	return &predict.Result{TokenIDs: ids, SourceTokens: 20,
		Timings: predict.Timings{Tokenize: unit, Encoder: 3 * unit, Fusion: unit, FirstStep: unit,
			LaterSteps: time.Duration(n-1) * unit, Parse: unit, DecoderCalls: n}}, nil
}

func TestTuneFakeSweep(t *testing.T) {
	closed := 0
	var seen []engine.SessionOptions
	open := func(so engine.SessionOptions) (predict.Predictor, func(), error) {
		seen = append(seen, so)
		return &tunePredictor{so: so, closed: &closed}, func() { closed++ }, nil
	}
	cases, err := DefaultCases("")
	if err != nil {
		t.Fatal(err)
	}
	grid := Grid{Threads: []int{1, 2}, Spin: []engine.Spin{engine.SpinOn}, Arena: []bool{true, false}, MemPattern: []bool{true},
		Opt: []engine.GraphOptimization{engine.OptimizeBasic, engine.OptimizeAll}}
	ref := Setting{Threads: 2, Spin: engine.SpinOn, Arena: true, MemPattern: true, Prepack: true, Opt: engine.OptimizeAll}
	var progress bytes.Buffer
	rep, err := Tune(context.Background(), open, engine.SessionOptions{Provider: engine.ProviderCPU}, cases, grid.Settings(),
		TuneOptions{Options: Options{Runs: 2, Warmup: 1, Tokens: 5}, Features: SyntheticFeatures(4), Reference: ref, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	// the reference is in the grid: measured once, first
	if len(rep.Results) != 8 || len(seen) != 8 || closed != 8 {
		t.Fatalf("%d results, %d opened, %d closed; want 8", len(rep.Results), len(seen), closed)
	}
	if rep.Results[0].Setting != ref || seen[0].IntraOpThreads != 2 || seen[0].GraphOptimization != engine.OptimizeAll || seen[0].Provider != engine.ProviderCPU {
		t.Fatalf("reference not first: %+v / %+v", rep.Results[0].Setting, seen[0])
	}
	for _, res := range rep.Results {
		if len(res.Passes) != 2 || len(res.Actions) != 2*len(cases) {
			t.Fatalf("%s: %d passes, %d actions", res.Setting.Name(), len(res.Passes), len(res.Actions))
		}
		bad := res.Setting.Threads == 1 && res.Setting.Opt == engine.OptimizeBasic
		if bad != (res.Mismatch != "") {
			t.Errorf("%s: mismatch %q", res.Setting.Name(), res.Mismatch)
		}
	}
	if rep.Mismatches() != 2 {
		t.Errorf("%d mismatches, want 2", rep.Mismatches())
	}
	if !strings.Contains(rep.Results[1].Mismatch, "token 4 is 99") {
		t.Errorf("mismatch message: %q", rep.Results[1].Mismatch)
	}
	best, ok := rep.Fastest()
	if !ok || best.Setting.Name() != "threads=2/spin=on/arena=on/opt=all" {
		t.Fatalf("fastest %s", best.Setting.Name())
	}
	if !strings.Contains(progress.String(), "TOKENS DIFFER") {
		t.Errorf("progress does not flag the mismatch:\n%s", progress.String())
	}

	var bs bytes.Buffer
	if err := rep.WriteBenchstat(&bs); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(bs.String(), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 16 {
		t.Fatalf("%d benchstat lines, want 16:\n%s", len(lines), bs.String())
	}
	// name, iterations, then value-unit pairs
	f := strings.Fields(lines[0])
	if f[0] != "BenchmarkTextPath/threads=2/spin=on/arena=on/opt=all" || f[1] != "1" || len(f)%2 != 0 {
		t.Fatalf("benchstat line %q", lines[0])
	}
	units := map[string]string{}
	for i := 2; i < len(f); i += 2 {
		units[f[i+1]] = f[i]
	}
	// 3 cases x (tokenize + 3 encoder + fusion + first + 4 later + parse) = 3 x 11 units of 4 ms
	if units["ns/op"] != "132000000" || units["encoder-ms"] != "36.000" || units["decode-call-ms"] != "4.000" || units["decoder-calls"] != "15" {
		t.Fatalf("benchstat values %v", units)
	}

	var sum bytes.Buffer
	if err := rep.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "fastest with identical tokens: threads=2/spin=on/arena=on/opt=all") ||
		!strings.Contains(sum.String(), "tokens differ under threads=1/spin=on/arena=on/opt=basic") {
		t.Fatalf("summary:\n%s", sum.String())
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Fastest string `json:"fastest"`
		Results []struct {
			Setting   string  `json:"setting"`
			Median    float64 `json:"median_pass_ms"`
			Identical bool    `json:"tokens_identical"`
		} `json:"results"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Fastest != best.Setting.Name() || len(doc.Results) != 8 || doc.Results[0].Median != 132 || !doc.Results[0].Identical {
		t.Fatalf("json: %+v", doc)
	}
}

func TestGridAndParsing(t *testing.T) {
	g := DefaultGrid()
	s := g.Settings()
	if len(s) != 24 {
		t.Fatalf("default grid has %d settings, want 24", len(s))
	}
	names := map[string]bool{}
	for _, x := range s {
		names[x.Name()] = true
	}
	if len(names) != 24 || !names["threads=1/spin=off/arena=on/opt=extended"] {
		t.Fatalf("names %v", names)
	}
	if n := (Setting{Threads: 1, Opt: engine.OptimizeAll}).Name(); n != "threads=1/spin=off/arena=off/opt=all/mempattern=off/prepack=off" {
		t.Fatalf("name %q", n)
	}
	so := Setting{Threads: 1, Spin: engine.SpinOff, Arena: false, MemPattern: true, Opt: engine.OptimizeBasic}.Session(engine.SessionOptions{CUDADevice: 3})
	if so.IntraOpThreads != 1 || so.Spin != engine.SpinOff || !so.DisableMemArena || so.DisableMemPattern || !so.DisablePrepacking || so.GraphOptimization != engine.OptimizeBasic || so.CUDADevice != 3 {
		t.Fatalf("session options %+v", so)
	}
	if th, err := ParseThreads(" 1, 2,4"); err != nil || len(th) != 3 || th[2] != 4 {
		t.Fatalf("threads %v %v", th, err)
	}
	if oo, err := ParseOnOff("on,OFF"); err != nil || len(oo) != 2 || oo[0] != true || oo[1] != false {
		t.Fatalf("on/off %v %v", oo, err)
	}
	if sp, err := ParseSpins("on, decoder,OFF,true"); err != nil || !slices.Equal(sp, []engine.Spin{engine.SpinOn, engine.SpinDecoder, engine.SpinOff, engine.SpinOn}) {
		t.Fatalf("spins %v %v", sp, err)
	}
	if op, err := ParseOpts("basic,all"); err != nil || len(op) != 2 {
		t.Fatalf("opts %v %v", op, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseThreads("0"); return err },
		func() error { _, err := ParseThreads(""); return err },
		func() error { _, err := ParseOnOff("maybe"); return err },
		func() error { _, err := ParseSpins("maybe"); return err },
		func() error { _, err := ParseSpins(","); return err },
		func() error { _, err := ParseOpts("max"); return err },
	} {
		if bad() == nil {
			t.Error("bad list accepted")
		}
	}
}

// The real engine on the tiny bundle: 2 prompts, 1 run, a few settings; all
// must reproduce the default setting's tokens.
func TestTuneTinyBundle(t *testing.T) {
	dir := filepath.Join("..", "models", "testdata", "tiny")
	b, err := models.Load(dir, models.LoadOptions{Verify: models.VerifySizes})
	if err != nil {
		t.Fatal(err)
	}
	open := func(so engine.SessionOptions) (predict.Predictor, func(), error) {
		p, err := engine.NewPredictor(b, engine.Options{Session: so})
		if err != nil {
			return nil, nil, err
		}
		return p, func() { p.Close() }, nil
	}
	if _, closeFn, err := open(engine.SessionOptions{IntraOpThreads: 1}); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("predictor: %v", err)
		}
		t.Fatal(err)
	} else {
		closeFn()
	}
	cases := screenCases(t)[:2]
	grid := Grid{Threads: []int{1}, Spin: []engine.Spin{engine.SpinOff}, Arena: []bool{true, false}, MemPattern: []bool{false},
		Opt: []engine.GraphOptimization{engine.OptimizeBasic}}
	rep, err := Tune(context.Background(), open, engine.SessionOptions{}, cases, grid.Settings(),
		TuneOptions{Options: Options{Runs: 1, Tokens: 6}, Features: SyntheticFeatures(b.Manifest.Model.ImageDim), Reference: DefaultSetting()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results", len(rep.Results))
	}
	for _, res := range rep.Results {
		if res.Mismatch != "" {
			t.Errorf("%s: %s", res.Setting.Name(), res.Mismatch)
		}
		if len(res.Actions) != 2 || res.Actions[0].Stages[StageEncoder] <= 0 || len(res.Actions[0].IDs) != 6 {
			t.Errorf("%s: %+v", res.Setting.Name(), res.Actions)
		}
	}
	if _, ok := rep.Fastest(); !ok {
		t.Fatal("no fastest setting")
	}
	var sum bytes.Buffer
	if err := rep.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sum.String())
}
