package bench

import (
	"context"
	"encoding/json"
	"image"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// fakeBatch answers a batch with fakePredictor's result for each request.
type fakeBatch struct {
	fakePredictor
	calls []int // batch sizes seen
	short bool  // return one result too few
}

func (f *fakeBatch) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	f.calls = append(f.calls, len(reqs))
	var out []*predict.Result
	for _, r := range reqs {
		res, _ := f.Predict(ctx, r)
		out = append(out, res)
	}
	if f.short {
		out = out[1:]
	}
	return out, nil
}

func TestRunBatch(t *testing.T) {
	cases := smallCases(t)
	f := &fakeBatch{}
	actions, batches, err := RunBatch(context.Background(), f, cases, Options{Runs: 2, Warmup: 1, Tokens: 5, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 3 || f.calls[0] != 4 || len(batches) != 2 || len(actions) != 8 {
		t.Fatalf("calls %v, %d batches, %d actions", f.calls, len(batches), len(actions))
	}
	// the cases round-robin: h0 h4 h8 h0, each screen decoded on its own
	if ids := []string{actions[0].Case, actions[1].Case, actions[2].Case, actions[3].Case}; strings.Join(ids, " ") != "h0 h4 h8 h0" {
		t.Fatalf("cases %v", ids)
	}
	for i, r := range f.reqs {
		if r.Screen == nil || r.Goal != cases[i%4%len(cases)].Goal {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	b := batches[1]
	if b.Run != 1 || b.Screens != 4 || b.Decode <= 0 || b.Wall < b.Decode || b.ScreensPerSecond() <= 0 {
		t.Fatalf("batch %+v", b)
	}
	if actions[4].Run != 1 || actions[4].Stages[StageDecodeImage] != b.Decode {
		t.Fatalf("action %+v", actions[4])
	}

	r := NewReport("autoui-go", "base", 2, "cpu", Options{Runs: 2, Tokens: 5, Batch: 4}, cases, actions)
	r.Batches = batches
	tp, et := r.Throughput(), r.EngineThroughput()
	if tp.Min > tp.Median || tp.Median > tp.Max || tp.Min <= 0 {
		t.Fatalf("throughput %+v", tp)
	}
	// without the decoding the same screens take less time
	if et.Min > et.Median || et.Median > et.Max || et.Median <= tp.Median {
		t.Fatalf("engine throughput %+v, with decoding %+v", et, tp)
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil || doc["batch"] != 4.0 || len(doc["batches"].([]any)) != 2 || doc["engine_screens_per_s"] == nil || doc["ahead_screens_per_s"] == nil {
		t.Fatalf("%v: %s", err, js)
	}
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil || !strings.Contains(table.String(), "batch: 4 screens per PredictBatch") ||
		!strings.Contains(table.String(), "engine alone") {
		t.Fatalf("%v: %s", err, table.String())
	}
	if r.EncoderCallsPerBatch() != 0 || strings.Contains(table.String(), "encoder calls") {
		t.Fatal("encoder calls reported by a runner that does not say them")
	}
	// two batches of 4 prompts, each encoded as a group of 3 and one alone
	for i := range r.Actions {
		r.Actions[i].EncoderRows = map[bool]int{true: 1, false: 3}[i%4 == 3]
	}
	table.Reset()
	if err := r.WriteTable(&table); err != nil || r.EncoderCallsPerBatch() != 2 ||
		!strings.Contains(table.String(), "prompts encoded in 2.0 encoder calls per batch") {
		t.Fatalf("%v, %v calls: %s", err, r.EncoderCallsPerBatch(), table.String())
	}

	if _, _, err := RunBatch(context.Background(), &fakeBatch{short: true}, cases, Options{Runs: 1, Tokens: 5, Batch: 2}); err == nil || !strings.Contains(err.Error(), "1 results") {
		t.Fatalf("short batch: %v", err)
	}
	if _, _, err := RunBatch(context.Background(), &fakeBatch{fakePredictor: fakePredictor{dropLast: true}}, cases, Options{Runs: 1, Tokens: 5, Batch: 2}); err == nil || !strings.Contains(err.Error(), "want exactly 5") {
		t.Fatalf("short generation: %v", err)
	}
	if _, _, err := RunBatch(context.Background(), f, cases, Options{Runs: 1, Tokens: 5}); err == nil {
		t.Fatal("batch 0 accepted")
	}
}

// concurrentBatch answers like fakePredictor, each call holding until
// another has started (or a while), and counts the calls at once.
type concurrentBatch struct {
	mu           sync.Mutex
	inside, most int
	both         chan struct{}
	once         sync.Once
}

func (c *concurrentBatch) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	c.mu.Lock()
	c.inside++
	c.most = max(c.most, c.inside)
	if c.inside == 2 {
		c.once.Do(func() { close(c.both) })
	}
	c.mu.Unlock()
	select {
	case <-c.both:
	case <-time.After(5 * time.Second):
	}
	var f fakePredictor
	out, err := f.PredictBatch(ctx, reqs)
	c.mu.Lock()
	c.inside--
	c.mu.Unlock()
	return out, err
}

func (c *concurrentBatch) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, c, req)
}

// With Concurrent 2 the measured batches run two at a time, come back in
// run order, and the report adds the screens/s over the run.
func TestRunBatchConcurrent(t *testing.T) {
	cases := smallCases(t)
	c := &concurrentBatch{both: make(chan struct{})}
	opts := Options{Runs: 4, Tokens: 5, Batch: 3, Concurrent: 2}
	actions, batches, err := RunBatch(context.Background(), c, cases, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.most != 2 || len(batches) != 4 || len(actions) != 12 {
		t.Fatalf("%d calls at once (want 2), %d batches, %d actions", c.most, len(batches), len(actions))
	}
	for i, b := range batches {
		if b.Run != i || actions[3*i].Run != i {
			t.Fatalf("batch %d is run %d (action run %d)", i, b.Run, actions[3*i].Run)
		}
	}
	r := NewReport("autoui-go", "base", 2, "cpu", opts, cases, actions)
	r.Batches = batches
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil || r.RunThroughput() <= 0 || !strings.Contains(table.String(), "2 batches at once") {
		t.Fatalf("%v, %v screens/s over the run: %s", err, r.RunThroughput(), table.String())
	}
	// the rate over the run: 12 screens from the first start to the last end
	first, last := batches[0].Start, batches[0].End
	for _, b := range batches {
		if b.Start.Before(first) {
			first = b.Start
		}
		if b.End.After(last) {
			last = b.End
		}
		if got := b.End.Sub(b.Start); got < b.Wall {
			t.Errorf("batch %d: %v from its start to its end, shorter than its wall time %v", b.Run, got, b.Wall)
		}
	}
	if want := 12 / last.Sub(first).Seconds(); r.RunThroughput() != want {
		t.Errorf("screens/s over the run %v, want %v", r.RunThroughput(), want)
	}
	// a huge Concurrent runs at most a batch per run at once
	opts.Concurrent = 1 << 30
	c = &concurrentBatch{both: make(chan struct{})}
	c.once.Do(func() { close(c.both) }) // no wait
	if _, batches, err := RunBatch(context.Background(), c, cases, opts); err != nil || len(batches) != 4 || c.most > 4 {
		t.Fatalf("Concurrent 1<<30: %d batches, %d at once, %v", len(batches), c.most, err)
	}
}

// pipelineBatch holds each batch in the engine until the next batch's
// screens are all resized (Options.Shrink), or 5 s: a pipeline resizes
// batch k+1 while batch k is predicted.
type pipelineBatch struct {
	fakePredictor
	mu          sync.Mutex
	shrunk      int // screens resized so far
	calls       int
	waited      []bool // by call: the next batch's screens were resized during it
	notShrunk   int    // screens that reached the engine at full size
	batch, runs int
}

func (p *pipelineBatch) shrink(image.Image) image.Image {
	p.mu.Lock()
	p.shrunk++
	p.mu.Unlock()
	return image.NewRGBA(image.Rect(0, 0, 8, 8))
}

func (p *pipelineBatch) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	p.mu.Lock()
	k := p.calls
	p.calls++
	for _, r := range reqs {
		if r.Screen.Bounds().Dx() != 8 {
			p.notShrunk++
		}
	}
	p.mu.Unlock()
	ok := true
	if k < p.runs-1 {
		ok = false
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			p.mu.Lock()
			ok = p.shrunk >= p.batch*(k+2)
			p.mu.Unlock()
			if ok {
				break
			}
		}
	}
	p.mu.Lock()
	p.waited = append(p.waited, ok)
	p.mu.Unlock()
	return p.fakePredictor.PredictBatch(ctx, reqs)
}

// Pipelined, each batch's screens are resized while the batch before is
// predicted, the engine gets them resized, one batch at a time, in run
// order, and the report gives the screens/s over the run.
func TestRunBatchPipelined(t *testing.T) {
	cases := smallCases(t)
	p := &pipelineBatch{batch: 3, runs: 4}
	opts := Options{Runs: 4, Tokens: 5, Batch: 3, Pipeline: true, Shrink: p.shrink}
	actions, batches, err := RunBatch(context.Background(), p, cases, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 4 || len(actions) != 12 || p.notShrunk != 0 || p.shrunk != 12 {
		t.Fatalf("%d batches, %d actions, %d screens at full size, %d resized", len(batches), len(actions), p.notShrunk, p.shrunk)
	}
	for k, ok := range p.waited {
		if !ok {
			t.Errorf("batch %d: the next batch was not resized while it was predicted", k)
		}
	}
	for i, b := range batches {
		if b.Run != i || b.Decode <= 0 || b.Wall < b.Decode {
			t.Fatalf("batch %d: %+v", i, b)
		}
		if i > 0 && b.Start.Before(batches[i-1].Start) {
			t.Errorf("batch %d starts before batch %d", i, i-1)
		}
	}
	r := NewReport("autoui-go", "base", 2, "cpu", opts, cases, actions)
	r.Batches = batches
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil || r.RunThroughput() <= 0 || !strings.Contains(table.String(), "pipelined") {
		t.Fatalf("%v, %v screens/s over the run: %s", err, r.RunThroughput(), table.String())
	}
	if _, _, err := RunBatch(context.Background(), p, cases, Options{Runs: 1, Tokens: 5, Batch: 3, Pipeline: true}); err == nil {
		t.Error("pipelined without Shrink: no error")
	}
}
