package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/predict"
)

// StreamRowsLimit bounds Stream's rows.
const StreamRowsLimit = 1024

// Stream decodes continuously on the static decoder's fixed buffers
// (Options.CUDAGraph): requests join between two decoder calls, on free
// rows, and leave as each finishes, so the rows stay busy however requests
// arrive (predict.Streamer). Each row has its own cache position (the
// static decoder's per-row position input), so a row that joins late starts
// at position 0 beside rows far into their answers.
//
// Each request gets the tokens it gets alone (PredictBatch's guarantee):
// every call feeds each busy row its tokens not yet cached and its drafts,
// and a row's positions are its own. Joining requests are prefilled
// together (screens, prompts, fusion: PredictBatch's first half) while the
// busy rows wait. The buffers follow the load: as many rows as the busy
// requests need (streamRows), and as long as the longest prompt so far, in
// steps of streamEncBucket; the busy rows move onto new buffers
// (kv.Static.Adopt) when joiners need more rows or a longer prompt joins,
// and onto fewer rows at a quarter full. The encoder length never shrinks
// within a stream. A join of several that fails is tried again one request
// at a time, so a request the engine refuses fails only itself. A failed
// decoder call fails every busy request and ends the stream with its error.
//
// It runs on the static decoder at every row count, captured under cuda,
// also past the rows up to which batches are (captureRows: at 64 rows the
// captured call measured slower than the device-resident one,
// docs/cuda.md).
//
// next is asked between calls, with wait set when no row is busy: it
// should then block until work comes or none will (Stream asks again at
// once). Every job's Done is called exactly once.
//
// With Options.OverlapJoins a join into a busy decode is prefilled beside
// its calls, on another goroutine, one join at a time: the calls go on and
// the joiners take their rows between two calls once their prefill is done
// (an idle decode still prefills in place: there is nothing to overlap).
// Under capture the prefill runs no graph that may be captured, and a call
// that may capture (the first of new buffers) waits for it: a capture must
// see no other CUDA work.
//
// Timings are PredictBatch's, per request: the join's prefill stages, Cross
// its cross projection (and the move onto new buffers, when it made one),
// the first decoder call with the cross projection in it as in decode, and
// the decoder calls it took part in; the pauses other requests' joins and
// the moves to fewer rows make are in no stage. Total runs from its first
// join.
func (p *Predictor) Stream(ctx context.Context, rows int, next func(free int, wait bool) ([]predict.Job, bool)) error {
	if p.decoderStatic == nil {
		return errors.New("continuous batching runs on the static decoder: open the model with --cuda-graph (Options.CUDAGraph)")
	}
	if rows <= 0 || rows > StreamRowsLimit {
		return fmt.Errorf("stream rows %d: want 1 to %d", rows, StreamRowsLimit)
	}
	var err error
	if cerr := p.engineCall(ctx, func() { err = p.stream(ctx, rows, next) }); cerr != nil {
		return cerr
	}
	return err
}

// StreamStats is where continuous decodes spend their time
// (Predictor.StreamStats): joins and the requests they started, decoder
// calls with their busy rows and the rows of their buffers, the moves of
// the busy rows onto other buffers, and the wall time of each.
type StreamStats struct {
	Joins, Joined int
	Calls         int
	BusyRows      int64 // summed over the calls
	Rows          int64 // the buffers' rows, summed over the calls
	Moves         int
	// Prefill is the time the joins held the decode (screens, prompts,
	// fusion, cross projection) but their moves, Decode the decoder
	// calls', Move the moves'.
	Prefill, Decode, Move time.Duration
	// Place is the part of Prefill that placed the prefilled joins on
	// their rows: the states as a value, new buffers (a first set, not a
	// move), and Join's parts.
	Place struct {
		States, Buffers time.Duration
		kv.JoinTimes
	}
	// Screens and Prompts are the parts of Prefill that prefilled the joins
	// in place (not beside the calls): their screens (resizing, the vision
	// tower) and their prompts (tokenizing, encoder, fusion).
	Screens, Prompts time.Duration
	// Beside counts the joins prefilled beside the calls
	// (Options.OverlapJoins) that started a request, as Joins counts,
	// BesideTime the time of every such prefill that landed, which is in
	// no other.
	Beside     int
	BesideTime time.Duration
}

