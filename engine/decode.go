package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// decodeRun is the decoder state of one request: the fused encoder states,
// the cross-attention K/V (computed by the first call, then reused), and the
// self-attention cache in two ping-pong buffers sized for the longest output,
// so the loop allocates no tensor memory as it grows.
//
// The ORT values over those buffers are made once per run where the shape is
// fixed (states, mask, flags, cross K/V, the empty past) and kept while the
// shape stays the same otherwise (input ids and logits per call length, the
// self-attention views per cache length); every call binds them by slot
// into the same two slices. A greedy step so creates only the 2 x layers
// views of the grown cache, and builds no maps or closures.
type decodeRun struct {
	p       *Predictor
	tm      *Timings // decoder calls are timed and counted here
	encLen  int64
	maxLen  int64 // longest decoder sequence the buffers hold
	pastLen int64
	cur     int // which self-attention buffer holds the past

	selfKV  [2][][]float32 // [buffer][layer*2+k/v], each heads*maxLen*dkv
	crossKV [][]float32    // [layer*2+k/v], heads*encLen*dkv
	logits  []float32
	ids     []int64 // the current call's input ids

	fusedT, maskT pinned
	flagT         [2]pinned // use_cache_branch false, true
	emptyT        pinned    // [1, heads, 0, d_kv]: the first call's past inputs
	crossT        []pinned  // over crossKV: the first call's outputs, later calls' inputs
	// crossOutT receive the cached branch's cross-attention outputs (an
	// empty constant in the optimum layout, a copy in older bundles). ORT
	// allocates them on the first cached call; they are reused afterwards.
	crossOutT []pinned
	self      [2]kvViews // per buffer: views of its first n positions
	idsT      []pinned   // by call length k: [1, k] over ids
	logitsT   []pinned   // by call length k: [1, k, vocab] over logits

	slots     decoderSlots
	ins, outs []ort.Value // bound by slot, reused by every call
	shape     ort.Shape   // scratch: ORT copies a tensor's shape
}

// pinned is an ORT value with its internals (the C pointer) read once.
// onnxruntime_go's Tensor.GetInternals allocates on every call and Run calls
// it for every input and output: with 4 x layers cache tensors that was most
// of a decoder call's Go allocations. Bind it as &v; a pinned value lives in
// the run's fields and slices, so binding allocates nothing.
type pinned struct {
	ort.Value
	internals *ort.ValueInternalData
}

func (v *pinned) GetInternals() *ort.ValueInternalData { return v.internals }

func pin(v ort.Value) pinned { return pinned{Value: v, internals: v.GetInternals()} }

func (v *pinned) release() {
	if v.Value != nil {
		v.Value.Destroy()
	}
	*v = pinned{}
}

func releasePinned(vs []pinned) {
	for i := range vs {
		vs[i].release()
	}
}

// kvViews are tensors [1, heads, n, d_kv] over the first n positions of one
// self-attention buffer, one per layer and key/value.
type kvViews struct {
	n int64 // -1: none made
	t []pinned
}

// decoderSlots are the decoder graph's input and output positions.
type decoderSlots struct {
	ids, mask, states, flag int
	past                    [][4]int // per layer, as Predictor.decoderPastNames
	logits                  int
	present                 [][4]int
}

