package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/autoui/autoui/predict"
)

// captureThread runs every call on one OS thread, one at a time, and hands
// a panic back to the caller.
func TestCaptureThread(t *testing.T) {
	var c captureThread
	defer c.close()
	var mu sync.Mutex
	tids := map[int]bool{}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				c.do(func() {
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
			}
		})
	}
	wg.Wait()
	if len(tids) != 1 || most.Load() != 1 {
		t.Errorf("calls ran on %d threads, up to %d at once; want 1 and 1", len(tids), most.Load())
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the call's panic", r)
			}
		}()
		c.do(func() { panic("boom") })
	}()
	ran := false
	c.do(func() { ran = true }) // the thread outlives a call's panic
	if !ran {
		t.Error("no call after a panic")
	}
	var never captureThread
	never.close() // never started: nothing to end
}

// Under capture, every decode of a predictor runs on the one capture
// thread, whichever goroutine asked, from features and from screens (the
// prompts encoded while the screens are resized, the vision tower after),
// and gives the golden tokens.
func TestCaptureOnOneThread(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	p.statics.capture, p.overlapPrefill = true, true
	var mu sync.Mutex
	tids := map[int]bool{}
	p.newCallHook = func(stepper) {
		mu.Lock()
		tids[syscall.Gettid()] = true
		mu.Unlock()
	}
	staticConcurrent(t, p)
	cases := loadGolden(t)[:3]
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			if err != nil {
				t.Error(err)
				return
			}
			if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
				t.Errorf("%s from its screen: ids differ from golden", c.ID)
			}
		})
	}
	wg.Wait()
	if _, err := p.ImageFeatures(context.Background(), screen(t, cases[0].Screen)); err != nil {
		t.Fatal(err)
	}
	if len(tids) != 1 {
		t.Errorf("decodes ran on %d OS threads, want 1", len(tids))
	}
}