func (a *StreamStats) add(b StreamStats) {
	a.Joins, a.Joined, a.Calls, a.Moves = a.Joins+b.Joins, a.Joined+b.Joined, a.Calls+b.Calls, a.Moves+b.Moves
	a.BusyRows, a.Rows = a.BusyRows+b.BusyRows, a.Rows+b.Rows
	a.Prefill, a.Decode, a.Move = a.Prefill+b.Prefill, a.Decode+b.Decode, a.Move+b.Move
	a.Beside, a.BesideTime = a.Beside+b.Beside, a.BesideTime+b.BesideTime
	a.Place.States, a.Place.Buffers = a.Place.States+b.Place.States, a.Place.Buffers+b.Place.Buffers
	a.Place.JoinTimes.Add(b.Place.JoinTimes)
	a.Screens, a.Prompts = a.Screens+b.Screens, a.Prompts+b.Prompts
}

// StreamStats is what every Stream of the predictor did so far (a server's
// stream runs for its life: counted as it goes).
func (p *Predictor) StreamStats() StreamStats {
	p.streamMu.Lock()
	defer p.streamMu.Unlock()
	return p.streamStats
}

// streamRow is a busy row of a stream: its request and its decoding.
type streamRow struct {
	job   predict.Job
	seq   *sequence
	res   *predict.Result
	start time.Time
	cross time.Duration // counted into its first decoder call, as decode does
	n     int           // positions cached
}

// streamState is a running stream: its buffers and rows.
type streamState struct {
	p        *Predictor
	set      staticSet // st: the buffers, nil until the first join
	key      staticKey
	rows     []*streamRow // by buffer row; nil: free
	busy     int
	maxRows  int         // Stream's rows: what next is offered
	capacity int         // every set's: a row keeps its positions when it moves
	stats    StreamStats // since the last flush into the predictor's
	overlap  bool        // Options.OverlapJoins
	pending  *pendingJoin
}

// pendingJoin is a join prefilling beside the decoder calls
// (Options.OverlapJoins); the stream places it between two calls once done
// is closed.
type pendingJoin struct {
	jobs  []predict.Job
	seqs  []*sequence
	res   []*predict.Result
	start time.Time
	done  chan struct{}
	fused encoded
	mask  []int64
	err   error
	took  time.Duration
	// panicked is a panic of the prefill, re-raised on the stream's
	// goroutine with the stack where it happened
	panicked any
}

// flush adds what the stream did since the last flush to the predictor's
// StreamStats.
func (s *streamState) flush() {
	s.p.streamMu.Lock()
	s.p.streamStats.add(s.stats)
	s.p.streamMu.Unlock()
	s.stats = StreamStats{}
}

// streamEncBucket is the step of a stream's encoder length: its buffers
// are as long as its longest prompt so far rounded up to it (few shapes to
// capture), and grow when a longer prompt joins (kv.Static.Adopt).
const streamEncBucket = 64

