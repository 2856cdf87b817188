package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/bench/probe"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// fakePredictor returns fixed timings that grow with the history length, and
// records the requests it saw.
type fakePredictor struct {
	reqs     []predict.Request
	dropLast bool // generate one token too few, as if </s> were not suppressed
}

func (f *fakePredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, f, reqs)
}

func (f *fakePredictor) Predict(_ context.Context, req predict.Request) (*predict.Result, error) {
	f.reqs = append(f.reqs, req)
	n := req.MaxNewTokens
	if f.dropLast {
		n--
	}
	h := time.Duration(len(req.History))
	return &predict.Result{
		TokenIDs: make([]int64, n), SourceTokens: 20 + 50*len(req.History), SourceText: "Goal: " + req.Goal,
		Timings: predict.Timings{
			Preprocess: time.Millisecond, Vision: 10 * time.Millisecond, Tokenize: time.Millisecond,
			Encoder: (5 + h) * time.Millisecond, Fusion: time.Millisecond,
			FirstStep: 3 * time.Millisecond, LaterSteps: time.Duration(n-1) * 2 * time.Millisecond,
			Parse: time.Millisecond, Total: 100 * time.Millisecond, DecoderCalls: n,
		},
	}, nil
}

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	s := Summarize(ms(5, 1, 4, 2, 3))
	if s.N != 5 || s.Min != 1*time.Millisecond || s.Median != 3*time.Millisecond || s.P90 != 5*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	s = Summarize(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	if s.Median != 5500*time.Microsecond || s.P90 != 9*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty")
	}
}

