package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/predict"
)

// sequence is one item's decoding: its tokens so far and its own policy.
type sequence struct {
	tokens []int64 // decoder start token + generated tokens
	limit  int     // most tokens to generate
	choose sample.Chooser
	draft  sample.Drafter   // nil: one token per call
	tm     *predict.Timings // the item's decoder calls are counted here
	done   bool
	// broken is why the model's output for this sequence cannot be decoded
	// (accept); it ends the sequence, which parses as that error.
	broken error
}

func (s *sequence) out() []int64 { return s.tokens[1:] }

// decode generates every sequence's tokens together, over fused states
// [B, E, d] with mask [B, E] (0 on padding).
//
// The sequences move in lockstep: every call feeds each the same number k of
// new positions, so one cache length serves the batch (the decoder graph has
// no self-attention mask that would let rows differ). A sequence's positions
// are its tokens not yet cached followed by its drafts, right-padded to k;
// after the call each keeps the tokens its chooser confirms (a draft is kept
// only while it equals the choice at its position, and the first
// disagreeing position yields the choice), and the cache keeps the positions
// confirmed for every active sequence, the rest being fed again next call.
// Every sequence so gets exactly the tokens of one-token-per-call decoding.
// A finished sequence's row leaves the batch (the cache keeps the other
// rows), so later calls compute only the sequences still generating; the
// loop ends when all are finished.
//
// A call fetches token ids (the decoder's logits_argmax output) unless a
// chooser needs the logits (the grammar, a minimum length) or the decoder
// has no argmax output (bundles before graphs_revision 3).
func (p *Predictor) decode(ctx context.Context, seqs []*sequence, fused encoded, mask []int64) error {
	B := len(seqs)
	eos, pad := p.bundle.Manifest.Tokens.EOSID, p.bundle.Manifest.Tokens.PadID
	V := p.cfg.VocabSize
	// A batch shares p.verify positions per call among its sequences
	// (DefaultVerifyPositions says why it depends on the provider).
	width := 1
	longest := 0
	for _, s := range seqs {
		if s.draft != nil {
			width = p.verifyWidth(B)
		}
		longest = max(longest, s.limit)
		s.done = s.limit <= 0
	}
	// Drafts keep the unaligned width (MaxDraft's meaning); what alignment
	// adds is padding.
	draftWidth := width
	width = alignUp(width, p.align)
	// A call never feeds past a sequence's limit (drafts stop there), so the
	// longest limit plus one call's positions bounds the cache.
	t0 := time.Now()
	c, err := p.newCall(B, fused, mask, longest+width, width)
	if err != nil {
		return err
	}
	defer c.close()
	if p.newCallHook != nil {
		p.newCallHook(c)
	}
	project := time.Since(t0) // the cross graph's run counts into the first call

	rows := seqs // the sequences in cache row order: the active ones
	drafts := make([][]int64, B)
	for calls := 0; ; calls++ {
		if rows, err = compact(c, rows); err != nil || len(rows) == 0 {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		past := c.cached()
		k := 0
		logits := false
		for i, s := range rows {
			pending := len(s.tokens) - past
			drafts[i] = nil
			if budget := min(draftWidth-pending, s.limit-len(s.out())-1); budget > 0 && s.draft != nil {
				drafts[i] = s.draft.Draft(s.tokens, budget)
			}
			k = max(k, pending+len(drafts[i]))
			logits = logits || sample.NeedsLogits(s.choose, s.out())
		}
		k = alignUp(k, p.align) // <= width, a multiple of p.align
		if p.stepHook != nil {
			p.stepHook(k)
		}
		ids := c.input(k)
		for i, s := range rows {
			row := ids[i*k : (i+1)*k]
			n := copy(row, s.tokens[past:])
			n += copy(row[n:], drafts[i])
			for j := n; j < k; j++ {
				row[j] = pad
			}
		}
		t := time.Now()
		out, err := c.step(k, logits)
		if err != nil {
			return fmt.Errorf("decoder call %d: %w", calls, err)
		}
		dt := time.Since(t)
		if calls == 0 {
			dt += project
		}

		keep := -1 // positions confirmed for every sequence still active
		for i, s := range rows {
			addDecoderCall(s.tm, dt)
			if calls == 0 {
				s.tm.Cross = project
			}
			pending := len(s.tokens) - past
			accepted := s.accept(drafts[i], i*k+pending-1, out, V, eos)
			if !s.done && (keep < 0 || pending+accepted < keep) {
				keep = pending + accepted
			}
		}
		if keep >= 0 {
			if err := c.truncate(past + keep); err != nil {
				return fmt.Errorf("decoder call %d: %w", calls, err)
			}
		}
	}
}

// accept appends the tokens s's chooser takes from a call's outputs, from
// position at (the one after s's last known token) on: the choice there,
// then one more for each of its drafts d that the choices confirm (a draft
// is kept only while it equals the choice at its position, and the first
// disagreeing position yields the choice). It marks s done at its end of
// sequence or limit, and returns how many drafts were accepted. Logits that
// are not numbers, or an argmax outside the vocabulary, end the sequence as
// broken: a broken model's output would otherwise decode as some token
// (NaN's argmax is 0) and, under --constrain, parse as an action. The other
// rows of the call go on.
func (s *sequence) accept(d []int64, at int, out stepOut, vocab int, eos int64) int {
	accepted := 0
	_, plain := s.choose.(sample.Argmax)
	for j := 0; j <= len(d); j++ {
		var tok int64
		if out.logits != nil {
			row := out.logits[(at+j)*vocab : (at+j+1)*vocab]
			// Greedy leaves the row as it is: its choice's logit tells (a NaN
			// row's argmax is 0, a NaN). Other choosers mask the row (-Inf),
			// and already scan it several times: one scan before them.
			bad := -1
			if !plain {
				bad = notFinite(row)
			}
			if bad < 0 {
				tok = s.choose.Choose(row, s.out())
				if v := row[tok]; plain && (v != v || v > math.MaxFloat32) {
					bad = int(tok)
				}
			}
			if bad >= 0 {
				s.broken = fmt.Errorf("the model's logits at output position %d are not numbers (token %d's is %v)", len(s.out()), bad, row[bad])
			}
		} else if best := out.ids[at+j]; best < 0 || best >= int64(vocab) {
			s.broken = fmt.Errorf("the model's argmax at output position %d is token %d, outside its vocabulary of %d", len(s.out()), best, vocab)
		} else {
			tok = s.choose.(sample.ArgmaxChooser).ChooseArgmax(best, s.out())
		}
		if s.broken != nil {
			s.done = true
			break
		}
		s.tokens = append(s.tokens, tok)
		if tok == eos || len(s.out()) >= s.limit {
			s.done = true
			break
		}
		if j == len(d) || tok != d[j] {
			break
		}
		accepted++
	}
	return accepted
}

// notFinite is the index of row's first NaN or +Inf, -1 for none (-Inf
// is a masked token).
func notFinite(row []float32) int {
	for i, x := range row {
		if x != x || x > math.MaxFloat32 {
			return i
		}
	}
	return -1
}

// verifyWidth is the positions per row of a call on rows rows whose
// sequences draft: a share of p.verify, at most a full draft and its
// choice, at least one.
func (p *Predictor) verifyWidth(rows int) int { return max(1, min(p.maxDraft+1, p.verify/rows)) }

// alignUp is n rounded up to a multiple of align (>= 1).
func alignUp(n, align int) int { return (n + align - 1) / align * align }

// compact drops the finished sequences' rows from the cache and returns the
// sequences left, in row order.
func compact(c stepper, rows []*sequence) ([]*sequence, error) {
	var keep []int
	for i, s := range rows {
		if !s.done {
			keep = append(keep, i)
		}
	}
	if len(keep) == len(rows) || len(keep) == 0 {
		return rows[:len(keep)], nil
	}
	if err := c.keepRows(keep); err != nil {
		return nil, err
	}
	left := make([]*sequence, len(keep))
	for j, i := range keep {
		left[j] = rows[i]
	}
	return left, nil
}

// stepper runs the decoder calls of one decode over its cache, which lives
// in Go memory (hostCall) or where ORT computes it (deviceCall).
type stepper interface {
	// input returns the next call's ids, [rows, k] row-major.
	input(k int) []int64
	// step runs the decoder on the k positions per row in input(k) after
	// the cached past. Logits are fetched when asked for or when the
	// decoder has no argmax output; the result is scratch, valid until the
	// next call.
	step(k int, logits bool) (stepOut, error)
	cached() int               // positions cached per row
	truncate(n int) error      // keep the first n cached positions
	keepRows(rows []int) error // keep these batch rows (ascending), in order
	close()
}

// stepOut is what a call brings back to the host.
type stepOut struct {
	ids    []int64   // [rows, k] argmax per position; nil without the output
	logits []float32 // [rows, k, vocab]; nil when not fetched
}

// callBufs are a decode's host-side call tensors: ids in, argmax ids and
// logits out, made once per call length and kept while the rows stay, so a
// call allocates only what ORT's Go binding does.
type callBufs struct {
	rows, vocab int64
	ids         []int64   // [rows, k]
	best        []int64   // [rows, k]
	logits      []float32 // [rows, k, vocab]
	idsT        []ortval.Pinned
	bestT       []ortval.Pinned
	logitsT     []ortval.Pinned
	shape       ort.Shape
	state       rowState // the cache
}

// rowState is what every kind of cache does alike for its calls.
type rowState interface {
	KeepRows(rows []int) error
	Close()
}

// keepRows keeps the cache's given batch rows (ascending), in order.
func (c *callBufs) keepRows(rows []int) error {
	if err := c.state.KeepRows(rows); err != nil {
		return err
	}
	c.setRows(len(rows))
	return nil
}

func (c *callBufs) close() {
	c.state.Close()
	c.release()
}

func newCallBufs(B, width, vocab int) callBufs {
	return callBufs{rows: int64(B), vocab: int64(vocab),
		ids: make([]int64, B*width), best: make([]int64, B*width), logits: make([]float32, B*width*vocab),
		idsT: make([]ortval.Pinned, width+1), bestT: make([]ortval.Pinned, width+1), logitsT: make([]ortval.Pinned, width+1),
		shape: make(ort.Shape, 0, 3)}
}

func (c *callBufs) input(k int) []int64 { return c.ids[:int(c.rows)*k] }

// callIDs returns the ids tensor of a call on k positions per row, refusing
// no positions or more than the buffers hold.
func (c *callBufs) callIDs(k int) (*ortval.Pinned, error) {
	if k <= 0 || k >= len(c.idsT) {
		return nil, fmt.Errorf("decoder call on %d positions per row, at most %d (programmer error)", k, len(c.idsT)-1)
	}
	ids, err := c.idsTensor(k)
	if err != nil {
		return nil, fmt.Errorf("decoder input ids: %w", err)
	}
	return ids, nil
}

// tensor returns the tensor of ts for k positions over data, made on first use.
func tensor[T ort.TensorData](c *callBufs, ts []ortval.Pinned, data []T, k int, dims ...int64) (*ortval.Pinned, error) {
	if ts[k].Value == nil {
		var err error
		if ts[k], err = ortval.NewTensor(&c.shape, data, dims...); err != nil {
			return nil, err
		}
	}
	return &ts[k], nil
}

func (c *callBufs) idsTensor(k int) (*ortval.Pinned, error) {
	return tensor(c, c.idsT, c.ids, k, c.rows, int64(k))
}

func (c *callBufs) bestTensor(k int) (*ortval.Pinned, error) {
	return tensor(c, c.bestT, c.best, k, c.rows, int64(k))
}

func (c *callBufs) logitsTensor(k int) (*ortval.Pinned, error) {
	return tensor(c, c.logitsT, c.logits, k, c.rows, int64(k), c.vocab)
}

// setRows drops the tensors made for another number of rows.
func (c *callBufs) setRows(n int) {
	if int64(n) != c.rows {
		c.rows = int64(n)
		c.release()
	}
}

func (c *callBufs) release() {
	ortval.ReleaseAll(c.idsT)
	ortval.ReleaseAll(c.bestT)
	ortval.ReleaseAll(c.logitsT)
}

// newCall makes a decode's cache and its call tensors for up to width
// positions per row: in Go memory for maxLen positions, device-resident
// (placeDevice: under cuda, for a float16 cache, and in tests on the cpu
// provider), or in fixed buffers of maxLen positions (placeStatic:
// Options.CUDAGraph).
func (p *Predictor) newCall(B int, fused encoded, mask []int64, maxLen, width int) (stepper, error) {
	if p.fixedRows(B) {
		return p.newStaticCall(B, fused, mask, maxLen, width)
	}
	dec, err := p.dynamicDecoder()
	if err != nil {
		return nil, err
	}
	shape := kv.Shape{Layers: p.cfg.NumDecoderLayers, Heads: p.cfg.NumHeads, DKV: p.cfg.DKV, DModel: p.cfg.DModel}
	bufs := newCallBufs(B, width, p.cfg.VocabSize)
	if p.cachePlace != placeHost { // a static predictor's batch too large for fixed buffers too
		// the states' size is checked by the tensor over them and by NewDevice
		if B <= 0 || len(mask)%B != 0 {
			return nil, fmt.Errorf("decoder cache: %d mask values for %d rows (programmer error)", len(mask), B)
		}
		states, done, err := fused.value(B, len(mask)/B, p.cfg.DModel)
		if err != nil {
			return nil, fmt.Errorf("decoder cache: encoder states: %w", err)
		}
		defer done()
		dev, err := kv.NewDevice(kv.DeviceConfig{Shape: shape, Batch: B, Names: p.decoderNames,
			Decoder: dec.sess, Cross: p.decoderCross.sess, Ops: p.kvOps, Mem: p.deviceMem}, states, mask)
		if err != nil {
			return nil, err
		}
		bufs.state = dev
		return &deviceCall{callBufs: bufs, g: dec, names: p.decoderNames, argmax: p.decoderSlots.Argmax >= 0, dev: dev}, nil
	}
	if fused.dev != nil {
		return nil, fmt.Errorf("decoder cache: states on the device for a cache in Go memory (programmer error)")
	}
	if p.cacheElem != kv.Float32 {
		return nil, fmt.Errorf("decoder cache: a %s cache in Go memory, whose buffers are float32 (programmer error)", p.cacheElem)
	}
	cache, err := kv.New(kv.Config{Shape: shape, Batch: B, MaxLen: maxLen, Names: p.decoderNames, Slots: p.decoderSlots},
		fused.host, mask, p.decoderCross.run)
	if err != nil {
		return nil, err
	}
	bufs.state = cache
	c := &hostCall{callBufs: bufs, g: dec, sl: p.decoderSlots, cache: cache}
	c.ins, c.outs = c.g.values()
	return c, nil
}

// hostCall runs calls over a cache in Go memory: every call's past goes in
// and its present comes out through Go buffers, and all its outputs are
// bound (Run takes every output), logits included.
type hostCall struct {
	callBufs
	g     *graph
	sl    *kv.Slots
	cache *kv.Cache
	ins   []ort.Value
	outs  []ort.Value
}

func (c *hostCall) step(k int, _ bool) (stepOut, error) {
	ids, err := c.callIDs(k)
	if err != nil {
		return stepOut{}, err
	}
	logits, err := c.logitsTensor(k)
	if err != nil {
		return stepOut{}, fmt.Errorf("decoder logits: %w", err)
	}
	sl := c.sl
	c.ins[sl.IDs], c.outs[sl.Logits] = ids, logits
	out := stepOut{logits: c.logits[:c.rows*int64(k)*c.vocab]}
	if sl.Argmax >= 0 {
		if c.outs[sl.Argmax], err = c.bestTensor(k); err != nil {
			return stepOut{}, fmt.Errorf("decoder argmax: %w", err)
		}
		out.ids = c.best[:c.rows*int64(k)]
	}
	if err := c.cache.Bind(c.ins, c.outs, k); err != nil {
		return stepOut{}, err
	}
	if err := c.g.run(c.ins, c.outs); err != nil {
		return stepOut{}, err
	}
	c.cache.Advance(k)
	return out, nil
}

func (c *hostCall) cached() int { return c.cache.Len() }

func (c *hostCall) truncate(n int) error {
	c.cache.Truncate(n)
	return nil
}

// deviceCall runs calls over a device-resident cache (kv.Device): per call
// only the ids go in, and only the argmax ids come out unless the logits are
// asked for (or the decoder has no argmax output).
type deviceCall struct {
	callBufs
	g      *graph
	names  kv.Names
	argmax bool // the decoder has the argmax output
	dev    *kv.Device
	outs   []kv.Output // scratch
	// logitsCalls counts the calls that fetched logits (tests).
	logitsCalls int
}

func (c *deviceCall) step(k int, wantLogits bool) (stepOut, error) {
	ids, err := c.callIDs(k)
	if err != nil {
		return stepOut{}, err
	}
	var out stepOut
	c.outs = c.outs[:0]
	if c.argmax {
		best, err := c.bestTensor(k)
		if err != nil {
			return stepOut{}, fmt.Errorf("decoder argmax: %w", err)
		}
		c.outs = append(c.outs, kv.Output{Name: c.names.Argmax, Value: best})
		out.ids = c.best[:c.rows*int64(k)]
	}
	if wantLogits || !c.argmax {
		logits, err := c.logitsTensor(k)
		if err != nil {
			return stepOut{}, fmt.Errorf("decoder logits: %w", err)
		}
		c.outs = append(c.outs, kv.Output{Name: c.names.Logits, Value: logits})
		out.logits = c.logits[:c.rows*int64(k)*c.vocab]
		c.logitsCalls++
	}
	if err := c.dev.Bind(ids, c.outs); err != nil {
		return stepOut{}, err
	}
	if err := c.g.sess.RunWithBinding(c.dev.Binding()); err != nil {
		return stepOut{}, fmt.Errorf("run %s graph %s: %w", c.g.role, c.g.path, err)
	}
	if err := c.dev.Advance(k); err != nil {
		return stepOut{}, err
	}
	return out, nil
}

func (c *deviceCall) cached() int          { return c.dev.Len() }
func (c *deviceCall) truncate(n int) error { return c.dev.Truncate(n) }

// deviceMemory is where a device-resident decode leaves the decoder's
// outputs: the decoder session's CUDA device memory, or ORT's CPU memory on
// the cpu provider.
func deviceMemory(o SessionOptions) (*ort.MemoryInfo, error) {
	switch o.Provider {
	case "", ProviderCPU:
		return ort.NewMemoryInfo("Cpu", ort.AllocatorTypeDevice, 0, ort.MemTypeDefault)
	case ProviderCUDA:
		mi, err := ort.NewMemoryInfo("Cuda", ort.AllocatorTypeDevice, o.CUDADevice, ort.MemTypeDefault)
		if err != nil {
			return nil, fmt.Errorf("cuda memory info: %w", err)
		}
		return mi, nil
	}
	return nil, fmt.Errorf("unknown execution provider %q", o.Provider)
}

// addDecoderCall counts one sequential decoder call of duration d: the first
// is FirstStep (with the cross graph's run before it), the rest add up.
func addDecoderCall(t *predict.Timings, d time.Duration) {
	if t.DecoderCalls == 0 {
		t.FirstStep = d
	} else {
		t.LaterSteps += d
	}
	t.DecoderCalls++
}