func (p *Predictor) stream(ctx context.Context, rows int, next func(free int, wait bool) ([]predict.Job, bool)) error {
	_, widest := p.streamWidth(1)
	s := &streamState{p: p, maxRows: rows, capacity: p.maxNew + widest, overlap: p.opts.OverlapJoins}
	broken := false
	defer func() {
		// a join still prefilling beside the calls here: a panic unwinds
		s.abandon(errors.New("continuous batching: the decode stopped"))
		s.release(broken)
		s.flush()
	}()
	more := true
	for calls := 0; ; {
		s.flush()
		s.leave()
		if pj := s.pending; pj != nil {
			if s.busy == 0 {
				<-pj.done // nothing to decode meanwhile
			}
			select {
			case <-pj.done:
				s.pending = nil
				s.timed(func() { s.land(ctx, pj) })
			default:
			}
		}
		// Beside the calls, a join waits for the few calls of new buffers
		// that may capture (which a prefill beside them would hold up).
		if free := s.maxRows - s.busy; more && free > 0 && s.pending == nil && !(s.overlap && s.busy > 0 && s.set.mayCapture()) {
			var jobs []predict.Job
			jobs, more = next(free, s.busy == 0)
			if len(jobs) > free {
				for _, j := range jobs[free:] {
					j.Done(nil, fmt.Errorf("continuous batching: %d jobs for %d free rows (programmer error)", len(jobs), free))
				}
				jobs = jobs[:free]
			}
			switch {
			case len(jobs) == 0:
			case s.overlap && s.busy > 0:
				s.begin(ctx, jobs, time.Now())
			default:
				t := time.Now()
				s.timed(func() { s.join(ctx, jobs, t) })
			}
		}
		if err := ctx.Err(); err != nil {
			s.failAll(err)
			s.abandon(err)
			return err
		}
		if s.busy == 0 {
			if !more && s.pending == nil {
				return nil
			}
			continue
		}
		if R := len(s.rows); R > 1 && 4*s.busy <= R && s.pending == nil {
			// a quarter full, with this call's joiners: onto buffers of
			// fewer rows, whose calls cost less (on a CPU by the row).
			// Should that fail, the decode goes on where it is. Not while
			// a join prefills beside the calls: the first calls on new
			// buffers may capture, and would wait for it.
			_ = s.resize(streamRows(2*s.busy, s.maxRows), s.key.enc)
		}
		if err := s.step(); err != nil {
			broken = true
			err = fmt.Errorf("decoder call %d: %w", calls, err)
			s.failAll(err)
			s.abandon(err)
			return err
		}
		calls++
	}
}

// timed runs a join's work on the stream (join, land), counting a join when
// it started a request and its time, but its moves', as the joins'.
func (s *streamState) timed(f func()) {
	t, moved, joined := time.Now(), s.stats.Move, s.stats.Joined
	f()
	if s.stats.Joined > joined { // not when every job was cancelled or refused
		s.stats.Joins++
	}
	s.stats.Prefill += time.Since(t) - (s.stats.Move - moved)
}

// begin starts prefilling jobs beside the calls (Options.OverlapJoins).
func (s *streamState) begin(ctx context.Context, jobs []predict.Job, start time.Time) {
	jobs, seqs, res := s.p.admit(jobs)
	if len(jobs) == 0 {
		return
	}
	pj := &pendingJoin{jobs: jobs, seqs: seqs, res: res, start: start, done: make(chan struct{})}
	reqs := requestsOf(jobs)
	itemErr, batchErr := batchErrors(len(jobs), "join")
	s.pending = pj
	s.p.statics.gate.RLock() // here, so that no call that may capture starts before the prefill does
	go func() {
		defer close(pj.done)
		defer s.p.statics.gate.RUnlock()
		defer func() {
			if r := recover(); r != nil {
				pj.panicked = fmt.Sprintf("%v [prefilling a join beside the calls]\n%s", r, debug.Stack())
			}
		}()
		t := time.Now()
		if err := s.p.statics.prefill.do(ctx, func() {
			pj.fused, pj.mask, pj.err = s.p.prefill(ctx, reqs, res, itemErr, batchErr, true)
		}); err != nil {
			pj.err = err
		}
		pj.took = time.Since(t)
	}()
}

// land places a join whose prefill ran beside the calls on free rows, or
// answers it as a join in place would.
func (s *streamState) land(ctx context.Context, pj *pendingJoin) {
	if pj.panicked != nil {
		panic(pj.panicked)
	}
	defer pj.fused.release()
	s.stats.BesideTime += pj.took
	joined := s.stats.Joined
	err := pj.err
	if err == nil {
		err = s.place(pj.jobs, pj.seqs, pj.res, pj.fused, pj.mask, pj.start)
	}
	if s.stats.Joined > joined {
		s.stats.Beside++
	}
	s.settle(ctx, pj.jobs, pj.start, err)
}

