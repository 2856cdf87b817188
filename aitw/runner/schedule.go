package runner

import (
	"errors"
	"slices"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// goldQueue batches steps in reading order. With gold history a step's
// prompt is known as soon as its episode is read, so pending steps of one
// episode or of several share a call, and lines come out in Batch 1's order.
// At most Batch-1 steps wait beyond the episode being read.
type goldQueue struct {
	r      *run
	jobs   []job
	queued map[aitw.StepKey]bool // the jobs' steps, so that a repeat is not queued twice
}

// done reports whether a step is predicted or queued to be.
func (q *goldQueue) done(ep aitw.Episode, s aitw.Step) bool {
	if _, ok := q.r.isDone(ep, s); ok {
		return true
	}
	return q.queued[aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}]
}

func (q *goldQueue) add(ep readEpisode) error {
	return q.r.eachPending(ep, q.done, func(i int, history []action.Action, last bool) error {
		return q.push(ep, i, history, last)
	})
}

// eachPending calls push for each step of ep not done, with its gold
// history and whether it is the episode's last step not done; a step done
// counts as already done, an episode with none left as visited.
func (r *run) eachPending(ep readEpisode, done func(aitw.Episode, aitw.Step) bool, push func(i int, history []action.Action, last bool) error) error {
	last := lastPending(ep.Episode, done)
	if last < 0 {
		r.prog.Add(1)
	}
	var history []action.Action
	for i, s := range ep.Steps {
		if done(ep.Episode, s) {
			r.sum.AlreadyDone++
		} else if err := push(i, history, i == last); err != nil {
			return err
		}
		// Later appends never touch the prefix queued jobs hold.
		history = append(history, s.Action)
	}
	return nil
}

// push queues a step, predicting the queue once it holds a batch. A step
// past the limit (or after Ctrl-C) predicts what is queued, writes what is
// in flight and stops.
func (q *goldQueue) push(ep readEpisode, i int, history []action.Action, last bool) error {
	r := q.r
	if r.ctx.Err() != nil || r.room() <= len(q.jobs) {
		if err := q.finish(); err != nil {
			return err
		}
		return r.stop()
	}
	j := r.newJob(ep, i, history)
	j.last = last
	q.jobs = append(q.jobs, j)
	if q.queued == nil {
		q.queued = map[aitw.StepKey]bool{}
	}
	q.queued[j.key()] = true
	if len(q.jobs) >= r.batch {
		return q.flush()
	}
	return nil
}

func (q *goldQueue) finish() error {
	if err := q.flush(); err != nil {
		return err
	}
	return q.collect(0)
}

// flush starts a call for the queued steps, once fewer than
// Options.Concurrent calls are in flight.
func (q *goldQueue) flush() error {
	if len(q.jobs) == 0 {
		return nil
	}
	if err := q.collect(q.r.concurrent - 1); err != nil {
		return err
	}
	jobs := q.jobs
	q.jobs = nil // the call's now
	if err := q.r.start(jobs); err != nil {
		// stopped (Ctrl-C): what the calls in flight finished is written
		if cerr := q.collect(0); cerr != nil && !errors.Is(cerr, errStop) {
			return cerr
		}
		return err
	}
	return nil
}

// collect writes the oldest calls' predictions until at most n are in
// flight.
func (q *goldQueue) collect(n int) error {
	for len(q.r.inflight) > n {
		c := q.r.inflight[0]
		_, err := q.r.collect()
		for i := range c.jobs {
			delete(q.queued, c.jobs[i].key()) // written now, or the run stops
		}
		clear(c.jobs) // drop the pixels
		if err != nil {
			return err
		}
	}
	return nil
}

// lastPending is the index of the episode's last step not done (neither
// predicted nor queued), -1 if none.
func lastPending(ep aitw.Episode, done func(aitw.Episode, aitw.Step) bool) int {
	for i := len(ep.Steps) - 1; i >= 0; i-- {
		if !done(ep, ep.Steps[i]) {
			return i
		}
	}
	return -1
}

// episodeSet batches across episodes for predicted history: a step's prompt
// holds its own episode's previous predictions, so a call takes the next
// step of up to Batch episodes, each moving on once its prediction is
// written. With Concurrent calls in flight, each takes episodes none of the
// others holds. At most Batch x Concurrent episodes are held beyond the one
// being read, each with the screens of its steps not yet predicted.
type episodeSet struct {
	r      *run
	active []*episodeRun   // each with a pending step, oldest first
	calls  [][]*episodeRun // the episodes of each call in flight, as run.inflight
}

