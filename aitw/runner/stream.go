package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/predict"
)

// streamQueue feeds the steps to one continuous decode (Options.Continuous:
// the predictor's Stream), which takes a step into a free row between two
// decoder calls and answers it as soon as its own answer ends: a long
// answer holds up its row, not a batch. Rows is Batch.
//
// With gold history the steps join in reading order and their lines are
// written in that order, Batch 1's: a step that finishes before an earlier
// one waits (its prediction only; its features are cached at once). A run
// that stops early (a refused step, Ctrl-C) writes the unbroken run of
// finished steps from the start, as batches do, so a resumed run still
// writes Batch 1's order; the later finished ones are predicted again (from
// the cached features). With predicted history each of up to Batch episodes
// has its next step in the decode, the one after joining once its
// prediction is written; lines come in the order the steps finish.
//
// The run's goroutine reads, hands steps over and writes; the decode runs on
// a goroutine of its own and sends each answer back (streamDone). At most
// 2*Batch steps are handed over and not yet back, so at most Batch wait for
// a row while Batch decode.
type streamQueue struct {
	r       *run
	s       predict.Streamer
	gold    bool
	joinMin int // Options.JoinMin, at least 1
	// ctx is the decode's: cancelled by the run's, or by a failed step.
	ctx    context.Context
	cancel context.CancelFunc

	feed    chan struct{}   // cap 1: a step was handed over
	pending chan streamJob  // handed over, not yet taken by the decode
	closed  chan struct{}   // no step will be handed over any more
	done    chan streamDone // answers, from the decode's goroutine
	ended   chan error      // the decode's return
	running bool            // the decode was started
	over    bool            // it returned
	shut    bool            // closed is closed

	seq      int                   // the next step's number
	out      int                   // handed over and not back
	inflight map[int]streamStep    // by number
	queued   map[aitw.StepKey]bool // gold: handed over, not written
	// gold: finished steps waiting for earlier ones, and the next to write
	next     int
	finished map[int]streamStep
	// predicted: the episodes with a step in the decode or waiting for room
	active []*episodeRun
	err    error // the first failure: ends the run
	// dropped counts the steps handed over that came back without an
	// answer; writing stops (gold) at the first of them, or at a failed
	// write (wrote false).
	dropped int
	wrote   bool
}

// streamStep is a step handed over: its job without the screen (once
// answered, only what writing its line needs), its episode under predicted
// history, and its answer.
type streamStep struct {
	job    job
	ep     *episodeRun
	pred   aitw.Prediction
	tokens int
}

type streamJob struct {
	seq int
	job predict.Job
}

type streamDone struct {
	seq int
	res *predict.Result
	err error
}

func newStreamQueue(r *run, s predict.Streamer, gold bool) *streamQueue {
	q := &streamQueue{r: r, s: s, gold: gold, joinMin: min(max(r.opts.JoinMin, 1), r.batch), feed: make(chan struct{}, 1), closed: make(chan struct{}),
		pending: make(chan streamJob, 2*r.batch), done: make(chan streamDone, 2*r.batch), ended: make(chan error, 1),
		inflight: map[int]streamStep{}, queued: map[aitw.StepKey]bool{}, finished: map[int]streamStep{}, wrote: true}
	q.ctx, q.cancel = context.WithCancel(r.ctx)
	return q
}

// isDone reports whether a step is predicted or handed over to be.
func (q *streamQueue) isDone(ep aitw.Episode, s aitw.Step) bool {
	if _, ok := q.r.isDone(ep, s); ok {
		return true
	}
	return q.queued[aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}]
}

func (q *streamQueue) add(ep readEpisode) error {
	if q.gold {
		return q.addGold(ep)
	}
	return q.addEpisode(ep)
}

func (q *streamQueue) addGold(ep readEpisode) error {
	return q.r.eachPending(ep, q.isDone, func(i int, history []action.Action, last bool) error {
		if err := q.room(); err != nil {
			return err
		}
		j := q.r.newJob(ep, i, history)
		j.last = last
		if err := q.hand(j, nil); err != nil {
			q.fail(err)
			return q.end(false)
		}
		return nil
	})
}

// room waits until a step may be handed over; at the limit, on Ctrl-C or
// after a failure it lets the decode finish and ends the run.
func (q *streamQueue) room() error {
	for {
		if q.err != nil || q.r.ctx.Err() != nil || q.r.room() <= q.out+len(q.finished) {
			return q.end(true)
		}
		if q.out < 2*q.r.batch {
			return nil
		}
		q.receive()
	}
}

func (q *streamQueue) addEpisode(ep readEpisode) error {
	r := q.r
	x := r.newEpisode(ep, q.active)
	if x == nil {
		return nil
	}
	for len(q.active) >= r.batch {
		if q.err != nil || r.ctx.Err() != nil || q.out == 0 {
			return q.end(true) // the limit left the active episodes without a step
		}
		q.receive()
	}
	q.active = append(q.active, x)
	q.handNext(x)
	return nil
}

// handNext hands over x's next step, when the limit leaves room; a step
// that cannot be (its screen) fails the run.
func (q *streamQueue) handNext(x *episodeRun) {
	if q.err != nil || q.r.ctx.Err() != nil || q.r.room() <= q.out {
		return
	}
	if err := q.hand(q.r.newJob(x.ep, x.next, x.history), x); err != nil {
		q.fail(err)
	}
}

