package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// Device-resident decoder state for the cuda provider.
//
// What onnxruntime_go v1.36.0 allows: every tensor it creates lives in Go
// (host) memory; IoBinding binds only such tensors (no BindOutputToDevice),
// RunWithBinding takes no run options, and GetBoundOutputValues copies into
// Go memory. The one device-resident value it can make is a LoRA adapter's
// parameter: NewLoraAdapterWithDataAndAllocator with the session's CUDA
// allocator copies an adapter's tensors to the GPU once, and ORT appends an
// active adapter's parameters to the feeds of every Run using those run
// options, after the caller's own feeds. A name fed twice takes the later
// value, so a zero-length stand-in in the caller's feeds is overridden by the
// adapter's device tensor and nothing of that input crosses the bus.
//
// So a request uploads its constants once: the fused encoder states and mask
// before the first call, the cross-attention K/V (computed by the first call)
// right after it. The self-attention cache is a graph output that grows each
// call and can only be bound to host memory, so it stays on the host as in
// decodeRun, and rejected drafts are dropped there.

// decoderCache is one request's decoder state. decodeRun keeps everything on
// the host; deviceDecodeRun keeps the per-request constants in device memory.
type decoderCache interface {
	// step runs the decoder on tokens after the cached past and returns
	// their logits on the host, len(tokens) rows of vocab_size (scratch,
	// valid until the next step).
	step(tokens []int64) ([]float32, error)
	// truncate keeps the first n cached positions (rejected drafts go).
	truncate(n int64)
	close()
}

var (
	_ decoderCache = (*decodeRun)(nil)
	_ decoderCache = (*deviceDecodeRun)(nil)
)