// episodeRun is an episode being predicted.
type episodeRun struct {
	ep      readEpisode
	next    int // index of its next step to predict
	history []action.Action
	busy    bool // its next step is in a call in flight
}

// newEpisode is ep to predict with predicted history, past its steps
// already done; nil when none is left, or when it repeats an episode in
// active (its steps are that one's).
func (r *run) newEpisode(ep readEpisode, active []*episodeRun) *episodeRun {
	for _, a := range active {
		if a.ep.ID == ep.ID {
			r.sum.AlreadyDone += len(ep.Steps)
			r.prog.Add(1)
			return nil
		}
	}
	x := &episodeRun{ep: ep}
	if !r.skipDone(x) {
		r.prog.Add(1)
		return nil
	}
	return x
}

// predicted moves x past its next step, whose prediction is pred.
func (x *episodeRun) predicted(pred aitw.Prediction) {
	// Later appends never touch the prefix the jobs held.
	x.history = appendHistory(x.history, HistoryPredicted, x.ep.Steps[x.next].Action, pred.Action)
	x.ep.dropScreen(x.next) // predicted: its screen is not needed again
	x.next++
}

func (e *episodeSet) add(ep readEpisode) error {
	x := e.r.newEpisode(ep, e.active)
	if x == nil {
		return nil
	}
	e.active = append(e.active, x)
	for e.idle() >= e.r.batch {
		if err := e.round(); err != nil {
			return err
		}
	}
	return nil
}

func (e *episodeSet) finish() error {
	for len(e.active) > 0 {
		var err error
		if e.idle() > 0 {
			err = e.round()
		} else {
			err = e.collect()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// idle counts the active episodes whose next step is in no call.
func (e *episodeSet) idle() int {
	n := 0
	for _, x := range e.active {
		if !x.busy {
			n++
		}
	}
	return n
}

// round starts a call for the next step of the oldest idle episodes, up to
// Batch and as many as the limit allows, then writes the oldest calls
// while Concurrent are in flight. At the limit (or after Ctrl-C) it writes
// the calls in flight and stops.
func (e *episodeSet) round() error {
	r := e.r
	n := min(e.idle(), r.batch, r.room())
	if n <= 0 || r.ctx.Err() != nil {
		for len(e.calls) > 0 {
			if err := e.collect(); err != nil {
				return err
			}
		}
		return r.stop()
	}
	var xs []*episodeRun
	for _, x := range e.active {
		if !x.busy && len(xs) < n {
			xs = append(xs, x)
		}
	}
	jobs := make([]job, n)
	for i, x := range xs {
		jobs[i] = r.newJob(x.ep, x.next, x.history)
		x.busy = true
	}
	if err := r.start(jobs); err != nil {
		return err
	}
	e.calls = append(e.calls, xs)
	for len(e.calls) >= r.concurrent {
		if err := e.collect(); err != nil {
			return err
		}
	}
	return nil
}

// collect writes the oldest call in flight, moves its episodes on and drops
// those that are finished.
func (e *episodeSet) collect() error {
	r := e.r
	xs := e.calls[0]
	e.calls = e.calls[1:]
	preds, err := r.collect()
	if err != nil {
		return err
	}
	done := map[*episodeRun]bool{}
	for i, x := range xs {
		x.predicted(preds[i])
		x.busy = false
		if !r.skipDone(x) {
			done[x] = true
			r.prog.Add(1)
		}
	}
	e.active = slices.DeleteFunc(e.active, func(x *episodeRun) bool { return done[x] })
	return nil
}

// skipDone moves x past steps already in the predictions file (their
// predictions join its history) and reports whether a step is left.
func (r *run) skipDone(x *episodeRun) bool {
	for ; x.next < len(x.ep.Steps); x.next++ {
		s := x.ep.Steps[x.next]
		prev, ok := r.isDone(x.ep.Episode, s)
		if !ok {
			return true
		}
		r.sum.AlreadyDone++
		x.history = appendHistory(x.history, HistoryPredicted, s.Action, prev.Action)
		x.ep.dropScreen(x.next) // predicted earlier in this run (a repeat): not needed
	}
	return false
}
