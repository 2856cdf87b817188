package runner

import (
	"image"
	"sync"
	"time"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/engine/preprocess"
)

// readAheadBytes bounds the screens read ahead of the engine: about one
// batch of full-size AITW screenshots (1080x2400 RGB, 7.8 MB each), so the
// next batch is read while one is predicted: 640 MB at the cuda default of
// 64, 64 MB at the cpu's 4. (The Go heap may grow to twice what is live.)
// On top of it: the episodes being prepared (prepareAhead, and one passed
// on each way) and, with --read-files N, N files' next turns and unfinished
// episodes (aitw.ReadOptions.Interleave): ~10 episodes at cuda's defaults,
// ~0.6 GB of full-size AITW episodes of 8 steps.
func readAheadBytes(batch int) int64 {
	const perStep, least = 10 << 20, 64 << 20
	return max(least, int64(batch)*perStep)
}

// prepareAhead bounds the episodes prepared at once (hashed for the feature
// cache, shrunk): on top of the read-ahead's budget.
const prepareAhead = 4

// readEpisode is an episode as the read-ahead hands it over, with the
// feature cache's answer for each step the engine would otherwise see
// (found is nil without a cache). Screens not needed any more (a cache hit,
// a step already predicted) are dropped before it is queued.
type readEpisode struct {
	aitw.Episode
	found []lookup // by step; zero where there is nothing to look up
	// screens holds by step the screens shrunk ahead (Options.Shrink),
	// nil without it; a step's Pixels are dropped once shrunk.
	screens []image.Image
	bytes   int64 // screen bytes held, counted against the budget
}

// screen returns step i's screen shrunk ahead, or nil.
func (e *readEpisode) screen(i int) image.Image {
	if e.screens == nil {
		return nil
	}
	return e.screens[i]
}

// dropScreen lets step i's screen go: it is predicted.
func (e *readEpisode) dropScreen(i int) {
	e.Steps[i].Pixels = nil
	if e.screens != nil {
		e.screens[i] = nil
	}
}

// lookup returns the cache's answer for step i.
func (e *readEpisode) lookup(i int) lookup {
	if e.found == nil {
		return lookup{}
	}
	return e.found[i]
}

// readAhead calls fn with every episode of files in reading order, as
// aitw.StreamEpisodes does, but reads them in a goroutine of its own up to
// budget bytes of screens ahead of fn. Read episodes are prepared (their
// screens hashed for the feature cache and shrunk, spread over the cores)
// up to prepareAhead at once while the next ones are read. Inflating the
// records, hashing and shrinking the screens, ~15 ms of one core per
// full-size step, so overlap the engine's calls instead of following them.
// An error from fn stops the reading and is returned; a read error is
// returned after fn has had every episode read before it. Nothing is left
// reading or preparing when it returns.
func (r *run) readAhead(files []string, ro aitw.ReadOptions, budget int64, fn func(readEpisode) error) (aitw.ReadStats, error) {
	q := newEpisodeQueue(budget)
	type result struct {
		st  aitw.ReadStats
		err error
	}
	done := make(chan result, 1)
	read := make(chan aitw.Episode) // to the preparing; what it holds is not counted
	// Asked before every record, so that a stopped run does not wait for the
	// reader to find the next episode its split or shard keeps.
	ro.Stop = func() error {
		if q.quitting() || r.ctx.Err() != nil {
			return errStop
		}
		return nil
	}
	go func() {
		st, err := aitw.StreamEpisodes(files, ro, func(ep aitw.Episode) error {
			if q.quitting() {
				return errStop
			}
			select {
			case read <- ep:
				return nil
			case <-q.quit:
				return errStop
			}
		})
		close(read)
		done <- result{st, err}
	}()
	// Up to prepareAhead episodes are prepared at once, each on a goroutine
	// of its own, and queued in reading order: one episode's few steps
	// would leave a many-core host's cores idle.
	prepared := make(chan chan readEpisode, prepareAhead-1)
	go func() {
		defer close(prepared)
		for ep := range read {
			if q.quitting() {
				return
			}
			f := make(chan readEpisode, 1)
			select {
			case prepared <- f:
			case <-q.quit:
				return
			}
			go func() { f <- r.prepare(ep) }()
		}
	}()
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		stopped := false
		for f := range prepared { // every future, so none is left running
			if ep := <-f; !stopped && !q.put(ep) {
				stopped = true
			}
		}
		q.close()
	}()
	finished := false
	defer func() {
		if !finished { // fn panicked: stop the readers before going on up
			q.stop()
			<-queued
			<-done
		}
	}()
	for {
		t := time.Now()
		ep, ok := q.take()
		if !r.warm.IsZero() {
			r.reading += time.Since(t)
		}
		if !ok {
			break
		}
		if err := fn(ep); err != nil {
			q.stop()
			<-queued
			res := <-done
			finished = true
			return res.st, err
		}
	}
	<-queued
	res := <-done
	finished = true
	return res.st, res.err
}

