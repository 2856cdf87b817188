package engine

import (
	"fmt"
	"sync"

	"github.com/autoui/autoui/engine/kv"
)

// staticKey is a fixed-buffer decode's shape: rows, positions per call,
// encoder length and cache capacity.
type staticKey struct{ rows, width, enc, capacity int }

// statics keeps fixed-buffer decodes' buffers (kv.Static) for reuse. Under
// capture a buffer set is baked into its CUDA graph, so a later decode
// of the same shape must run on the same buffers to replay them; ORT keeps a
// captured graph (and what it allocated while capturing) until the session
// closes, so a captured set is never dropped. What the kept sets may hold is
// bounded (keep bytes, maxCapturedGraphs graphs): past it a new shape runs
// uncaptured, and an uncaptured set is dropped after its decode.
type statics struct {
	mu      sync.Mutex
	free    map[staticKey][]staticSet
	capture bool
	graphs  int   // graph ids handed out (ids 1.., 0 is ORT's default)
	keep    int64 // bytes the kept sets may take
	kept    int64 // bytes of the captured sets and of the free uncaptured ones
	// thread runs the engine calls under capture, on one OS thread, one at
	// a time (captureThread says why): every decode, and the prefills that
	// may capture (the others run on prefill). Batches are how work is
	// shared.
	thread captureThread
	// prefill runs the prefills beside thread (prefillBeside, a stream's
	// overlapped joins) on one OS thread of their own, one at a time: ORT
	// keeps a CUDA context per session and OS thread (cuBLAS and cuDNN
	// handles, their workspaces), which prefills on whatever thread their
	// goroutine has would make again on thread after thread.
	prefill captureThread
	// gate is held shared by a prefill running beside the capture thread
	// (a batch's, PredictBatch; a stream's join, Options.OverlapJoins), and
	// alone by the thread's runs that may capture (a capture must see no
	// other CUDA work) and its runs on the vision tower's fixed buffers (the
	// tower's plain runs beside would share the memory its graphs replay
	// in: its session's arena).
	gate   sync.RWMutex
	closed bool // by Predictor.Close, under gate
}

const (
	maxCapturedGraphs = 64
	// staticKeepCUDA and staticKeepCPU are statics.keep: a batch of 64 at
	// base size with 512-token prompts holds ~3.9 GB.
	staticKeepCUDA = 16 << 30
	staticKeepCPU  = 1 << 30
)

// staticSet is a kept buffer set: captured (for good) or not.
type staticSet struct {
	st       *kv.Static
	bytes    int64
	captured bool
}

// mayCapture reports whether the set's next call may be one that captures
// (its first capturingRuns, under capture).
func (set staticSet) mayCapture() bool {
	return set.captured && set.st.Runs() < capturingRuns
}

// stepStatic runs one decoder call on a set's buffers; one that may
// capture runs with no prefill beside it (statics.gate).
func (p *Predictor) stepStatic(set staticSet, logits bool) error {
	if set.mayCapture() {
		p.statics.gate.Lock()
		defer p.statics.gate.Unlock()
	}
	return set.st.Step(logits)
}

// get returns free buffers of the key's shape, or new ones from create (with
// the CUDA graph id they are captured as, or nil).
func (s *statics) get(key staticKey, bytes int64, create func(graphID *int) (*kv.Static, error)) (staticSet, error) {
	s.mu.Lock()
	if free := s.free[key]; len(free) > 0 {
		set := free[len(free)-1]
		s.free[key] = free[:len(free)-1]
		if !set.captured {
			s.kept -= set.bytes // counted again when put back
		}
		s.mu.Unlock()
		return set, nil
	}
	var id *int
	if s.capture {
		// a session with capture on must be told per run: -1 is "don't"
		id = new(int)
		*id = -1
		if s.graphs+1 <= maxCapturedGraphs && s.kept+bytes <= s.keep {
			s.graphs++
			*id = s.graphs
			s.kept += bytes
		}
	}
	s.mu.Unlock()
	captured := id != nil && *id >= 0
	st, err := create(id)
	if err != nil && captured {
		s.release(bytes)
	}
	return staticSet{st: st, bytes: bytes, captured: captured}, err
}

