package engine

import (
	"runtime"
	"sync"
)

// captureThread runs a capturing predictor's engine calls on one OS thread,
// one at a time.
//
// ORT's CUDA provider keeps its captured CUDA graphs, and the run counts that
// decide when to capture, per OS thread (its PerThreadContext): a run on
// another thread does not see a graph captured on this one, and captures its
// own copy after two plain runs. A goroutine may move between threads between
// any two cgo calls, so the calls of a decode would capture the same graphs
// again on thread after thread. Hence under capture every PredictBatch (and
// ImageFeatures) runs on this goroutine, locked to its thread. One call at a
// time is what capture needs anyway: ORT captures in CUDA's global mode (no
// other CUDA work of the process may run meanwhile), and the graphs of one
// session share the memory its arena lent them while capturing.
type captureThread struct {
	once sync.Once
	work chan func()
}

// do runs f on the thread and returns when it has; a panic in f is
// re-raised here.
func (c *captureThread) do(f func()) {
	c.once.Do(func() {
		c.work = make(chan func())
		go func() {
			runtime.LockOSThread() // for good: the thread ends with the goroutine
			for f := range c.work {
				f()
			}
		}()
	})
	done := make(chan any, 1)
	c.work <- func() {
		defer func() { done <- recover() }()
		f()
	}
	if r := <-done; r != nil {
		panic(r)
	}
}

// close ends the thread; do must not be called after.
func (c *captureThread) close() {
	c.once.Do(func() {}) // a thread never started stays so
	if c.work != nil {
		close(c.work)
	}
}
