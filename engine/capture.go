package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// captureThread runs a capturing predictor's engine calls on one OS thread,
// one at a time (and, a second one, its prefills beside them:
// statics.prefill).
//
// ORT's CUDA provider keeps its captured CUDA graphs, and the run counts that
// decide when to capture, per OS thread (its PerThreadContext): a run on
// another thread does not see a graph captured on this one, and captures its
// own copy after two plain runs. A goroutine may move between threads between
// any two cgo calls, so the calls of a decode would capture the same graphs
// again on thread after thread. Hence under capture every decode (and
// ImageFeatures) runs on this goroutine, locked to its thread. One call at a
// time is what capture needs anyway: ORT captures in CUDA's global mode (no
// other CUDA work of the process may run meanwhile: statics.gate keeps the
// prefills beside out), and the graphs of one session share the memory its
// arena lent them while capturing.
type captureThread struct {
	start, stop sync.Once
	work        chan func()
	quit        chan struct{} // closed by close
}

// errClosed is do's error once the predictor is closed.
var errClosed = errors.New("predictor closed")

// capturePanic is a panic of a call on the thread, re-raised in its caller
// with the stack where it happened.
type capturePanic struct {
	value any
	stack []byte
}

func (p capturePanic) String() string {
	return fmt.Sprintf("%v [on the capture thread]\n%s", p.value, p.stack)
}

// exited marks a call that ended its goroutine (runtime.Goexit, as
// testing's FailNow does).
var exited = new(int)

// do runs f on the thread and returns when it has, or when ctx ends before
// f starts. A panic in f is re-raised here; a runtime.Goexit in f ends the
// caller's goroutine too, and a new thread takes over later calls.
func (c *captureThread) do(ctx context.Context, f func()) error {
	c.start.Do(func() {
		c.work, c.quit = make(chan func()), make(chan struct{})
		go c.loop()
	})
	done := make(chan any, 1)
	call := func() {
		returned := false
		defer func() {
			r := recover()
			switch {
			case r != nil:
				r = capturePanic{value: r, stack: debug.Stack()}
			case !returned:
				r = exited
			}
			done <- r
		}()
		f()
		returned = true
	}
	select {
	case c.work <- call:
	case <-c.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	switch r := <-done; {
	case r == exited:
		runtime.Goexit()
	case r != nil:
		panic(r)
	}
	return nil
}

// loop runs the calls, locked to its thread for good (the thread ends with
// the goroutine). A call that ends the goroutine hands the work to a new one.
func (c *captureThread) loop() {
	runtime.LockOSThread()
	finished := false
	defer func() {
		if !finished {
			go c.loop()
		}
	}()
	for {
		select {
		case f := <-c.work:
			f()
		case <-c.quit:
			finished = true
			return
		}
	}
}

// close ends the thread; later calls of do return errClosed. Closing twice
// is fine.
func (c *captureThread) close() {
	c.start.Do(func() { c.quit = make(chan struct{}) }) // never started: nothing runs
	c.stop.Do(func() { close(c.quit) })
}