func (s *statics) release(bytes int64) {
	s.mu.Lock()
	s.kept -= bytes
	s.mu.Unlock()
}

// drop closes a set that is not to be kept (its start or a call failed);
// a captured one gives its bytes back (its graphs are lost with it).
func (s *statics) drop(set staticSet) {
	set.st.Close()
	if set.captured {
		s.release(set.bytes)
	}
}

// put keeps a set for the next decode of its shape: a captured one always,
// another while the kept sets fit in keep.
func (s *statics) put(key staticKey, set staticSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !set.captured {
		if s.kept+set.bytes > s.keep {
			set.st.Close()
			return
		}
		s.kept += set.bytes
	}
	if s.free == nil {
		s.free = map[staticKey][]staticSet{}
	}
	s.free[key] = append(s.free[key], set)
}

// dropIf closes the kept sets whose shape drop says, captured or not.
func (s *statics) dropIf(drop func(staticKey) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, free := range s.free {
		if !drop(key) {
			continue
		}
		for _, set := range free {
			set.st.Close()
			s.kept -= set.bytes
		}
		delete(s.free, key)
	}
}

func (s *statics) close() { s.dropIf(func(staticKey) bool { return true }) }

// staticRows is the rows of the buffers a batch of b decodes on when rows
// are bucketed (under capture): the next power of two up to 64, then the
// next multiple of 64, so that a server's varying batch sizes share a few
// captured shapes. The extra rows are fed padding.
func staticRows(b int) int {
	if b > 64 {
		return (b + 63) / 64 * 64
	}
	r := 1
	for r < b {
		r *= 2
	}
	return r
}

// staticSet returns buffers of key's shape for the static decoder: kept
// ones (statics.get) or new ones, captured as a CUDA graph when the budget
// allows.
func (p *Predictor) staticSet(key staticKey) (staticSet, error) {
	cfg := kv.StaticConfig{
		Shape: kv.Shape{Layers: p.cfg.NumDecoderLayers, Heads: p.cfg.NumHeads, DKV: p.cfg.DKV, DModel: p.cfg.DModel},
		Batch: key.rows, Width: key.width, Enc: key.enc, Capacity: key.capacity, Vocab: p.cfg.VocabSize, Names: p.decoderNames,
		Decoder: p.decoderStatic.sess, Cross: p.decoderCross.sess, Ops: p.kvOps, Mem: p.deviceMem}
	return p.statics.get(key, kv.StaticBytes(cfg), func(id *int) (*kv.Static, error) {
		cfg.GraphID = id
		return kv.NewStatic(cfg)
	})
}

// newStaticCall starts a fixed-buffer decode of B rows of up to width
// positions per call on states [B, E, d] (mask [B, E]), in a cache of
// capacity positions; on staticRows(B) rows when p.bucketRows.
func (p *Predictor) newStaticCall(B int, fused encoded, mask []int64, capacity, width int) (stepper, error) {
	if B <= 0 || len(mask)%B != 0 {
		return nil, fmt.Errorf("static decoder: %d mask values for %d rows (programmer error)", len(mask), B)
	}
	E := len(mask) / B
	rows := B
	if p.bucketRows {
		rows = staticRows(B)
	}
	key := staticKey{rows: rows, width: width, enc: E, capacity: capacity}
	set, err := p.staticSet(key)
	if err != nil {
		return nil, err
	}
	if err := p.startStatic(set.st, B, rows, fused, mask); err != nil {
		p.statics.drop(set)
		return nil, fmt.Errorf("static decoder: %w", err)
	}
	c := &staticCall{set: set, key: key, p: p, pad: p.bundle.Manifest.Tokens.PadID,
		vocab: p.cfg.VocabSize, in: make([]int64, rows*width), ids: make([]int64, rows*width), live: make([]int, B)}
	for i := range c.live {
		c.live[i] = i
	}
	return c, nil
}

// startStatic starts st's request on B rows of states and mask, padded with
// rows of zeros (states) and of padding (mask 0) up to its rows.
func (p *Predictor) startStatic(st *kv.Static, B, rows int, fused encoded, mask []int64) error {
	E := len(mask) / B
	states, done, err := fused.value(B, E, p.cfg.DModel)
	if err != nil {
		return err
	}
	defer done()
	if rows > B {
		padded, err := p.kvOps.PadRows(states, rows, p.deviceMem)
		if err != nil {
			return fmt.Errorf("pad the batch to %d rows: %w", rows, err)
		}
		defer padded.Destroy()
		states = padded
		mask = append(append(make([]int64, 0, rows*E), mask...), make([]int64, (rows-B)*E)...)
	}
	return st.Start(states, mask)
}

