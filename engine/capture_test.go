package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// captureThread runs every call on one OS thread, one at a time; hands a
// panic back to the caller; survives a call that ends its goroutine; stops
// taking calls when closed (twice is fine) or when the caller's context ends.
func TestCaptureThread(t *testing.T) {
	var c captureThread
	ctx := context.Background()
	var mu sync.Mutex
	tids := map[int]bool{}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				err := c.do(ctx, func() {
					n := inside.Add(1)
					defer inside.Add(-1)
					if n > most.Load() {
						most.Store(n)
					}
					time.Sleep(100 * time.Microsecond)
					mu.Lock()
					tids[syscall.Gettid()] = true
					mu.Unlock()
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(tids) != 1 || most.Load() != 1 {
		t.Errorf("calls ran on %d threads, up to %d at once; want 1 and 1", len(tids), most.Load())
	}
	func() {
		defer func() {
			if p, ok := recover().(capturePanic); !ok || p.value != "boom" || len(p.stack) == 0 {
				t.Errorf("recovered %v, want the call's panic with its stack", p)
			}
		}()
		c.do(ctx, func() { panic("boom") })
	}()
	exitedToo := make(chan bool)
	go func() {
		defer func() { exitedToo <- true }()
		c.do(ctx, func() { runtime.Goexit() })
		exitedToo <- false // not reached: the caller ends as the call did
	}()
	if !<-exitedToo {
		t.Error("a call's Goexit did not end its caller")
	}
	ran := false
	if err := c.do(ctx, func() { ran = true }); err != nil || !ran { // a new thread took over
		t.Errorf("a call after a panic and a Goexit: ran %v, %v", ran, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	block := make(chan struct{})
	go c.do(ctx, func() { <-block }) // the thread is busy
	time.Sleep(10 * time.Millisecond)
	if err := c.do(cancelled, func() { t.Error("a cancelled call ran") }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	close(block)
	c.close()
	c.close()
	if err := c.do(ctx, func() { t.Error("a call ran after close") }); !errors.Is(err, errClosed) {
		t.Errorf("after close: %v", err)
	}
	var never captureThread
	never.close()
	if err := never.do(ctx, func() { t.Error("a call ran after close") }); !errors.Is(err, errClosed) {
		t.Errorf("never started, closed: %v", err)
	}
}

// Under capture the vision tower is captured only where the bundle marks its
// graph capture-safe (the tiny bundle does); unmarked, it runs off the
// fixed buffers on its plain session, and gives the golden tokens. Without
// capture (the cpu provider) the mark changes nothing: fixed buffers.
func TestVisionCaptureNeedsMark(t *testing.T) {
	plain := placed(t, placeStatic, Options{})
	spec := plain.bundle.Manifest.Files[models.RoleVision]
	spec.CaptureSafe = false
	plain.bundle.Manifest.Files[models.RoleVision] = spec
	if _, err := plain.visionGraph(); err != nil || plain.visionFixed == nil || plain.visionFixed.capture {
		t.Fatalf("unmarked, no capture: fixed vision graph %v (%v); want one, not capturing", plain.visionFixed != nil, err)
	}
	marked := placed(t, placeStatic, Options{})
	marked.statics.capture = true
	if _, err := marked.visionGraph(); err != nil || !marked.VisionCaptureSafe() || marked.visionFixed == nil || !marked.visionFixed.capture {
		t.Fatalf("marked: no capturing fixed vision graph (%v; python -m scripts.upgrade_bundle models/testdata/tiny marks it)", err)
	}
	p := placed(t, placeStatic, Options{})
	p.bundle.Manifest.Files[models.RoleVision] = spec
	p.statics.capture = true
	if _, err := p.visionGraph(); err != nil || p.visionFixed != nil || p.vision.runOpts != nil {
		t.Fatalf("unmarked: fixed vision graph %v, run options %v (%v); want neither", p.visionFixed != nil, p.vision.runOpts != nil, err)
	}
	c := loadGolden(t)[0]
	res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
		t.Errorf("%s from its screen, tower uncaptured: ids differ from golden", c.ID)
	}
}

// Under capture, every decode and run on the vision tower's fixed buffers
// runs on the one capture thread, whichever goroutine asked (staticConcurrent's four), from
// features and from screens, and gives the golden tokens; while the vision
// tower may capture, it runs only once the prompts are encoded; a closed
// predictor refuses calls.
func TestCaptureOnOneThread(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	p.statics.capture, p.overlapPrefill = true, true
	if _, err := p.visionGraph(); err != nil || p.visionFixed == nil || !p.visionFixed.capture {
		t.Fatalf("no capturing fixed vision graph: %v", err)
	}
	var mu sync.Mutex
	tids := map[int]bool{}
	record := func() {
		mu.Lock()
		tids[syscall.Gettid()] = true
		mu.Unlock()
	}
	p.newCallHook = func(stepper) { record() }
	var encoded atomic.Bool
	var early, runs atomic.Int32
	p.prefillHook = func() {
		time.Sleep(50 * time.Millisecond) // encoding slower than resizing: the tower must wait
		encoded.Store(true)
	}
	p.visionFixed.runHook = func() {
		record()
		if runs.Add(1) <= capturingRuns && !encoded.Load() {
			early.Add(1)
		}
	}
	staticConcurrent(t, p)
	cases := loadGolden(t)[:3]
	for _, c := range cases { // one after another: each batch's prompts encoded afresh
		encoded.Store(false)
		res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
			t.Errorf("%s from its screen: ids differ from golden", c.ID)
		}
	}
	if _, err := p.ImageFeatures(context.Background(), screen(t, cases[0].Screen)); err != nil {
		t.Fatal(err)
	}
	if len(tids) != 1 || runs.Load() != 4 || early.Load() != 0 {
		t.Errorf("decodes and vision runs on %d OS threads (want 1); %d vision runs (want 4), %d of the first %d before their prompts were encoded (want 0)",
			len(tids), runs.Load(), early.Load(), capturingRuns)
	}
	p.Close()
	if _, err := p.Predict(context.Background(), cases[0].featureRequest(t)); !errors.Is(err, errClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// besideHold is a prefillHook for a prefill beside the capture thread that
// signals in once it runs, then holds the gate a while before done is set:
// a run that must not overlap it returns only after done.
type besideHold struct {
	in   chan struct{}
	done atomic.Bool
	tid  atomic.Int64
}

func newBesideHold() *besideHold { return &besideHold{in: make(chan struct{})} }

func (h *besideHold) hook() {
	h.tid.Store(int64(syscall.Gettid()))
	close(h.in)
	time.Sleep(200 * time.Millisecond)
	h.done.Store(true)
}

// wait waits for the held prefill to start (an error after a while).
func (h *besideHold) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.in:
	case <-time.After(10 * time.Second):
		t.Errorf("%s: no prefill ran beside the capture thread", what)
	}
}

// Under capture, a batch that needs no fixed vision buffers prefills on the
// prefill thread, beside another batch's decode on the capture thread;
// the thread's calls that may capture (a new buffer set's first calls) and
// its runs on the tower's fixed buffers wait for such a prefill; every
// batch gets the golden tokens.
func TestPrefillBesideCaptureThread(t *testing.T) {
	cases := loadGolden(t)[:2]
	p := placed(t, placeStatic, Options{})
	p.statics.capture = true
	var calls atomic.Int32
	var aTid atomic.Int64
	hold := newBesideHold()
	p.prefillHook = func() {
		if calls.Add(1) == 2 { // B's
			hold.hook()
		} else {
			aTid.Store(int64(syscall.Gettid()))
		}
	}
	aDecoding := make(chan struct{})
	var threadTid atomic.Int64
	var first sync.Once
	p.newCallHook = func(stepper) {
		threadTid.Store(int64(syscall.Gettid()))
		first.Do(func() {
			close(aDecoding)
			hold.wait(t, "batch B while batch A decodes") // B prefills now, or never
		})
	}
	predictOne := func(c goldenCase, bDone *atomic.Bool) <-chan error {
		errc := make(chan error, 1)
		go func() {
			res, err := p.Predict(context.Background(), c.featureRequest(t))
			switch {
			case err != nil:
			case !slices.Equal(res.TokenIDs, c.GeneratedIDs):
				err = errors.New(c.ID + ": ids differ from golden")
			case bDone != nil && !bDone.Load():
				err = errors.New("batch A's first decoder call, which may capture, ran beside batch B's prefill")
			}
			errc <- err
		}()
		return errc
	}
	a := predictOne(cases[0], &hold.done)
	<-aDecoding
	b := predictOne(cases[1], nil)
	for _, errc := range []<-chan error{a, b} {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if hold.tid.Load() == threadTid.Load() || hold.tid.Load() != aTid.Load() {
		t.Error("batches A and B prefilled on different OS threads, or on the capture thread (want the one prefill thread)")
	}

	// The tower's fixed buffers (ImageFeatures runs one screen on them)
	// wait for a prefill beside.
	q := placed(t, placeStatic, Options{})
	q.statics.capture = true
	hold = newBesideHold()
	q.prefillHook = hold.hook
	b = func() <-chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := q.Predict(context.Background(), cases[1].featureRequest(t))
			errc <- err
		}()
		return errc
	}()
	hold.wait(t, "a batch from features")
	if _, err := q.ImageFeatures(context.Background(), screen(t, cases[0].Screen)); err != nil {
		t.Fatal(err)
	}
	if !hold.done.Load() {
		t.Error("the vision tower ran on its fixed buffers beside a prefill")
	}
	if err := <-b; err != nil {
		t.Error(err)
	}

	// Batches of screens past the tower's fixed buffers (decoding on fixed
	// buffers of 16 rows, as --capture-rows 16 does) see them beside the
	// thread too, each batch its own.
	q = placed(t, placeStatic, Options{})
	q.statics.capture, q.graphRows = true, 2*captureRows
	screenBatchesAtOnce(t, q, loadGolden(t), captureRows+1, 2, "screens beside the capture thread")
}
