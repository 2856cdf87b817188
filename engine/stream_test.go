package engine

import (
	"context"
	"errors"
	"fmt"
	"image"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/predict"
)

// streamFeed hands reqs to a Stream a few at a time, by a schedule of join
// sizes (cycled), and collects the answers in request order.
type streamFeed struct {
	rows    int
	reqs    []predict.Request
	ctxs    []context.Context // per request; nil: background
	sizes   []int
	next    int
	asks    int
	res     []*predict.Result
	errs    []error
	answers int
	waits   int // asks with wait set
	frees   []int
}

func newStreamFeed(reqs []predict.Request, sizes ...int) *streamFeed {
	return &streamFeed{reqs: reqs, sizes: sizes, res: make([]*predict.Result, len(reqs)), errs: make([]error, len(reqs))}
}

func (f *streamFeed) ask(free int, wait bool) ([]predict.Job, bool) {
	f.frees = append(f.frees, free)
	if wait {
		f.waits++
		if f.rows > 0 && free != f.rows {
			panic(fmt.Sprintf("asked to wait with %d of %d rows free", free, f.rows))
		}
	}
	n := min(f.sizes[f.asks%len(f.sizes)], free, len(f.reqs)-f.next)
	f.asks++
	var jobs []predict.Job
	for range n {
		i := f.next
		f.next++
		ctx := context.Background()
		if f.ctxs != nil && f.ctxs[i] != nil {
			ctx = f.ctxs[i]
		}
		jobs = append(jobs, predict.Job{Ctx: ctx, Req: f.reqs[i], Done: func(r *predict.Result, err error) {
			if f.res[i] != nil || f.errs[i] != nil {
				panic(fmt.Sprintf("request %d answered twice", i))
			}
			f.res[i], f.errs[i] = r, err
			f.answers++
		}})
	}
	return jobs, f.next < len(f.reqs)
}

// Requests that join a running decode at different calls, on rows others
// have left, each get the golden tokens, greedy and speculative, whatever
// the join sizes, while the busy rows move to longer buffers and to more
// and fewer rows; a join asks for no more rows than are free, and waits
// only when no row is busy (streamFeed checks). The same with the joins
// prefilled beside the calls (Options.OverlapJoins).
func TestStreamGolden(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprint("overlap=", overlap), func(t *testing.T) { testStreamGolden(t, overlap) })
	}
}

