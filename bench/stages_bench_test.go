package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// The testing.B benchmarks run on the tiny bundle (so they run anywhere);
// AUTOUI_BENCH_MODEL points them at another bundle, e.g.
//
//	AUTOUI_BENCH_MODEL=$PWD/bench-models/base-vitg go test -run '^$' -bench . ./bench
func benchModel() string {
	if m := os.Getenv("AUTOUI_BENCH_MODEL"); m != "" {
		return m
	}
	return filepath.Join("..", "models", "testdata", "tiny")
}

func openPredictor(tb testing.TB) *engine.Predictor {
	tb.Helper()
	dir := benchModel()
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		tb.Skipf("no bundle at %s", dir)
	}
	b, err := models.Load(dir, models.LoadOptions{Verify: models.VerifySizes})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := engine.NewPredictor(b, engine.Options{Session: engine.SessionOptions{IntraOpThreads: 1}})
	if err != nil {
		if os.Getenv("CI") == "" {
			tb.Skipf("predictor: %v", err)
		}
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

func screenCases(tb testing.TB) []Case {
	tb.Helper()
	cases, err := DefaultCases(filepath.Join("..", "models", "testdata", "screens"))
	if err != nil {
		tb.Fatal(err)
	}
	return cases
}

// The real engine honours the fixed length and fills every stage.
func TestRunTinyBundle(t *testing.T) {
	p := openPredictor(t)
	cases := screenCases(t)[:2]
	actions, err := Run(context.Background(), p, cases, Options{Runs: 1, Tokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		// speculative decoding may verify several tokens per call
		if a.Tokens != 4 || a.DecoderCalls < 1 || a.DecoderCalls > 4 {
			t.Fatalf("%+v", a)
		}
		for _, st := range Stages {
			if a.DecoderCalls == 1 && (st == StageDecodeStep || st == StageLaterSteps) {
				continue // one call: no later steps
			}
			if a.Stages[st] <= 0 {
				t.Errorf("case %s: stage %s not measured", a.Case, st)
			}
		}
	}
	if actions[1].SourceTokens <= actions[0].SourceTokens {
		t.Fatalf("history did not lengthen the prompt: %d vs %d tokens", actions[0].SourceTokens, actions[1].SourceTokens)
	}
}

func BenchmarkDecodeImage(b *testing.B) {
	c := screenCases(b)[0]
	b.SetBytes(int64(len(c.ScreenBytes)))
	for b.Loop() {
		if _, err := preprocess.Decode(bytes.NewReader(c.ScreenBytes)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPreprocess(b *testing.B) {
	c := screenCases(b)[0]
	img, err := preprocess.Decode(bytes.NewReader(c.ScreenBytes))
	if err != nil {
		b.Fatal(err)
	}
	cfg := preprocess.DefaultConfig()
	for b.Loop() {
		cfg.Pixels(img)
	}
}

// BenchmarkPredict runs the whole pipeline per case with the fixed length
// and reports every stage as its own metric (stage-ns/op), so benchstat
// compares stages across commits.
func BenchmarkPredict(b *testing.B) {
	p := openPredictor(b)
	for _, c := range screenCases(b) {
		b.Run("case="+c.ID, func(b *testing.B) {
			img, err := preprocess.Decode(bytes.NewReader(c.ScreenBytes))
			if err != nil {
				b.Fatal(err)
			}
			req := predict.Request{Screen: img, Goal: c.Goal, History: c.History, MaxNewTokens: 80, MinNewTokens: 80}
			var sum predict.Timings
			n := 0
			for b.Loop() {
				res, err := p.Predict(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				t := res.Timings
				sum.Preprocess += t.Preprocess
				sum.Vision += t.Vision
				sum.Tokenize += t.Tokenize
				sum.Encoder += t.Encoder
				sum.Fusion += t.Fusion
				sum.FirstStep += t.FirstStep
				sum.LaterSteps += t.LaterSteps
				sum.Parse += t.Parse
				sum.DecoderCalls += t.DecoderCalls
				n++
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
			b.ReportMetric(per(sum.Preprocess), "preprocess-ns/op")
			b.ReportMetric(per(sum.Vision), "vision-ns/op")
			b.ReportMetric(per(sum.Tokenize), "tokenize-ns/op")
			b.ReportMetric(per(sum.Encoder), "encoder-ns/op")
			b.ReportMetric(per(sum.Fusion), "fusion-ns/op")
			b.ReportMetric(per(sum.FirstStep), "first_step-ns/op")
			if later := sum.DecoderCalls - n; later > 0 {
				b.ReportMetric(float64(sum.LaterSteps.Nanoseconds())/float64(later), "decode_step-ns/op")
			}
			b.ReportMetric(per(sum.Parse), "parse-ns/op")
		})
	}
}