// abandon answers a join still prefilling beside the calls with err, once
// its prefill has returned: the stream ends.
func (s *streamState) abandon(err error) {
	pj := s.pending
	if pj == nil {
		return
	}
	s.pending = nil
	<-pj.done
	pj.fused.release()
	for _, j := range pj.jobs {
		j.Done(nil, err)
	}
	if pj.panicked != nil {
		panic(pj.panicked)
	}
}

// streamWidth is the positions per row of a stream's calls on buffers of
// rows rows, as a batch of that many rows has them: what a row's pending
// token and drafts may take (unaligned), and the call's width (aligned;
// with rows 1, every buffer set's widest).
func (p *Predictor) streamWidth(rows int) (draft, call int) {
	draft = 1
	if p.opts.Decoding != DecodeGreedy {
		draft = p.verifyWidth(rows)
	}
	return draft, alignUp(draft, p.align)
}

// streamRows is the buffers' rows for n busy ones: a power of two up to
// 64, then a multiple of 64 (staticRows: few shapes to capture), at most
// most.
func streamRows(n, most int) int { return min(staticRows(max(n, 1)), most) }

// resize moves the stream onto buffers of rows rows of enc positions: kept
// ones of that shape or new ones, which take over the busy rows, packed
// first (kv.Static.Adopt). The old are kept for reuse when only the rows
// changed, and dropped when enc grew (a stream never goes back to a
// shorter length, and a server's stream runs for its life).
func (s *streamState) resize(rows, enc int) error {
	p := s.p
	t := time.Now()
	_, width := p.streamWidth(rows)
	key := staticKey{rows: rows, width: width, enc: enc, capacity: s.capacity}
	set, err := p.staticSet(key)
	if err != nil {
		return err
	}
	moved := make([]*streamRow, rows)
	var from []int
	for r, row := range s.rows {
		if row != nil {
			moved[len(from)] = row
			from = append(from, r)
		}
	}
	if len(from) > 0 {
		if err := set.st.Adopt(s.set.st, from); err != nil {
			p.statics.drop(set)
			return err
		}
		s.stats.Moves++
		defer func() { s.stats.Move += time.Since(t) }() // a first set, no rows on it: the join's time
		if p.adoptHook != nil {
			p.adoptHook(s.key, key)
		}
	}
	switch {
	case s.set.st == nil:
	case enc > s.key.enc:
		p.statics.drop(s.set)
		// and the kept sets of the shorter length, of every row count:
		// this stream never goes back to them
		p.statics.dropIf(func(k staticKey) bool { return k.capacity == s.capacity && k.enc < enc })
	default:
		p.statics.put(s.key, s.set)
	}
	s.set, s.key, s.rows = set, key, moved
	return nil
}

// release gives the buffers back for reuse (the next stream of their
// shape), or drops them when broken.
func (s *streamState) release(broken bool) {
	switch {
	case s.set.st == nil:
		return
	case broken:
		s.p.statics.drop(s.set)
	default:
		s.p.statics.put(s.key, s.set)
	}
	s.set = staticSet{}
}

// leave answers the rows whose requests were cancelled.
func (s *streamState) leave() {
	for r, row := range s.rows {
		if row == nil {
			continue
		}
		if err := row.job.Ctx.Err(); err != nil {
			s.free(r)
			row.job.Done(nil, err)
		}
	}
}

func (s *streamState) free(r int) {
	s.rows[r] = nil
	s.busy--
}

func (s *streamState) failAll(err error) {
	for r, row := range s.rows {
		if row != nil {
			s.free(r)
			row.job.Done(nil, err)
		}
	}
}

// join prefills jobs and starts them on free rows; a failed join of several
// is tried again one job at a time.
func (s *streamState) join(ctx context.Context, jobs []predict.Job, start time.Time) {
	jobs, seqs, res := s.p.admit(jobs)
	if len(jobs) == 0 {
		return
	}
	s.settle(ctx, jobs, start, s.start(ctx, jobs, seqs, res, start))
}