func testStreamGolden(t *testing.T, overlap bool) {
	cases := loadGolden(t)
	var reqs []predict.Request
	for range 2 {
		for _, c := range cases {
			reqs = append(reqs, c.featureRequest(t))
		}
	}
	for _, dec := range []Decoding{DecodeGreedy, DecodeSpeculative} {
		p := placed(t, placeStatic, Options{Decoding: dec, OverlapJoins: overlap})
		var moves streamMoves
		p.adoptHook = moves.record
		steps := 0
		p.stepHook = func(int) { steps++ }
		for _, tc := range []struct {
			rows  int
			sizes []int
		}{{1, []int{1}}, {3, []int{2, 0, 1, 1, 0, 0}}, {4, []int{4}}, {8, []int{1}}} {
			f := newStreamFeed(reqs, tc.sizes...)
			f.rows = tc.rows // wait only with every row free
			if err := p.Stream(context.Background(), tc.rows, f.ask); err != nil {
				t.Fatalf("%s rows %d: %v", dec, tc.rows, err)
			}
			if f.answers != len(reqs) {
				t.Fatalf("%s rows %d: %d of %d answered", dec, tc.rows, f.answers, len(reqs))
			}
			// a prompt of the bundle's limit joined: the stream kept no
			// sets of a shorter length, of any row count
			_, widest := p.streamWidth(1)
			p.statics.mu.Lock()
			for key := range p.statics.free {
				if key.capacity == p.maxNew+widest && key.enc < p.bundle.Manifest.Prompt.MaxSourceTokens {
					t.Errorf("%s rows %d: a kept stream set %+v", dec, tc.rows, key)
				}
			}
			p.statics.mu.Unlock()
			for i, res := range f.res {
				c := cases[i%len(cases)]
				if f.errs[i] != nil {
					t.Fatalf("%s rows %d, %s: %v", dec, tc.rows, c.ID, f.errs[i])
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("%s rows %d, %s: ids differ from golden\n got %v\nwant %v", dec, tc.rows, c.ID, res.TokenIDs, c.GeneratedIDs)
				}
				if res.Timings.DecoderCalls == 0 || res.Timings.Total <= 0 {
					t.Errorf("%s rows %d, %s: timings %+v", dec, tc.rows, c.ID, res.Timings)
				}
			}
			for _, free := range f.frees {
				if free <= 0 || free > tc.rows {
					t.Fatalf("%s rows %d: asked with %d free rows", dec, tc.rows, free)
				}
			}
			if tc.rows > 1 && f.waits >= f.asks {
				t.Errorf("%s rows %d: every ask waited (%d)", dec, tc.rows, f.waits)
			}
		}
		// prompts of 11 to 512 tokens: buffers grew under busy rows; rows
		// followed the load, up and down
		longer := moves.count(func(from, to staticKey) bool { return to.enc > from.enc })
		up := moves.count(func(from, to staticKey) bool { return to.rows > from.rows })
		down := moves.count(func(from, to staticKey) bool { return to.rows < from.rows })
		if longer == 0 || up == 0 || down == 0 {
			t.Errorf("%s: busy rows moved to longer buffers %d times, to more rows %d, to fewer %d", dec, longer, up, down)
		}
		for _, m := range moves {
			if from, to := m[0], m[1]; to.enc < from.enc || to.enc%streamEncBucket != 0 && to.enc != p.bundle.Manifest.Prompt.MaxSourceTokens || to.capacity != from.capacity {
				t.Errorf("%s: rows moved from %+v to %+v", dec, from, to)
			}
		}
		// the four streams' stats: every request joined, each call's busy
		// rows within its buffers', every move counted, time in each part
		st := p.StreamStats()
		if st.Joined != 4*len(reqs) || st.Joins == 0 || st.Joins > st.Joined || st.Moves != len(moves) ||
			st.Calls != steps || st.BusyRows < int64(st.Calls) || st.BusyRows > st.Rows ||
			st.Prefill <= 0 || st.Decode <= 0 || st.Move <= 0 {
			t.Errorf("%s: stream stats %+v (%d requests, %d moves, %d calls)", dec, st, 4*len(reqs), len(moves), steps)
		}
		// the joins' time in its parts: in place, the prompts' prefill (these
		// requests bring features: no screens), then placing (every join
		// runs the cross projection and writes its K/V)
		pl := st.Place
		if parts := st.Screens + st.Prompts + pl.States + pl.Buffers + pl.Cross + pl.Scatter + pl.Mask; st.Screens != 0 || st.Prompts <= 0 ||
			pl.Cross <= 0 || pl.Scatter <= 0 || pl.Mask <= 0 || parts > st.Prefill {
			t.Errorf("%s: the joins' %v in parts: screens %v, prompts %v, placing %+v", dec, st.Prefill, st.Screens, st.Prompts, pl)
		}
		// beside the calls: every join into a busy decode (the rows 1
		// stream never has one)
		if overlap != (st.Beside > 0 && st.BesideTime > 0) || st.Beside >= st.Joins {
			t.Errorf("%s, overlap %v: %d of %d joins prefilled beside the calls, in %v", dec, overlap, st.Beside, st.Joins, st.BesideTime)
		}
	}
}

// streamMoves records a stream's moves of its busy rows (adoptHook).
type streamMoves [][2]staticKey

func (m *streamMoves) record(from, to staticKey) { *m = append(*m, [2]staticKey{from, to}) }

func (m streamMoves) count(f func(from, to staticKey) bool) int {
	n := 0
	for _, x := range m {
		if f(x[0], x[1]) {
			n++
		}
	}
	return n
}

// Under the grammar (logits fetched) and with alignment, a stream gives
// what PredictBatch gives.
func TestStreamConstrained(t *testing.T) {
	p := placed(t, placeStatic, Options{Constrained: true, Decoding: DecodeSpeculative, AlignPositions: 4})
	var cases []goldenCase
	var reqs []predict.Request
	for _, c := range loadGolden(t) {
		if c.MaxNewTokens == 0 || c.MaxNewTokens >= p.grammars.MinTokens() {
			cases, reqs = append(cases, c), append(reqs, c.featureRequest(t))
		}
	}
	want, err := p.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	f := newStreamFeed(reqs, 1, 2)
	if err := p.Stream(context.Background(), 3, f.ask); err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if f.errs[i] != nil {
			t.Fatalf("%s: %v", cases[i].ID, f.errs[i])
		}
		if !slices.Equal(f.res[i].TokenIDs, want[i].TokenIDs) || f.res[i].Raw != want[i].Raw {
			t.Errorf("%s: stream %q, batch %q", cases[i].ID, f.res[i].Raw, want[i].Raw)
		}
	}
}

// A bad request fails alone with its own error (refused before its join:
// a RequestError; failing in its join's prefill: the join is tried again
// one request at a time), and a request cancelled while it decodes leaves
// with its context's error, its row free; the others get their tokens.
func TestStreamFailsAlone(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprint("overlap=", overlap), func(t *testing.T) { testStreamFailsAlone(t, overlap) })
	}
}