// hand gives a step to the decode, starting it with the first.
func (q *streamQueue) hand(j job, x *episodeRun) error {
	reqs, err := requests([]job{j})
	if err != nil {
		return err
	}
	j.step.Pixels, j.screen = nil, nil // the request holds the screen now
	seq := q.seq
	q.seq++
	q.inflight[seq] = streamStep{job: j, ep: x}
	if q.gold {
		q.queued[j.key()] = true
	}
	q.out++
	q.pending <- streamJob{seq: seq, job: predict.Job{Ctx: q.ctx, Req: reqs[0], Done: func(res *predict.Result, err error) {
		q.done <- streamDone{seq: seq, res: res, err: err} // room for every step out: never blocks
	}}}
	select {
	case q.feed <- struct{}{}:
	default:
	}
	if !q.running {
		q.running = true
		go func() { q.ended <- q.s.Stream(q.ctx, q.r.batch, q.take) }()
	}
	return nil
}

// take is the decode's next: the steps handed over, as many as rows are
// free, once JoinMin can join (or the decode is idle, or the last steps are
// left), waiting for one when no row is busy. Only the decode's goroutine
// takes from pending, so len counts steps it can take.
func (q *streamQueue) take(free int, wait bool) ([]predict.Job, bool) {
	for {
		closed := false
		select {
		case <-q.closed:
			closed = true
		default:
		}
		if n := min(free, len(q.pending)); n > 0 && (wait || closed || n >= q.joinMin) {
			jobs := make([]predict.Job, n)
			for i := range jobs {
				jobs[i] = (<-q.pending).job
			}
			return jobs, true
		}
		if !wait {
			return nil, true
		}
		if closed {
			return nil, false // nothing handed over, and nothing will be
		}
		select {
		case <-q.closed:
		case <-q.ctx.Done():
			return nil, false
		case <-q.feed:
		}
	}
}

// receive waits for one answer, or for the decode's end, and takes it in.
func (q *streamQueue) receive() {
	select {
	case d := <-q.done:
		q.take1(d)
	case err := <-q.ended:
		q.over = true
		// steps it never took are not coming back
		n := 0
		for ; ; n++ {
			select {
			case j := <-q.pending:
				delete(q.inflight, j.seq)
				q.out--
				continue
			default:
			}
			break
		}
		if err != nil && q.ctx.Err() == nil {
			q.fail(fmt.Errorf("continuous decode: %w", err))
		}
		q.dropped += n
	}
}

// take1 takes in one step's answer: its features cached and its prediction
// written now (predicted history, the episode's next step handed over) or
// once every earlier step's is (gold).
func (q *streamQueue) take1(d streamDone) {
	st := q.inflight[d.seq]
	delete(q.inflight, d.seq)
	q.out--
	if d.err != nil {
		q.dropped++ // predicted again by a resumed run
		var re *predict.RequestError
		switch {
		case errors.As(d.err, &re):
			q.fail(fmt.Errorf("%s: %w", &st.job, d.err))
		case q.ctx.Err() == nil || !errors.Is(d.err, q.ctx.Err()):
			// a decoder call fails every step decoding, not this one
			q.fail(fmt.Errorf("continuous decode (%d steps handed over, %s the first to fail): %w", q.seq, &st.job, d.err))
		}
		return
	}
	pred, err := q.r.record(&st.job, d.res)
	if err != nil {
		q.dropped++
		q.fail(err)
		return
	}
	st.pred, st.tokens = pred, len(d.res.TokenIDs)
	if q.gold {
		// only what its line needs waits: not the request's features
		j := &st.job
		st.job = job{episode: j.episode, step: aitw.Step{StepID: j.step.StepID, Source: j.step.Source}, last: j.last}
		q.finished[d.seq] = st
		q.writeInOrder()
		return
	}
	if !q.write(st) {
		return
	}
	x := st.ep
	x.predicted(pred)
	if q.r.skipDone(x) {
		q.handNext(x)
		return
	}
	q.r.prog.Add(1)
	for i, a := range q.active {
		if a == x {
			q.active = append(q.active[:i], q.active[i+1:]...)
			break
		}
	}
}

// writeInOrder writes the finished steps up to the first still decoding,
// or dropped: the ones after that are left to a resumed run, so that the
// lines keep Batch 1's order.
func (q *streamQueue) writeInOrder() {
	for q.wrote {
		st, ok := q.finished[q.next]
		if !ok {
			return
		}
		delete(q.finished, q.next)
		delete(q.queued, st.job.key())
		q.next++
		q.write(st)
	}
}

// write appends a step's line, reporting whether it was written.
func (q *streamQueue) write(st streamStep) bool {
	if !q.wrote {
		return false
	}
	if err := q.r.append(&st.job, st.pred); err != nil {
		q.wrote = false
		q.fail(err)
		return false
	}
	q.r.sum.Decode.Tokens += st.tokens
	if q.r.sum.Predicted >= q.r.batch { // the stream's first rows: its first join
		q.r.warmedUp()
	}
	return true
}

func (q *streamQueue) fail(err error) {
	if q.err == nil {
		q.err = err
		q.cancel()
	}
}

func (q *streamQueue) finish() error {
	if q.gold {
		return q.end(false)
	}
	for len(q.active) > 0 && q.out > 0 {
		q.receive()
	}
	return q.end(len(q.active) > 0)
}

// end closes the feed, takes in every answer of the steps handed over and
// the decode's return, writes what finished (gold: in order, past the steps
// that were dropped) and says how the run ends: the first failure, Ctrl-C,
// the limit (limited: a step was left for want of room), or nil.
func (q *streamQueue) end(limited bool) error {
	if !q.shut {
		q.shut = true
		close(q.closed)
	}
	for q.out > 0 || (q.running && !q.over) {
		q.receive()
	}
	q.writeInOrder()
	clear(q.finished) // past a dropped step: a resumed run predicts them
	q.cancel()
	switch {
	case q.err != nil:
		return q.err
	case q.r.ctx.Err() != nil && (limited || q.dropped > 0):
		q.r.sum.Interrupted = true
		return errStop
	case limited:
		return q.r.stop()
	}
	return nil
}