func TestDefaultCasesSynthetic(t *testing.T) {
	cases, err := DefaultCases(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3 {
		t.Fatalf("%d cases", len(cases))
	}
	for i, want := range []int{0, 4, 8} {
		if len(cases[i].History) != want || cases[i].Screen != "" || len(cases[i].ScreenBytes) == 0 {
			t.Fatalf("case %d: history %d screen %q bytes %d", i, len(cases[i].History), cases[i].Screen, len(cases[i].ScreenBytes))
		}
	}
	a, _ := SyntheticScreen()
	b, _ := SyntheticScreen()
	if !bytes.Equal(a, b) {
		t.Fatal("synthetic screen is not deterministic")
	}
}

func TestDefaultCasesFromDir(t *testing.T) {
	dir := t.TempDir()
	small := smallPNG(t)
	for _, n := range []string{"b.png", "a.PNG", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), small, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases, err := DefaultCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{filepath.Base(cases[0].Screen), filepath.Base(cases[1].Screen), filepath.Base(cases[2].Screen)}
	if strings.Join(got, ",") != "a.PNG,b.png,a.PNG" {
		t.Fatalf("screens %v", got)
	}
}

// smallPNG is a 48x96 screen: the fake-predictor tests decode it many times,
// and a full-size screen is slow under the race detector.
func smallPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 48, 96))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func smallCases(t *testing.T) []Case {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small.png"), smallPNG(t), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := DefaultCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func runFake(t *testing.T, f *fakePredictor) ([]Case, []Action) {
	t.Helper()
	cases := smallCases(t)
	actions, err := Run(context.Background(), f, cases, Options{Runs: 2, Warmup: 1, Tokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	return cases, actions
}

func TestRunFixedLength(t *testing.T) {
	f := &fakePredictor{}
	_, actions := runFake(t, f)
	if len(f.reqs) != 9 || len(actions) != 6 {
		t.Fatalf("%d requests, %d actions; want 9 (1 warm-up + 2 runs, 3 cases) and 6", len(f.reqs), len(actions))
	}
	for _, r := range f.reqs {
		if r.MinNewTokens != 5 || r.MaxNewTokens != 5 || r.Screen == nil {
			t.Fatalf("request %+v", r)
		}
	}
	a := actions[1]
	if a.Case != "h4" || a.Run != 0 || a.DecoderCalls != 5 || a.Stages[StageDecodeStep] != 2*time.Millisecond {
		t.Fatalf("%+v", a)
	}
	if a.Stages[StageTextPath] != (1+9+1+3+8+1)*time.Millisecond {
		t.Fatalf("text path %v", a.Stages[StageTextPath])
	}
	if a.Stages[StageTotal] <= 100*time.Millisecond-time.Nanosecond || a.Stages[StageDecodeImage] <= 0 {
		t.Fatalf("total %v decode %v", a.Stages[StageTotal], a.Stages[StageDecodeImage])
	}

	cases := smallCases(t)
	_, err := Run(context.Background(), &fakePredictor{dropLast: true}, cases, Options{Runs: 1, Tokens: 5})
	if err == nil || !strings.Contains(err.Error(), "want exactly 5") {
		t.Fatalf("short generation not reported: %v", err)
	}
	if _, err := Run(context.Background(), &fakePredictor{}, cases, Options{Runs: 0, Tokens: 5}); err == nil {
		t.Fatal("runs=0 accepted")
	}
}

type failingPredictor struct{}

func (f failingPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, f, reqs)
}

func (failingPredictor) Predict(context.Context, predict.Request) (*predict.Result, error) {
	return nil, errors.New("boom")
}

func TestRunError(t *testing.T) {
	cases := smallCases(t)
	_, err := Run(context.Background(), failingPredictor{}, cases, Options{Runs: 1, Tokens: 5})
	if err == nil || !strings.Contains(err.Error(), "case h0 run 0: boom") {
		t.Fatalf("%v", err)
	}
}

func testReport(t *testing.T) *Report {
	cases, actions := runFake(t, &fakePredictor{})
	r := NewReport("autoui-go", "base", 2, "cpu", Options{Runs: 2, Warmup: 1, Tokens: 5}, cases, actions)
	r.Memory = Memory{PeakRSS: 300 << 20, GoHeap: 10 << 20}
	sh := probe.Shapes{WeightBytes: 4, VisionParams: 1e6,
		Model:  models.ModelConfig{DModel: 64, DKV: 16, DFF: 128, NumLayers: 2, NumDecoderLayers: 2, NumHeads: 4, VocabSize: 100, FeedForwardProj: "gated-gelu", ImageDim: 32},
		Vision: models.VisionConfig{ImageSize: 224, PatchSize: 14, HiddenSize: 64, NumLayers: 2}}
	r.AddLimits(sh, probe.Machine{Bandwidth: 1e9, GEMM: 1e9}, &MachineInfo{CPU: "test cpu", Threads: 2})
	return r
}

func TestReportJSONFields(t *testing.T) {
	b, err := testReport(t).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "threads", "provider", "cuda_graph", "cuda_graphs", "stages", "total_median_ms", "tokens", "decoder_calls", "peak_rss_mb", "limits", "machine"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	enc := doc["stages"].(map[string]any)["encoder"].(map[string]any)
	if enc["median_ms"].(float64) != 9 || enc["p90_ms"].(float64) != 13 {
		t.Fatalf("encoder %v", enc)
	}
	if doc["tokens"].(float64) != 5 || doc["decoder_calls"].(float64) != 5 || doc["peak_rss_mb"].(float64) != 300 {
		t.Fatalf("tokens %v calls %v rss %v", doc["tokens"], doc["decoder_calls"], doc["peak_rss_mb"])
	}
	lim := doc["limits"].([]any)
	stages := map[string]bool{}
	for _, l := range lim {
		m := l.(map[string]any)
		stages[m["stage"].(string)] = true
		if m["ratio"].(float64) <= 0 || m["bound_ms"].(float64) <= 0 {
			t.Errorf("limit %v", m)
		}
	}
	for _, s := range []string{"vision", "encoder", "fusion", "first_step", "decode_step", "model_stages"} {
		if !stages[s] {
			t.Errorf("no limit for %s", s)
		}
	}
}

// A stage that streams weights for short prompts and computes for long ones
// is reported as "mixed".
func TestLimitBasisMixed(t *testing.T) {
	r := testReport(t)
	sh := probe.Shapes{WeightBytes: 4, Model: models.ModelConfig{DModel: 768, DKV: 64, DFF: 2048, NumLayers: 12,
		NumDecoderLayers: 12, NumHeads: 12, VocabSize: 32128, FeedForwardProj: "gated-gelu", ImageDim: 1408}}
	r.Actions[0].SourceTokens, r.Actions[1].SourceTokens = 4, 4000
	r.AddLimits(sh, probe.Machine{Bandwidth: 20e9, GEMM: 100e9}, &MachineInfo{})
	for _, l := range r.Limits {
		if l.Stage == StageEncoder && l.Basis != "mixed" {
			t.Fatalf("encoder basis %q, want mixed", l.Basis)
		}
	}
}

// In a batch, the encoder and fusion bounds are those of the calls each
// action took part in (its group of prompts: rows x padded length), the
// decoder's those of the whole batch at its own prompt length.
func TestLimitsOfGroupedCalls(t *testing.T) {
	sh := probe.Shapes{WeightBytes: 4, Batch: 8, Model: models.ModelConfig{DModel: 768, DKV: 64, DFF: 2048, NumLayers: 12,
		NumDecoderLayers: 12, NumHeads: 12, VocabSize: 32128, FeedForwardProj: "gated-gelu", ImageDim: 1408}}
	m := probe.Machine{Bandwidth: 20e9, GEMM: 100e9}
	bound := func(r *Report, stage string) time.Duration {
		for _, l := range r.Limits {
			if l.Stage == stage {
				return l.Bound
			}
		}
		t.Fatalf("no %s limit", stage)
		return 0
	}
	r := testReport(t)
	for i := range r.Actions {
		r.Actions[i].SourceTokens, r.Actions[i].EncoderRows, r.Actions[i].EncoderLength = 100, 2, 120
	}
	r.AddLimits(sh, m, &MachineInfo{})
	group := sh
	group.Batch = 2
	if got, want := bound(r, StageEncoder), m.Bound(group.Encoder(120)); got != want {
		t.Errorf("encoder bound %v, want the group call's %v", got, want)
	}
	if got, want := bound(r, StageFusion), m.Bound(group.Fusion(120)); got != want {
		t.Errorf("fusion bound %v, want the group call's %v", got, want)
	}
	if got, want := bound(r, StageFirstStep), m.Bound(sh.DecodeStep(0, 100)); got != want {
		t.Errorf("first step bound %v, want the batch's %v", got, want)
	}
	for i := range r.Actions { // unknown: the batch's shape at the action's length
		r.Actions[i].EncoderRows, r.Actions[i].EncoderLength = 0, 0
	}
	r.AddLimits(sh, m, &MachineInfo{})
	if got, want := bound(r, StageEncoder), m.Bound(sh.Encoder(100)); got != want {
		t.Errorf("encoder bound %v, want the batch's %v", got, want)
	}
}

func TestBenchstatLines(t *testing.T) {
	var buf bytes.Buffer
	if err := testReport(t).WriteBenchstat(&buf); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		n++
		f := strings.Fields(line)
		if len(f) != 4 || f[1] != "1" || f[3] != "ns/op" || !strings.HasPrefix(f[0], "BenchmarkAutoUI/model=base/stage=") {
			t.Fatalf("bad line %q", line)
		}
	}
	if n != 6*len(Stages) {
		t.Fatalf("%d lines, want %d", n, 6*len(Stages))
	}
	if !strings.Contains(buf.String(), "BenchmarkAutoUI/model=base/stage=encoder \t 1 \t 9000000 ns/op") {
		t.Fatalf("no encoder line:\n%s", buf.String())
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := testReport(t).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"decode_step", "median ms", "measured/bound", "peak RSS: 300 MB", "prompt tokens: h0=20 h4=220 h8=420"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWritePeerInputs(t *testing.T) {
	cases, actions := runFake(t, &fakePredictor{})
	cases[0].Screen = "" // a synthetic screen: written beside the inputs
	path := filepath.Join(t.TempDir(), "inputs.json")
	if err := WritePeerInputs(path, cases, actions, 5); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var in PeerInputs
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.Tokens != 5 || len(in.Cases) != 3 || in.Cases[2].SourceTokens != 420 || len(in.Cases[2].History) != 8 {
		t.Fatalf("%+v", in)
	}
	if b, err := os.ReadFile(in.Cases[0].Screen); err != nil || !bytes.Equal(b, cases[0].ScreenBytes) || !filepath.IsAbs(in.Cases[0].Screen) {
		t.Fatalf("screen %q: %v", in.Cases[0].Screen, err)
	}
}

func TestReadMemory(t *testing.T) {
	m := ReadMemory()
	if m.PeakRSS <= 0 || m.GoHeap <= 0 || m.GoSys < m.GoHeap {
		t.Fatalf("%+v", m)
	}
}

func TestRunReplay(t *testing.T) {
	cases := smallCases(t)
	f := &fakePredictor{}
	replay := []int64{7, 8, 9}
	actions, err := Run(context.Background(), f, cases, Options{Runs: 1, Tokens: 4, Replay: replay, ReplayText: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != len(cases) {
		t.Fatalf("%d actions", len(actions))
	}
	for _, r := range f.reqs {
		if r.MinNewTokens != 0 || r.MaxNewTokens != 4 || len(r.Replay) != 3 {
			t.Fatalf("replay request %+v", r)
		}
	}
	if _, err := Run(context.Background(), f, cases, Options{Runs: 1, Tokens: 80, Replay: replay}); err == nil {
		t.Fatal("tokens not matching the replay accepted")
	}
	if got := fixedLength(Options{Tokens: 4, Replay: replay}); !strings.Contains(got, "replayed") {
		t.Errorf("fixed length %q", got)
	}
}