func testStreamFailsAlone(t *testing.T, overlap bool) {
	cases := loadGolden(t)
	var reqs []predict.Request
	for _, c := range cases[:5] {
		reqs = append(reqs, c.featureRequest(t))
	}
	reqs[1].Features = reqs[1].Features[:3]
	reqs[4].Features, reqs[4].Screen = nil, image.NewRGBA(image.Rect(0, 0, 0, 0))
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := placed(t, placeStatic, Options{OverlapJoins: overlap})
	calls := 0
	p.stepHook = func(int) {
		if calls++; calls == 2 {
			cancel()
		}
	}
	f := newStreamFeed(reqs, 5)
	if overlap {
		f = newStreamFeed(reqs, 1, 4) // the four join a busy decode
	}
	f.ctxs = []context.Context{nil, nil, cancelled, nil, nil}
	if err := p.Stream(context.Background(), 5, f.ask); err != nil {
		t.Fatal(err)
	}
	var re *predict.RequestError
	if !errors.As(f.errs[1], &re) || !strings.Contains(f.errs[1].Error(), "image features") {
		t.Errorf("bad request: %v, want its RequestError", f.errs[1])
	}
	if !errors.Is(f.errs[2], context.Canceled) || f.res[2] != nil {
		t.Errorf("request cancelled while decoding: %v, %v", f.res[2], f.errs[2])
	}
	if f.errs[4] == nil || strings.Contains(f.errs[4].Error(), "join of") {
		t.Errorf("an empty screen: %v, want its own error, not its join's", f.errs[4])
	}
	for _, i := range []int{0, 3} {
		if f.errs[i] != nil || !slices.Equal(f.res[i].TokenIDs, cases[i].GeneratedIDs) {
			t.Errorf("%s: %v, %v", cases[i].ID, f.res[i], f.errs[i])
		}
	}
	// the four's join was prefilled beside the calls, failed as a whole
	// (the empty screen) and was tried again in place: it started none
	if st := p.StreamStats(); overlap && (st.BesideTime <= 0 || st.Beside != 0) {
		t.Errorf("%d joins prefilled beside the calls in %v, want 0 in some time", st.Beside, st.BesideTime)
	}
}

// When the stream's context ends, the busy requests, and a join
// prefilling beside the calls, are answered with its error and Stream
// returns it.
func TestStreamCancelled(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(fmt.Sprint("overlap=", overlap), func(t *testing.T) { testStreamCancelled(t, overlap) })
	}
}

func testStreamCancelled(t *testing.T, overlap bool) {
	cases := loadGolden(t)
	reqs := []predict.Request{cases[0].featureRequest(t), cases[1].featureRequest(t), cases[2].featureRequest(t)}
	p := placed(t, placeStatic, Options{OverlapJoins: overlap})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newStreamFeed(reqs, 1, 2) // the two join (beside) after the first call
	p.stepHook = func(int) { cancel() }
	if err := p.Stream(ctx, 3, f.ask); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	for i, err := range f.errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("request %d: %v, %v", i, f.res[i], err)
		}
	}
}

// Stream needs the static decoder and a sane number of rows.
func TestStreamRefuses(t *testing.T) {
	never := func(int, bool) ([]predict.Job, bool) { t.Fatal("asked for work"); return nil, false }
	p := placed(t, placeDevice, Options{})
	if err := p.Stream(context.Background(), 4, never); err == nil || !strings.Contains(err.Error(), "--cuda-graph") {
		t.Errorf("no static decoder: %v", err)
	}
	ps := placed(t, placeStatic, Options{})
	for _, rows := range []int{0, StreamRowsLimit + 1} {
		if err := ps.Stream(context.Background(), rows, never); err == nil {
			t.Errorf("rows %d: no error", rows)
		}
	}
}

// A prefill's screens take the batch's time once (whichever requests had
// a screen: the first here brought its features), its prompts each encoder
// group's once and each request's tokenizing.
func TestPrefillParts(t *testing.T) {
	ms := time.Millisecond
	res := []*predict.Result{
		{Timings: predict.Timings{Tokenize: ms, Encoder: 6 * ms, Fusion: 2 * ms, EncoderRows: 2}},
		{Timings: predict.Timings{Preprocess: 3 * ms, Vision: 10 * ms, Tokenize: ms, Encoder: 6 * ms, Fusion: 2 * ms, EncoderRows: 2}},
		{Timings: predict.Timings{Preprocess: 3 * ms, Vision: 10 * ms, Tokenize: 2 * ms, Encoder: 4 * ms, Fusion: ms, EncoderRows: 1}},
	}
	if screens, prompts := prefillParts(res); screens != 13*ms || prompts != (ms+ms+2*ms)+(6*ms+2*ms)+(4*ms+ms) {
		t.Errorf("screens %v, prompts %v", screens, prompts)
	}
}