// admit answers the jobs that cannot join (cancelled, or a request the
// engine refuses) and returns the others with their sequences and results.
// A job's nil Ctx is the background.
func (p *Predictor) admit(jobs []predict.Job) ([]predict.Job, []*sequence, []*predict.Result) {
	var live []predict.Job
	var seqs []*sequence
	var res []*predict.Result
	for _, j := range jobs {
		if j.Ctx == nil {
			j.Ctx = context.Background()
		}
		if err := j.Ctx.Err(); err != nil {
			j.Done(nil, err)
			continue
		}
		r := &predict.Result{}
		seq, err := p.sequence(j.Req, &r.Timings)
		if err != nil {
			j.Done(nil, err)
			continue
		}
		live, seqs, res = append(live, j), append(seqs, seq), append(res, r)
	}
	return live, seqs, res
}

// settle answers a failed join's jobs: with err, one job or the stream's
// end, else each tried again alone, so that a request the engine refuses
// fails only itself.
func (s *streamState) settle(ctx context.Context, jobs []predict.Job, start time.Time, err error) {
	if err == nil {
		return
	}
	if len(jobs) == 1 || ctx.Err() != nil {
		for _, j := range jobs {
			j.Done(nil, err)
		}
		return
	}
	for _, j := range jobs {
		s.join(ctx, []predict.Job{j}, start)
	}
}

// start prefills the joining requests and places them on free rows.
func (s *streamState) start(ctx context.Context, jobs []predict.Job, seqs []*sequence, res []*predict.Result, start time.Time) error {
	itemErr, batchErr := batchErrors(len(jobs), "join")
	fused, mask, err := s.p.prefill(ctx, requestsOf(jobs), res, itemErr, batchErr, false)
	if err != nil {
		return err
	}
	defer fused.release()
	screens, prompts := prefillParts(res)
	s.stats.Screens += screens
	s.stats.Prompts += prompts
	return s.place(jobs, seqs, res, fused, mask, start)
}

// prefillParts is how long a prefill's screens and prompts took, from its
// results' timings: the shared stages once (predict.SharedStages), and
// each result's own tokenizing.
func prefillParts(res []*predict.Result) (screens, prompts time.Duration) {
	screens, prompts = predict.SharedStages(res)
	for _, r := range res {
		prompts += r.Timings.Tokenize
	}
	return screens, prompts
}

// requestsOf is the jobs' requests.
func requestsOf(jobs []predict.Job) []predict.Request {
	reqs := make([]predict.Request, len(jobs))
	for i, j := range jobs {
		reqs[i] = j.Req
	}
	return reqs
}

// place starts prefilled requests (fused states, mask) on free rows: their
// cross projection into the buffers, moved onto more rows or longer ones
// first when they need it.
func (s *streamState) place(jobs []predict.Job, seqs []*sequence, res []*predict.Result, fused encoded, mask []int64, start time.Time) error {
	p := s.p
	B := len(jobs)
	_, batchErr := batchErrors(B, "join")
	t := time.Now()
	states, done, err := fused.value(B, len(mask)/B, p.cfg.DModel)
	if err != nil {
		return batchErr(err)
	}
	defer done()
	s.stats.Place.States += time.Since(t)
	enc := min(alignUp(len(mask)/B, streamEncBucket), p.bundle.Manifest.Prompt.MaxSourceTokens)
	rows := len(s.rows)
	switch {
	case s.busy == 0:
		rows = streamRows(B, s.maxRows)
	case s.busy+B > rows:
		rows = streamRows(s.busy+B, s.maxRows)
	}
	if st := s.set.st; st == nil || enc > st.Enc() || rows != len(s.rows) {
		tb, moved := time.Now(), s.stats.Move
		err := s.resize(rows, max(enc, s.key.enc))
		s.stats.Place.Buffers += time.Since(tb) - (s.stats.Move - moved)
		if err != nil && (st == nil || enc > st.Enc() || s.busy+B > len(s.rows)) {
			return batchErr(fmt.Errorf("continuous batching: %w", err))
		} // else the buffers in place do, only larger than needed
	}
	at := make([]int, 0, B)
	for r, row := range s.rows {
		if row == nil && len(at) < B {
			at = append(at, r)
		}
	}
	tm, err := s.set.st.Join(at, states, mask)
	s.stats.Place.JoinTimes.Add(tm)
	if err != nil {
		return batchErr(err)
	}
	cross := time.Since(t)
	for i, j := range jobs {
		seq := seqs[i]
		seq.tm.Cross = cross
		p.draftWithPrompt(seq, res[i].SourceIDs)
		s.rows[at[i]] = &streamRow{job: j, seq: seq, res: res[i], start: start, cross: cross}
		s.busy++
		s.stats.Joined++
		if seq.done = seq.limit <= 0; seq.done {
			s.finish(at[i])
		}
	}
	return nil
}