func (p *Predictor) newDecodeRun(fused []float32, mask []int64, maxLen int, tm *Timings) (*decodeRun, error) {
	g := p.decoder
	L := p.cfg.NumDecoderLayers
	h, dkv, d := int64(p.cfg.NumHeads), int64(p.cfg.DKV), int64(p.cfg.DModel)
	r := &decodeRun{p: p, tm: tm, encLen: int64(len(mask)), maxLen: int64(maxLen),
		ids:       make([]int64, maxLen),
		crossT:    make([]pinned, 2*L),
		crossOutT: make([]pinned, 2*L),
		idsT:      make([]pinned, maxLen+1),
		logitsT:   make([]pinned, maxLen+1),
		ins:       make([]ort.Value, len(g.inputs)),
		outs:      make([]ort.Value, len(g.outputs)),
		shape:     make(ort.Shape, 0, 4),
	}
	if err := r.bindSlots(); err != nil {
		return nil, err
	}
	for b := 0; b < 2; b++ {
		r.selfKV[b] = make([][]float32, 2*L)
		for i := range r.selfKV[b] {
			r.selfKV[b][i] = make([]float32, h*r.maxLen*dkv)
		}
		r.self[b] = kvViews{n: -1, t: make([]pinned, 2*L)}
	}
	r.crossKV = make([][]float32, 2*L)
	for i := range r.crossKV {
		r.crossKV[i] = make([]float32, h*r.encLen*dkv)
	}
	fail := func(what string, err error) (*decodeRun, error) {
		r.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	var err error
	if r.fusedT, err = newTensor(&r.shape, fused, 1, r.encLen, d); err != nil {
		return fail("input", err)
	}
	if r.maskT, err = newTensor(&r.shape, mask, 1, r.encLen); err != nil {
		return fail("input", err)
	}
	for i, v := range []bool{false, true} {
		if r.flagT[i], err = newTensor(&r.shape, []bool{v}, 1); err != nil {
			return fail("use_cache_branch", err)
		}
	}
	if r.emptyT, err = newTensor[float32](&r.shape, nil, 1, h, 0, dkv); err != nil {
		return fail("empty past", err)
	}
	for i := range r.crossT {
		if r.crossT[i], err = newTensor(&r.shape, r.crossKV[i], 1, h, r.encLen, dkv); err != nil {
			return fail("cross-attention cache", err)
		}
	}
	return r, nil
}

// bindSlots looks up the decoder's input and output positions by name.
func (r *decodeRun) bindSlots() error {
	p := r.p
	s := &r.slots
	ins, outs, err := p.decoder.slots(
		[]string{"input_ids", "encoder_attention_mask", "encoder_hidden_states", "use_cache_branch"},
		[]string{"logits"})
	if err != nil {
		return err
	}
	s.ids, s.mask, s.states, s.flag, s.logits = ins[0], ins[1], ins[2], ins[3], outs[0]
	for l := range p.decoderPastNames {
		ins, outs, err := p.decoder.slots(p.decoderPastNames[l][:], p.decoderPresNames[l][:])
		if err != nil {
			return err
		}
		s.past = append(s.past, [4]int(ins))
		s.present = append(s.present, [4]int(outs))
	}
	return nil
}

func (r *decodeRun) close() {
	for _, v := range []*pinned{&r.fusedT, &r.maskT, &r.flagT[0], &r.flagT[1], &r.emptyT} {
		v.release()
	}
	releasePinned(r.crossT)
	releasePinned(r.crossOutT)
	releasePinned(r.self[0].t)
	releasePinned(r.self[1].t)
	releasePinned(r.idsT)
	releasePinned(r.logitsT)
}

// newTensor wraps data in an ORT tensor of the given dims, reusing *shape
// for the dims (ORT copies them) so that no shape slice is allocated.
func newTensor[T ort.TensorData](shape *ort.Shape, data []T, dims ...int64) (pinned, error) {
	*shape = append((*shape)[:0], dims...)
	t, err := ort.NewTensor(*shape, data)
	if err != nil {
		return pinned{}, fmt.Errorf("tensor %v: %w", *shape, err) // not dims: it would escape
	}
	return pin(t), nil
}

// views returns the tensors over the first n positions of self-attention
// buffer b, remade only when n changed: in greedy decoding the present of
// one call is the past of the next, so one set per call is new.
func (r *decodeRun) views(b int, n int64) ([]pinned, error) {
	v := &r.self[b]
	if v.n == n {
		return v.t, nil
	}
	releasePinned(v.t)
	v.n = -1
	h, dkv := int64(r.p.cfg.NumHeads), int64(r.p.cfg.DKV)
	for i, buf := range r.selfKV[b] {
		t, err := newTensor(&r.shape, buf, 1, h, n, dkv)
		if err != nil {
			return nil, fmt.Errorf("decoder self-attention cache: %w", err)
		}
		v.t[i] = t
	}
	v.n = n
	return v.t, nil
}

// callTensors returns the input ids and logits tensors for a call on k
// tokens, made on the first call of that length.
func (r *decodeRun) callTensors(k int64) (ids, logits *pinned, err error) {
	V := int64(r.p.cfg.VocabSize)
	if need := k * V; int64(len(r.logits)) < need {
		// the old tensors wrap the old buffer
		releasePinned(r.logitsT)
		r.logits = make([]float32, need)
	}
	if r.idsT[k].Value == nil {
		if r.idsT[k], err = newTensor(&r.shape, r.ids, 1, k); err != nil {
			return nil, nil, fmt.Errorf("decoder input ids: %w", err)
		}
	}
	if r.logitsT[k].Value == nil {
		if r.logitsT[k], err = newTensor(&r.shape, r.logits, 1, k, V); err != nil {
			return nil, nil, fmt.Errorf("decoder logits: %w", err)
		}
	}
	return &r.idsT[k], &r.logitsT[k], nil
}

// step runs the decoder on the given new tokens after the cached past and
// returns their logits, len(tokens) rows of vocab_size. The first call
// computes the cross-attention K/V; later calls reuse them. The returned rows
// are scratch, valid until the next call.
func (r *decodeRun) step(tokens []int64) ([]float32, error) {
	p := r.p
	k := int64(len(tokens))
	if k == 0 || r.pastLen+k > r.maxLen {
		return nil, fmt.Errorf("decoder sequence %d+%d outside buffer %d (programmer error)", r.pastLen, k, r.maxLen)
	}
	useCache := r.pastLen > 0
	copy(r.ids, tokens)
	idT, logT, err := r.callTensors(k)
	if err != nil {
		return nil, err
	}
	var past []pinned
	if useCache {
		if past, err = r.views(r.cur, r.pastLen); err != nil {
			return nil, err
		}
	}
	next := 1 - r.cur
	present, err := r.views(next, r.pastLen+k)
	if err != nil {
		return nil, err
	}

	s, in, out := &r.slots, r.ins, r.outs
	in[s.ids], in[s.mask], in[s.states] = idT, &r.maskT, &r.fusedT
	out[s.logits] = logT
	for l := range s.past {
		for kv := 0; kv < 2; kv++ {
			i := 2*l + kv
			// self-attention: past from the current buffer, present into the other
			out[s.present[l][kv]] = &present[i]
			// cross-attention: computed by the first call into crossKV, fed
			// back afterwards
			if useCache {
				in[s.past[l][kv]] = &past[i]
				in[s.past[l][2+kv]] = &r.crossT[i]
				out[s.present[l][2+kv]] = nil // ORT allocates on the first cached call
				if r.crossOutT[i].Value != nil {
					out[s.present[l][2+kv]] = &r.crossOutT[i]
				}
			} else {
				in[s.past[l][kv]] = &r.emptyT
				in[s.past[l][2+kv]] = &r.emptyT
				out[s.present[l][2+kv]] = &r.crossT[i]
			}
		}
	}
	if useCache {
		in[s.flag] = &r.flagT[1]
	} else {
		in[s.flag] = &r.flagT[0]
	}

	t := time.Now()
	err = p.decoder.runSlices(in, out)
	if err == nil && useCache && r.crossOutT[0].Value == nil {
		// ORT allocated the cached branch's cross outputs (their shape is
		// the bundle's choice); keep them as preallocated outputs.
		for l := range s.present {
			for kv := 0; kv < 2; kv++ {
				r.crossOutT[2*l+kv] = pin(out[s.present[l][2+kv]])
			}
		}
	}
	if err != nil {
		return nil, err
	}
	r.tm.addDecoderCall(time.Since(t))
	r.pastLen += k
	r.cur = next
	return r.logits[:k*int64(p.cfg.VocabSize)], nil
}

// greedy is the reference decoding: argmax each step, stop at </s> or the
// token limit. Returned ids exclude the decoder start token.
func (p *Predictor) greedy(ctx context.Context, fused []float32, mask []int64, g genLimits, tm *Timings) ([]int64, error) {
	maxNew := g.maxNew
	r, err := p.newDecoderCache(fused, mask, maxNew, tm)
	if err != nil {
		return nil, err
	}
	defer r.close()
	eos := p.bundle.Manifest.Tokens.EOSID
	tok := p.bundle.Manifest.Tokens.DecoderStartID
	out := make([]int64, 0, maxNew)
	for len(out) < maxNew {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logits, err := r.step([]int64{tok})
		if err != nil {
			return nil, err
		}
		tok = p.choose(logits, out, g)
		out = append(out, tok)
		if tok == eos {
			break
		}
	}
	return out, nil
}

// genLimits are one request's generation settings.
type genLimits struct {
	minNew, maxNew int
	// replay stands in for the model's choices (Request.Replay).
	replay []int64
}

// choose picks the token after out: the replayed token when replaying (then
// </s>), else pickToken's choice.
func (p *Predictor) choose(row []float32, out []int64, g genLimits) int64 {
	if g.replay != nil {
		if len(out) < len(g.replay) {
			return g.replay[len(out)]
		}
		return p.bundle.Manifest.Tokens.EOSID
	}
	return p.pickToken(row, out, g.minNew, g.maxNew)
}

// pickToken chooses the token after out from one row of logits: </s> is
// masked while fewer than minNew tokens exist, then argmax (or the
// grammar-constrained choice). The row is scratch.
func (p *Predictor) pickToken(row []float32, out []int64, minNew, maxNew int) int64 {
	if len(out) < minNew {
		row[p.bundle.Manifest.Tokens.EOSID] = float32(math.Inf(-1))
	}
	return p.nextToken(row, out, maxNew-len(out))
}

// argmax returns the first index of the maximum, as torch.argmax does.
func argmax(v []float32) int64 {
	best, bi := v[0], 0
	for i, x := range v[1:] {
		if x > best {
			best, bi = x, i+1
		}
	}
	return int64(bi)
}