// prepare looks up the steps' screens in the feature cache, shrinks them
// (Options.Shrink) and drops the screens that will not be used. It runs on
// up to prepareAhead goroutines at once: it reads only what does not change
// during a run (the predictions found at its start, the cache's key and
// directory). A screen seen again within the read-ahead misses the
// features this run has not stored yet, and is computed again.
func (r *run) prepare(ep aitw.Episode) readEpisode {
	e := readEpisode{Episode: ep}
	steps := ep.Steps
	if r.cache != nil {
		e.found = make([]lookup, len(steps))
	}
	if r.opts.Shrink != nil {
		e.screens = make([]image.Image, len(steps))
	}
	_ = preprocess.Parallel(len(steps), func(i int) error {
		s := &steps[i]
		done := r.doneAtStart(ep, *s)
		switch {
		case s.Pixels == nil || s.Features != nil:
		case done:
			s.Pixels = nil
		case r.cache != nil:
			e.found[i] = r.cache.find(*s)
			if e.found[i].features != nil {
				s.Pixels = nil
			}
		}
		if s.Pixels != nil && s.Features == nil && r.opts.Shrink != nil {
			// a screen that does not convert keeps its pixels: the engine's
			// call reports it, as without Shrink
			if img, err := preprocess.FromRaw(s.Pixels, s.Height, s.Width, s.Channels); err == nil {
				e.screens[i] = r.opts.Shrink(img)
				s.Pixels = nil
			}
		}
		return nil
	})
	for i, s := range steps {
		e.bytes += int64(len(s.Pixels))
		if img := e.screen(i); img != nil {
			e.bytes += max(shrunkStepBytes, 4*int64(img.Bounds().Dx()*img.Bounds().Dy()))
		}
	}
	return e
}

// shrunkStepBytes is what a shrunk screen (a few hundred KB) counts
// against the read-ahead's budget at least, so that the budget still bounds
// the steps read ahead to about ten batches: a screen seen again within the
// read-ahead misses the features stored after it was looked up.
const shrunkStepBytes = 1 << 20

// episodeQueue hands episodes from the reading goroutine to the run's,
// holding at most budget bytes of screens (and always at least one
// episode, however large).
type episodeQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	items   []readEpisode
	bytes   int64
	budget  int64
	closed  bool          // no more puts
	stopped bool          // the taker gave up: puts fail
	quit    chan struct{} // closed with stopped
}

func newEpisodeQueue(budget int64) *episodeQueue {
	q := &episodeQueue{budget: budget, quit: make(chan struct{})}
	q.cond.L = &q.mu
	return q
}

// put queues e once it fits the budget; false when the taker has stopped.
func (q *episodeQueue) put(e readEpisode) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.stopped && len(q.items) > 0 && q.bytes+e.bytes > q.budget {
		q.cond.Wait()
	}
	if q.stopped {
		return false
	}
	q.items = append(q.items, e)
	q.bytes += e.bytes
	q.cond.Broadcast()
	return true
}

// take returns the oldest episode, waiting for one; false once the queue
// is closed and empty.
func (q *episodeQueue) take() (readEpisode, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.items) == 0 {
		return readEpisode{}, false
	}
	e := q.items[0]
	q.items[0] = readEpisode{}
	q.items = q.items[1:]
	q.bytes -= e.bytes
	q.cond.Broadcast()
	return e, true
}

func (q *episodeQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// quitting reports whether the taker gave up (stop), without waiting.
func (q *episodeQueue) quitting() bool {
	select {
	case <-q.quit:
		return true
	default:
		return false
	}
}

// stop drops what is queued and makes every later put fail.
func (q *episodeQueue) stop() {
	q.mu.Lock()
	if !q.stopped {
		close(q.quit)
	}
	q.stopped = true
	q.items, q.bytes = nil, 0
	q.cond.Broadcast()
	q.mu.Unlock()
}