// staticCall runs a decode's calls on fixed buffers (kv.Static): every call
// feeds all the buffers' rows Width positions at the same cache position;
// a row whose sequence finished keeps its place and is fed padding, and a
// call of fewer positions is padded to Width. Padding writes cache
// positions that only later queries could see, and every later call writes
// its own positions over them first, so the tokens are those of any other
// decode.
type staticCall struct {
	p      *Predictor
	set    staticSet
	key    staticKey
	broken bool // a call failed: the buffers are not kept
	pad    int64
	vocab  int
	n      int   // positions cached per row
	live   []int // the buffers' row of each active sequence, in order
	in     []int64
	ids    []int64   // [live, k] argmax out
	logits []float32 // [live, k, vocab] out, made on first use
	// logitsCalls counts the calls that fetched logits (tests).
	logitsCalls int
}

func (c *staticCall) input(k int) []int64 { return c.in[:len(c.live)*k] }

func (c *staticCall) step(k int, wantLogits bool) (stepOut, error) {
	st := c.set.st
	W := st.Width()
	if k <= 0 || k > W || c.n+W > st.Capacity() {
		return stepOut{}, fmt.Errorf("static decoder call on %d positions at %d, at most %d in a cache of %d (programmer error)", k, c.n, W, st.Capacity())
	}
	for i := range st.IDs {
		st.IDs[i] = c.pad
	}
	for i, r := range c.live {
		copy(st.IDs[r*W:r*W+k], c.in[i*k:(i+1)*k])
	}
	for r := range st.Pos {
		st.Pos[r] = int64(c.n)
	}
	if err := c.p.stepStatic(c.set, wantLogits); err != nil {
		c.broken = true
		return stepOut{}, fmt.Errorf("run %s graph %s: %w", c.p.decoderStatic.role, c.p.decoderStatic.path, err)
	}
	c.n += k
	out := stepOut{ids: c.ids[:len(c.live)*k]}
	for i, r := range c.live {
		copy(out.ids[i*k:(i+1)*k], st.Best[r*W:r*W+k])
	}
	if wantLogits {
		V := c.vocab
		if c.logits == nil {
			c.logits = make([]float32, len(c.in)*V)
		}
		out.logits = c.logits[:len(c.live)*k*V]
		for i, r := range c.live {
			copy(out.logits[i*k*V:(i+1)*k*V], st.Logits[r*W*V:(r*W+k)*V])
		}
		c.logitsCalls++
	}
	return out, nil
}

func (c *staticCall) cached() int { return c.n }

// truncate keeps n positions: the rest are written over by the next call.
func (c *staticCall) truncate(n int) error {
	c.n = min(c.n, max(n, 0))
	return nil
}

// keepRows keeps the active sequences' rows of the buffers: the others stay
// in place and are fed padding.
func (c *staticCall) keepRows(rows []int) error {
	if err := kv.CheckRows(rows, len(c.live)); err != nil {
		return err
	}
	live := make([]int, len(rows))
	for j, i := range rows {
		live[j] = c.live[i]
	}
	c.live = live
	return nil
}

func (c *staticCall) close() {
	switch {
	case c.set.st == nil:
		return
	case c.broken:
		c.p.statics.drop(c.set)
	default:
		c.p.statics.put(c.key, c.set)
	}
	c.set.st = nil
}

// CapturedGraphs counts the CUDA graphs the predictor has had ORT capture
// (Options.CUDAGraph under cuda): the static decoder's (one per buffer set)
// and the vision tower's (one per batch size). 0, 0 without capture.
func (p *Predictor) CapturedGraphs() (decoder, vision int) {
	p.statics.mu.Lock()
	decoder, f := p.statics.graphs, p.visionFixed
	p.statics.mu.Unlock()
	if f != nil {
		f.mu.Lock()
		vision = f.graphs
		f.mu.Unlock()
	}
	return decoder, vision
}