// newDecoderCache picks the decoder state for the session's provider.
func (p *Predictor) newDecoderCache(fused []float32, mask []int64, maxLen int, tm *Timings) (decoderCache, error) {
	if p.opts.Session.Provider == ProviderCUDA {
		r, err := p.newDeviceDecodeRun(fused, mask, maxLen, tm)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	r, err := p.newDecodeRun(fused, mask, maxLen, tm)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// deviceDecodeRun is decodeRun with the fused encoder states, the mask and
// the cross-attention K/V held in LoRA adapters: in device memory under the
// cuda provider, in ORT's host memory under the cpu provider (the same code
// path, which is how it is tested without a GPU).
type deviceDecodeRun struct {
	p       *Predictor
	tm      *Timings
	encLen  int64
	maxLen  int64
	pastLen int64
	cur     int // which self-attention buffer holds the past

	selfKV [2][][]float32 // [buffer][layer*2+k/v], each heads*maxLen*dkv, host
	logits []float32

	alloc    *ort.Allocator   // device memory for the adapters; nil on the cpu provider
	states   *ort.LoraAdapter // encoder_hidden_states, encoder_attention_mask
	cross    *ort.LoraAdapter // past_key_values.*.encoder.*: nil until the first call
	crossBuf *adapterBuffer   // the first call writes the cross K/V here, then it is uploaded
	crossOut []ort.Value      // [layer*2+k/v] over crossBuf: the first call's outputs
	firstRO  *ort.RunOptions  // states active
	laterRO  *ort.RunOptions  // states and cross active

	// zero-length stand-ins for the inputs the adapters supply
	noStates, noMask, noCross ort.Value
	flag                      [2]ort.Value // use_cache_branch false, true

	slot      deviceSlots
	ins, outs []ort.Value
}

// deviceSlots are the decoder's input and output positions by role.
type deviceSlots struct {
	ids, mask, states, flag, logits int
	past, present                   [][4]int // per layer: self key, self value, cross key, cross value
}

func (p *Predictor) newDeviceDecodeRun(fused []float32, mask []int64, maxLen int, tm *Timings) (*deviceDecodeRun, error) {
	g := p.decoder
	L := p.cfg.NumDecoderLayers
	h, dkv, d := int64(p.cfg.NumHeads), int64(p.cfg.DKV), int64(p.cfg.DModel)
	E := int64(len(mask))
	if int64(len(fused)) != E*d {
		return nil, fmt.Errorf("decoder: %d fused values for %d positions of %d (programmer error)", len(fused), E, d)
	}
	r := &deviceDecodeRun{p: p, tm: tm, encLen: E, maxLen: int64(maxLen),
		ins: make([]ort.Value, len(g.inputs)), outs: make([]ort.Value, len(g.outputs))}
	var err error
	if r.slot, err = deviceSlotsOf(p); err != nil {
		return nil, err
	}
	fail := func(what string, err error) (*deviceDecodeRun, error) {
		r.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	if r.alloc, err = kvAllocator(g.sess, p.opts.Session); err != nil {
		return fail("kv cache", err)
	}

	st, err := layoutAdapter([]adapterParam{
		{name: "encoder_hidden_states", dtype: onnxFloat, elem: 4, dims: []int64{1, E, d}},
		{name: "encoder_attention_mask", dtype: onnxInt64, elem: 8, dims: []int64{1, E}},
	})
	if err != nil {
		return fail("encoder states", err)
	}
	copy(st.float32s(0), fused)
	copy(st.int64s(1), mask)
	if r.states, err = ort.NewLoraAdapterWithDataAndAllocator(st.bytes, r.alloc); err != nil {
		return fail("encoder states upload", err)
	}

	// The first call's cross-attention outputs are written straight into
	// the adapter buffer that feeds them back, under the past input names.
	params := make([]adapterParam, 0, 2*L)
	for l := 0; l < L; l++ {
		for kv := 0; kv < 2; kv++ {
			params = append(params, adapterParam{name: p.decoderPastNames[l][2+kv], dtype: onnxFloat, elem: 4, dims: []int64{1, h, E, dkv}})
		}
	}
	if r.crossBuf, err = layoutAdapter(params); err != nil {
		return fail("cross-attention cache", err)
	}
	r.crossOut = make([]ort.Value, 2*L)
	for i := range r.crossOut {
		if r.crossOut[i], err = ort.NewTensor(ort.NewShape(1, h, E, dkv), r.crossBuf.float32s(i)); err != nil {
			return fail("cross-attention cache", err)
		}
	}
	if r.firstRO, err = ort.NewRunOptions(); err != nil {
		return fail("run options", err)
	}
	if err = r.firstRO.AddActiveLoraAdapter(r.states); err != nil {
		return fail("run options", err)
	}

	if r.noStates, err = ort.NewTensor(ort.NewShape(1, 0, d), []float32(nil)); err != nil {
		return fail("input", err)
	}
	if r.noMask, err = ort.NewTensor(ort.NewShape(1, 0), []int64(nil)); err != nil {
		return fail("input", err)
	}
	if r.noCross, err = ort.NewTensor(ort.NewShape(1, h, 0, dkv), []float32(nil)); err != nil {
		return fail("input", err)
	}
	for i, v := range []bool{false, true} {
		if r.flag[i], err = ort.NewTensor(ort.NewShape(1), []bool{v}); err != nil {
			return fail("use_cache_branch", err)
		}
	}
	for b := 0; b < 2; b++ {
		r.selfKV[b] = make([][]float32, 2*L)
		for i := range r.selfKV[b] {
			r.selfKV[b][i] = make([]float32, h*r.maxLen*dkv)
		}
	}
	return r, nil
}

// deviceSlotsOf finds the decoder's inputs and outputs by name.
func deviceSlotsOf(p *Predictor) (deviceSlots, error) {
	g := p.decoder
	in := make(map[string]int, len(g.inputs))
	for i, n := range g.inputs {
		in[n] = i
	}
	out := make(map[string]int, len(g.outputs))
	for i, n := range g.outputs {
		out[n] = i
	}
	var s deviceSlots
	var missing []string
	find := func(m map[string]int, n string) int {
		i, ok := m[n]
		if !ok {
			missing = append(missing, n)
		}
		return i
	}
	s.ids, s.mask = find(in, "input_ids"), find(in, "encoder_attention_mask")
	s.states, s.flag = find(in, "encoder_hidden_states"), find(in, "use_cache_branch")
	s.logits = find(out, "logits")
	for l := range p.decoderPastNames {
		var pa, pr [4]int
		for j := 0; j < 4; j++ {
			pa[j] = find(in, p.decoderPastNames[l][j])
			pr[j] = find(out, p.decoderPresNames[l][j])
		}
		s.past, s.present = append(s.past, pa), append(s.present, pr)
	}
	if missing != nil {
		return s, fmt.Errorf("decoder graph lacks %q", missing)
	}
	// Every input and output must have a role: each call binds them all.
	if L := len(p.decoderPastNames); len(g.inputs) != 4+4*L || len(g.outputs) != 1+4*L {
		return s, fmt.Errorf("decoder graph has %d inputs and %d outputs, want %d and %d", len(g.inputs), len(g.outputs), 4+4*L, 1+4*L)
	}
	return s, nil
}

// kvAllocator returns the allocator the adapters are uploaded with: the
// decoder session's CUDA device memory, or nil on the cpu provider, where
// the adapters stay in ORT's host memory (ORT refuses a CPU allocator here).
func kvAllocator(sess *ort.DynamicAdvancedSession, o SessionOptions) (*ort.Allocator, error) {
	switch o.Provider {
	case "", ProviderCPU:
		return nil, nil
	case ProviderCUDA:
		mi, err := ort.NewMemoryInfo("Cuda", ort.AllocatorTypeDevice, o.CUDADevice, ort.MemTypeDefault)
		if err != nil {
			return nil, fmt.Errorf("cuda memory info: %w", err)
		}
		defer mi.Destroy()
		a, err := sess.CreateAllocator(mi)
		if err != nil {
			return nil, fmt.Errorf("cuda device %d memory from the decoder session: %w", o.CUDADevice, err)
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown execution provider %q", o.Provider)
}

func (r *deviceDecodeRun) close() {
	// Run options refer to the adapters, the adapters to the allocator.
	for _, ro := range []*ort.RunOptions{r.laterRO, r.firstRO} {
		if ro != nil {
			ro.Destroy()
		}
	}
	r.laterRO, r.firstRO = nil, nil
	for _, a := range []*ort.LoraAdapter{r.cross, r.states} {
		if a != nil {
			a.Destroy()
		}
	}
	r.cross, r.states = nil, nil
	if r.alloc != nil {
		r.alloc.Destroy()
		r.alloc = nil
	}
	destroyAll(r.noStates, r.noMask, r.noCross, r.flag[0], r.flag[1])
	r.noStates, r.noMask, r.noCross, r.flag = nil, nil, nil, [2]ort.Value{}
	r.dropCrossBuffer()
}

func (r *deviceDecodeRun) dropCrossBuffer() {
	destroyAll(r.crossOut...)
	r.crossOut, r.crossBuf = nil, nil
}

// step runs the decoder on the given new tokens after the cached past. Per
// call only the token ids, the self-attention cache and the logits cross
// between host and device; the first call also brings the cross-attention
// K/V back once, to upload them as an adapter.
func (r *deviceDecodeRun) step(tokens []int64) ([]float32, error) {
	p := r.p
	k := int64(len(tokens))
	if k == 0 {
		return nil, errors.New("decoder step without tokens (programmer error)")
	}
	if r.pastLen+k > r.maxLen {
		return nil, fmt.Errorf("decoder sequence %d exceeds buffer %d (programmer error)", r.pastLen+k, r.maxLen)
	}
	h, dkv, V := int64(p.cfg.NumHeads), int64(p.cfg.DKV), int64(p.cfg.VocabSize)
	if need := k * V; int64(len(r.logits)) < need {
		r.logits = make([]float32, need)
	}
	// The cross K/V exist once the first call ran; the cached branch also
	// serves a past truncated to nothing.
	useCache := r.cross != nil

	var owned callTensors
	defer owned.destroy()
	tensor := owned.float32s
	s := &r.slot
	idT, err := ort.NewTensor(ort.NewShape(1, k), tokens)
	if err != nil {
		return nil, fmt.Errorf("decoder input ids: %w", err)
	}
	owned = append(owned, idT)
	r.ins[s.ids], r.ins[s.mask], r.ins[s.states] = idT, r.noMask, r.noStates
	r.ins[s.flag] = r.flag[0]
	if useCache {
		r.ins[s.flag] = r.flag[1]
	}
	if r.outs[s.logits], err = tensor(ort.NewShape(1, k, V), r.logits); err != nil {
		return nil, err
	}
	next := 1 - r.cur
	for l := range s.past {
		for kv := 0; kv < 2; kv++ {
			i := 2*l + kv
			if r.ins[s.past[l][kv]], err = tensor(ort.NewShape(1, h, r.pastLen, dkv), r.selfKV[r.cur][i]); err != nil {
				return nil, err
			}
			if r.outs[s.present[l][kv]], err = tensor(ort.NewShape(1, h, r.pastLen+k, dkv), r.selfKV[next][i]); err != nil {
				return nil, err
			}
			r.ins[s.past[l][2+kv]] = r.noCross
			// Cached calls return the cross K/V empty (optimum layout;
			// older bundles return a copy, which then crosses every
			// call): left to ORT, then dropped.
			r.outs[s.present[l][2+kv]] = nil
			if !useCache {
				r.outs[s.present[l][2+kv]] = r.crossOut[i]
			}
		}
	}
	ro := r.firstRO
	if useCache {
		ro = r.laterRO
	}
	t := time.Now()
	err = p.decoder.sess.RunWithOptions(r.ins, r.outs, ro)
	if useCache {
		for l := range s.present {
			for _, j := range s.present[l][2:] {
				destroyAll(r.outs[j])
				r.outs[j] = nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run %s graph %s: %w", p.decoder.role, p.decoder.path, err)
	}
	if !useCache {
		if err := r.uploadCross(); err != nil {
			return nil, err
		}
	}
	r.tm.addDecoderCall(time.Since(t))
	r.pastLen += k
	r.cur = next
	return r.logits[:k*V], nil
}

// uploadCross turns the first call's cross-attention K/V into an adapter
// (on the device under cuda) that later calls run with.
func (r *deviceDecodeRun) uploadCross() error {
	a, err := ort.NewLoraAdapterWithDataAndAllocator(r.crossBuf.bytes, r.alloc)
	if err != nil {
		return fmt.Errorf("decoder cross-attention cache upload: %w", err)
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		a.Destroy()
		return fmt.Errorf("decoder run options: %w", err)
	}
	if err := errors.Join(ro.AddActiveLoraAdapter(r.states), ro.AddActiveLoraAdapter(a)); err != nil {
		ro.Destroy()
		a.Destroy()
		return fmt.Errorf("decoder run options: %w", err)
	}
	r.cross, r.laterRO = a, ro
	r.dropCrossBuffer() // ORT copied it
	return nil
}

// truncate drops cached self-attention positions past n (rejected drafts).
// The cache is host memory [heads, T, d_kv] per layer: keeping the first n
// positions of each head moves each head's rows down, in order.
func (r *deviceDecodeRun) truncate(n int64) {
	n = max(n, 0)
	if n >= r.pastLen {
		return
	}
	keepPositions(r.selfKV[r.cur], int64(r.p.cfg.NumHeads), r.pastLen, n, int64(r.p.cfg.DKV))
	r.pastLen = n
}

// ONNX TensorProto element types used in adapters.
const (
	onnxFloat = 1
	onnxInt64 = 7
)

// adapterParam is one named tensor of an adapter.
type adapterParam struct {
	name  string
	dtype int32 // ONNX element type
	elem  int   // bytes per element
	dims  []int64
}

// adapterBuffer is an ONNX Runtime adapter (.onnx_adapter, the flatbuffers
// schema "TORT" of onnxruntime/lora/adapter_format) with its parameters'
// tensor bytes in place, to be filled before it is handed to ORT.
type adapterBuffer struct {
	bytes []byte
	raw   [][]byte // per parameter, its tensor bytes within bytes
}

// Adapter format constants: ORT accepts format version 1.
const (
	adapterFormatVersion = 1
	adapterMaxBytes      = 1<<31 - 1 // the flatbuffers verifier's limit
)

// layoutAdapter lays out an adapter buffer front to back: header, the two
// vtables (every table of a type has the same fields), the Adapter table,
// the parameter vector, then per parameter its table, name, dims and data.
// Offsets in flatbuffers point forward, so every referenced object follows
// its referrer; tensor data starts 16-byte aligned.
func layoutAdapter(params []adapterParam) (*adapterBuffer, error) {
	const (
		vtAdapter = 8  // vtable: size, table size, 4 field offsets
		vtParam   = 20 // same shape
		tblSize   = 20 // soffset + 4 four-byte fields
		adapter   = 32
		vec       = adapter + tblSize
	)
	type place struct{ tbl, name, dims, raw, nbytes int }
	places := make([]place, len(params))
	pos := vec + 4 + 4*len(params)
	for i, prm := range params {
		n := int64(prm.elem)
		for _, d := range prm.dims {
			if d < 0 {
				return nil, fmt.Errorf("adapter parameter %s: negative dimension in %v", prm.name, prm.dims)
			}
			n *= d
		}
		if n > adapterMaxBytes {
			return nil, fmt.Errorf("adapter parameter %s: %d bytes exceed the adapter format's 2 GiB", prm.name, n)
		}
		pl := place{nbytes: int(n)}
		pl.tbl = alignUp(pos, 4)
		pl.name = pl.tbl + tblSize
		pos = pl.name + 4 + len(prm.name) + 1
		pl.dims = alignUp(pos+4, 8) - 4 // int64 elements 8-aligned
		pos = pl.dims + 4 + 8*len(prm.dims)
		pl.raw = alignUp(pos+4, 16) - 4 // tensor data 16-aligned
		pos = pl.raw + 4 + pl.nbytes
		places[i] = pl
	}
	total := alignUp(pos, 8)
	if total > adapterMaxBytes {
		return nil, fmt.Errorf("adapter of %d bytes exceeds the format's 2 GiB", total)
	}
	// Backed by uint64s so that tensor data viewed as float32/int64 is
	// aligned in Go memory too.
	words := make([]uint64, total/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), total)
	le := binary.LittleEndian
	u16 := func(at int, v int) { le.PutUint16(b[at:], uint16(v)) }
	u32 := func(at int, v int) { le.PutUint32(b[at:], uint32(v)) }
	ref := func(field, target int) { u32(field, target-field) } // uoffset: relative to the field

	u32(0, adapter) // root table
	copy(b[4:8], "TORT")
	for _, vt := range []int{vtAdapter, vtParam} {
		u16(vt, 12)
		u16(vt+2, tblSize)
		for f := 0; f < 4; f++ {
			u16(vt+4+2*f, 4+4*f)
		}
	}
	u32(adapter, adapter-vtAdapter) // soffset: table minus its vtable
	u32(adapter+4, adapterFormatVersion)
	u32(adapter+8, 1) // adapter version
	u32(adapter+12, 1)
	ref(adapter+16, vec)
	u32(vec, len(params))

	out := &adapterBuffer{bytes: b, raw: make([][]byte, len(params))}
	for i, prm := range params {
		pl := places[i]
		ref(vec+4+4*i, pl.tbl)
		le.PutUint32(b[pl.tbl:], uint32(int32(pl.tbl-vtParam)))
		ref(pl.tbl+4, pl.name)
		ref(pl.tbl+8, pl.dims)
		u32(pl.tbl+12, int(prm.dtype))
		ref(pl.tbl+16, pl.raw)
		u32(pl.name, len(prm.name))
		copy(b[pl.name+4:], prm.name) // NUL terminator: already zero
		u32(pl.dims, len(prm.dims))
		for j, d := range prm.dims {
			le.PutUint64(b[pl.dims+4+8*j:], uint64(d))
		}
		u32(pl.raw, pl.nbytes)
		out.raw[i] = b[pl.raw+4 : pl.raw+4+pl.nbytes : pl.raw+4+pl.nbytes]
	}
	return out, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// float32s views parameter i's data as float32s (host byte order, which is
// what ORT reads).
func (a *adapterBuffer) float32s(i int) []float32 {
	r := a.raw[i]
	if len(r) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(r))), len(r)/4)
}

// int64s views parameter i's data as int64s.
func (a *adapterBuffer) int64s(i int) []int64 {
	r := a.raw[i]
	if len(r) == 0 {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(r))), len(r)/8)
}