// step runs one decoder call for every busy row at its own position, takes
// each row's tokens and answers the rows that finished.
func (s *streamState) step() error {
	p, st := s.p, s.set.st
	W, V := st.Width(), p.cfg.VocabSize
	eos, pad := p.bundle.Manifest.Tokens.EOSID, p.bundle.Manifest.Tokens.PadID
	for i := range st.IDs {
		st.IDs[i] = pad
	}
	draftWidth, _ := p.streamWidth(len(s.rows))
	logits := false
	drafts := make([][]int64, len(s.rows))
	k := 0
	for r, row := range s.rows {
		st.Pos[r] = 0
		if row == nil {
			continue
		}
		q := row.seq
		pending := len(q.tokens) - row.n
		if row.n+W > st.Capacity() {
			return fmt.Errorf("static decoder call at %d of %d positions, in a cache of %d (programmer error)", row.n, W, st.Capacity())
		}
		if budget := min(draftWidth-pending, q.limit-len(q.out())-1); budget > 0 && q.draft != nil {
			drafts[r] = q.draft.Draft(q.tokens, budget)
		}
		ids := st.IDs[r*W : (r+1)*W]
		n := copy(ids, q.tokens[row.n:])
		copy(ids[n:], drafts[r])
		st.Pos[r] = int64(row.n)
		k = max(k, pending+len(drafts[r]))
		logits = logits || sample.NeedsLogits(q.choose, q.out())
	}
	if p.stepHook != nil {
		p.stepHook(alignUp(k, p.align))
	}
	// a call that may capture sees no other CUDA work: a join prefilling
	// beside the calls would finish first (none is begun while the buffers
	// may capture, and they do not change while one prefills: stepStatic
	// holds that)
	t := time.Now()
	if err := p.stepStatic(s.set, logits); err != nil {
		return fmt.Errorf("run %s graph %s: %w", p.decoderStatic.role, p.decoderStatic.path, err)
	}
	dt := time.Since(t)
	s.stats.Calls++
	s.stats.BusyRows += int64(s.busy)
	s.stats.Rows += int64(len(s.rows))
	s.stats.Decode += dt
	out := stepOut{ids: st.Best}
	if logits {
		out.logits = st.Logits
	}
	for r, row := range s.rows {
		if row == nil {
			continue
		}
		q := row.seq
		if q.tm.DecoderCalls == 0 {
			addDecoderCall(q.tm, dt+row.cross)
		} else {
			addDecoderCall(q.tm, dt)
		}
		pending := len(q.tokens) - row.n
		row.n += pending + q.accept(drafts[r], r*W+pending-1, out, V, eos)
		if q.done {
			s.finish(r)
		}
	}
	return nil
}

// finish answers row r's request with its result and frees the row.
func (s *streamState) finish(r int) {
	row := s.rows[r]
	s.free(r)
	s.p.parse(row.res, row.seq, row.start)
	row.job.Done(row.res, nil)
}
