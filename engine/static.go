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
// capture a buffer set is baked into its two CUDA graphs, so a later decode
// of the same shape must run on the same buffers to replay them; each new
// shape captures two more graphs, up to maxCapturedGraphs, after which new
// shapes run uncaptured. ORT keeps a captured graph (and what it allocated
// while capturing) until the session closes, so those sets are never
// dropped; uncaptured ones are kept up to maxFreeStatics per shape.
type statics struct {
	mu      sync.Mutex
	free    map[staticKey][]*kv.Static
	capture bool
	graphs  int // graph ids handed out (ids 1.., 0 is ORT's default)
	// replay serializes the captured calls: the graphs of one session share
	// the memory ORT's arena lent them while capturing, so two replays at
	// once could write each other's intermediates (the GPU runs one call at
	// a time anyway; batches are how work is shared).
	replay sync.Mutex
}

const (
	maxCapturedGraphs = 64
	maxFreeStatics    = 4
)

// get returns free buffers of the key's shape, or new ones from make (with
// the CUDA graph ids they are captured as, or nil).
func (s *statics) get(key staticKey, make func(graphIDs *[2]int) (*kv.Static, error)) (*kv.Static, error) {
	s.mu.Lock()
	if free := s.free[key]; len(free) > 0 {
		st := free[len(free)-1]
		s.free[key] = free[:len(free)-1]
		s.mu.Unlock()
		return st, nil
	}
	var ids *[2]int
	if s.capture {
		// a session with capture on must be told per run: -1 is "don't"
		ids = &[2]int{-1, -1}
		if s.graphs+2 <= maxCapturedGraphs {
			ids = &[2]int{s.graphs + 1, s.graphs + 2}
			s.graphs += 2
		}
	}
	s.mu.Unlock()
	return make(ids)
}

// put keeps st for the next decode of its shape (captured: always).
func (s *statics) put(key staticKey, st *kv.Static, captured bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == nil {
		s.free = map[staticKey][]*kv.Static{}
	}
	if !captured && len(s.free[key]) >= maxFreeStatics {
		st.Close()
		return
	}
	s.free[key] = append(s.free[key], st)
}

func (s *statics) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, free := range s.free {
		for _, st := range free {
			st.Close()
		}
	}
	s.free = nil
}

// newStaticCall starts a fixed-buffer decode of B rows of up to width
// positions per call on states [B, E, d] (mask [B, E]), in a cache of
// capacity positions.
func (p *Predictor) newStaticCall(B int, fused encoded, mask []int64, capacity, width int) (stepper, error) {
	if B <= 0 || len(mask)%B != 0 {
		return nil, fmt.Errorf("static decoder: %d mask values for %d rows (programmer error)", len(mask), B)
	}
	E := len(mask) / B
	key := staticKey{rows: B, width: width, enc: E, capacity: capacity}
	var captured bool
	st, err := p.statics.get(key, func(ids *[2]int) (*kv.Static, error) {
		captured = ids != nil && ids[0] >= 0
		return kv.NewStatic(kv.StaticConfig{
			Shape: kv.Shape{Layers: p.cfg.NumDecoderLayers, Heads: p.cfg.NumHeads, DKV: p.cfg.DKV, DModel: p.cfg.DModel},
			Batch: B, Width: width, Enc: E, Capacity: capacity, Vocab: p.cfg.VocabSize, Names: p.decoderNames,
			Decoder: p.decoderStatic.sess, Cross: p.decoderCross.sess, Ops: p.kvOps, Mem: p.deviceMem, GraphIDs: ids})
	})
	if err != nil {
		return nil, err
	}
	states, done, err := fused.value(B, E, p.cfg.DModel)
	if err == nil {
		err = st.Start(states, mask)
		done()
	}
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("static decoder: %w", err)
	}
	c := &staticCall{st: st, key: key, captured: captured, p: p, pad: p.bundle.Manifest.Tokens.PadID,
		vocab: p.cfg.VocabSize, in: make([]int64, B*width), ids: make([]int64, B*width), live: make([]int, B)}
	for i := range c.live {
		c.live[i] = i
	}
	return c, nil
}

// staticCall runs a decode's calls on fixed buffers (kv.Static): every call
// feeds all the buffers' rows Width positions at the same cache position;
// a row whose sequence finished keeps its place and is fed padding, and a
// call of fewer positions is padded to Width. Padding writes cache
// positions that only later queries could see, and every later call writes
// its own positions over them first, so the tokens are those of any other
// decode.
type staticCall struct {
	p        *Predictor
	st       *kv.Static
	key      staticKey
	captured bool
	broken   bool // a call failed: the buffers are not kept
	pad      int64
	vocab    int
	n        int   // positions cached per row
	live     []int // the buffers' row of each active sequence, in order
	in       []int64
	ids      []int64   // [live, k] argmax out
	logits   []float32 // [live, k, vocab] out, made on first use
	// logitsCalls counts the calls that fetched logits (tests).
	logitsCalls int
}

func (c *staticCall) input(k int) []int64 { return c.in[:len(c.live)*k] }

func (c *staticCall) step(k int, wantLogits bool) (stepOut, error) {
	st, W := c.st, c.st.Width()
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
	if c.p.statics.capture {
		c.p.statics.replay.Lock()
	}
	err := st.Step(wantLogits)
	if c.p.statics.capture {
		c.p.statics.replay.Unlock()
	}
	if err != nil {
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

func (c *staticCall) keepRows(rows []int) error {
	live := make([]int, len(rows))
	for j, i := range rows {
		if i < 0 || i >= len(c.live) || (j > 0 && i <= rows[j-1]) {
			return fmt.Errorf("keep rows %v of %d: want ascending distinct rows (programmer error)", rows, len(c.live))
		}
		live[j] = c.live[i]
	}
	c.live = live
	return nil
}

func (c *staticCall) close() {
	if c.st == nil {
		return
	}
	if c.broken {
		c.st.Close()
	} else {
		c.p.statics.put(c.key, c.st, c.captured)
	}
	c.st = nil
}
