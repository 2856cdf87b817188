package kv

import (
	"fmt"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// Static is a decode's state in buffers that never move, for the static
// decoder graph (a bundle's decoder_static): every input and output of a
// decoder call, the self-attention cache included, is a fixed device
// buffer bound once, so a call's shapes and addresses are the same every
// time, which is what CUDA-graph capture needs (ORT replays a captured
// call without looking at its inputs: they must already be in place).
//
// The cache has a fixed length (Capacity positions per row); a call writes
// its Width positions at each row's position input and attends only up to
// each query's own position, so a rejected draft needs no cut: the next
// call writes over it. Each layer's present is its past with the new
// positions scattered in (ScatterElements), and is bound to the past's own
// buffer: ORT's ScatterElements skips its copy of the input when the output
// is the same buffer (on the CPU and under CUDA alike), so a call writes
// only its new positions, in place, and one cache serves every call (one
// binding, one CUDA graph). Nothing else in the graph reads the past's data
// (a Shape node reads its dims), so the in-place write has no reader to
// race.
//
// The host sides (IDs, Pos in; Best, Logits out) cross by small copy graphs
// run before and after the call (Ops.NewTransfer): that keeps the captured
// call free of host memory.
type Static struct {
	names           Names
	d               dims
	width, capacity int64
	vocab           int64
	ops             *Ops
	mem             *ort.MemoryInfo
	decoder, cross  *ort.DynamicAdvancedSession

	// device buffers
	idsDev, posDev, maskDev, bestDev, logitsDev *ort.OwnedValue
	cache                                       []*ort.OwnedValue // self K/V [2*layer + k/v], past and present
	crossKV                                     []*ort.OwnedValue // [2*layer + k/v]
	bind                                        *ort.IoBinding
	run                                         *ort.RunOptions // nil without capture

	// host sides and their copies
	IDs                          []int64   // [rows, Width]: the next call's ids, set by the caller
	Pos                          []int64   // [rows]: each row's cache position for the next call
	Best                         []int64   // [rows, Width]: the last call's argmax ids
	Logits                       []float32 // [rows, Width, vocab]: the last call's logits, when asked for
	maskHost                     []int64
	host                         [5]ortval.Pinned // over IDs, Pos, mask, Best, Logits
	up, maskUp, down, downLogits *Transfer
	shape                        ort.Shape
	runs                         int // decoder calls made
}

// StaticConfig is what a Static is made for: its shapes are fixed for life.
type StaticConfig struct {
	Shape
	Batch, Width, Enc, Capacity, Vocab int
	Names                              Names
	// Decoder is the static decoder's session, Cross the cross graph's.
	Decoder, Cross *ort.DynamicAdvancedSession
	Ops            *Ops
	Mem            *ort.MemoryInfo
	// GraphID, when set, is the CUDA graph the calls are
	// captured as and replayed from (ORT's gpu_graph_id run option; the
	// decoder session has graph capture on). Nil: plain runs.
	GraphID *int
}

// StaticBytes is about how much memory a Static of cfg holds: the cache,
// the cross K/V (of cfg.Ops' element type) and the float32 logits (the int64
// buffers are small).
func StaticBytes(cfg StaticConfig) int64 {
	row := int64(cfg.Heads) * int64(cfg.DKV) * 2 * int64(cfg.Layers) // K and V of every layer, one position
	kv := cfg.Ops.Cache().Bytes() * row * (int64(cfg.Capacity) + int64(cfg.Enc))
	return int64(cfg.Batch) * (kv + 4*int64(cfg.Width)*int64(cfg.Vocab))
}

// Host-side value indices in Static.host.
const (
	hostIDs = iota
	hostPos
	hostMask
	hostBest
	hostLogits
)

// NewStatic allocates the buffers (zeros) and binds them.
func NewStatic(cfg StaticConfig) (*Static, error) {
	if cfg.Batch <= 0 || cfg.Width <= 0 || cfg.Enc <= 0 || cfg.Capacity < cfg.Width || cfg.Vocab <= 0 {
		return nil, fmt.Errorf("static cache: batch %d, width %d, encoder length %d, capacity %d, vocab %d (programmer error)",
			cfg.Batch, cfg.Width, cfg.Enc, cfg.Capacity, cfg.Vocab)
	}
	s := &Static{names: cfg.Names, ops: cfg.Ops, mem: cfg.Mem, decoder: cfg.Decoder, cross: cfg.Cross,
		width: int64(cfg.Width), capacity: int64(cfg.Capacity), vocab: int64(cfg.Vocab), shape: make(ort.Shape, 0, 4),
		d: dims{b: int64(cfg.Batch), layers: int64(cfg.Layers), heads: int64(cfg.Heads), dkv: int64(cfg.DKV),
			model: int64(cfg.DModel), enc: int64(cfg.Enc)}}
	if err := s.alloc(); err != nil {
		s.Close()
		return nil, fmt.Errorf("static cache: %w", err)
	}
	if err := s.bindCalls(cfg.GraphID); err != nil {
		s.Close()
		return nil, fmt.Errorf("static cache: %w", err)
	}
	return s, nil
}

func (s *Static) alloc() error {
	b, w := s.d.b, s.width
	s.IDs, s.Pos, s.Best, s.maskHost = make([]int64, b*w), make([]int64, b), make([]int64, b*w), make([]int64, b*s.d.enc)
	var err error
	for i, h := range []struct {
		data []int64
		dims []int64
	}{{s.IDs, []int64{b, w}}, {s.Pos, []int64{b}}, {s.maskHost, []int64{b, s.d.enc}}, {s.Best, []int64{b, w}}} {
		if s.host[i], err = ortval.NewTensor(&s.shape, h.data, h.dims...); err != nil {
			return err
		}
	}
	// The int64 buffers start as copies of the host zeros.
	for _, d := range []struct {
		dst  **ort.OwnedValue
		from int
	}{{&s.idsDev, hostIDs}, {&s.posDev, hostPos}, {&s.maskDev, hostMask}, {&s.bestDev, hostBest}} {
		if *d.dst, err = s.ops.upload(&s.host[d.from], s.mem); err != nil {
			return fmt.Errorf("allocate: %w", err)
		}
	}
	self := []int64{b, s.d.heads, s.capacity, s.d.dkv}
	cross := []int64{b, s.d.heads, s.d.enc, s.d.dkv}
	for range 2 * s.d.layers {
		v, err := s.ops.CacheZeros(self, s.mem)
		if err != nil {
			return fmt.Errorf("allocate the self-attention cache: %w", err)
		}
		s.cache = append(s.cache, v)
	}
	for range 2 * s.d.layers {
		v, err := s.ops.CacheZeros(cross, s.mem)
		if err != nil {
			return fmt.Errorf("allocate the cross-attention cache: %w", err)
		}
		s.crossKV = append(s.crossKV, v)
	}
	if s.logitsDev, err = s.ops.Zeros([]int64{b, w, s.vocab}, s.mem); err != nil {
		return fmt.Errorf("allocate the logits: %w", err)
	}
	if s.up, err = s.ops.NewTransfer(false, []ort.Value{&s.host[hostIDs], &s.host[hostPos]}, []ort.Value{s.idsDev, s.posDev}); err != nil {
		return err
	}
	if s.maskUp, err = s.ops.NewTransfer(false, []ort.Value{&s.host[hostMask]}, []ort.Value{s.maskDev}); err != nil {
		return err
	}
	if s.down, err = s.ops.NewTransfer(false, []ort.Value{s.bestDev}, []ort.Value{&s.host[hostBest]}); err != nil {
		return err
	}
	return nil
}

// bindCalls binds the decoder call, once for life: each present to its
// past's buffer.
func (s *Static) bindCalls(graphID *int) error {
	n := s.names
	b, err := s.decoder.CreateIoBinding()
	if err != nil {
		return fmt.Errorf("io binding: %w", err)
	}
	s.bind = b
	type bound struct {
		name string
		v    ort.Value
	}
	ins := []bound{{n.IDs, s.idsDev}, {n.Position, s.posDev}, {n.EncoderMask, s.maskDev}}
	outs := []bound{{n.Logits, s.logitsDev}, {n.Argmax, s.bestDev}}
	for l := range n.Past {
		for kv := SelfKey; kv <= CrossValue; kv++ {
			v := s.crossKV
			if kv <= SelfValue {
				v = s.cache
				outs = append(outs, bound{n.Present[l][kv], v[2*l+kv]})
			}
			ins = append(ins, bound{n.Past[l][kv], v[2*l+kv%2]})
		}
	}
	for _, in := range ins {
		if err := b.BindInput(in.name, in.v); err != nil {
			return fmt.Errorf("bind decoder input %s: %w", in.name, err)
		}
	}
	for _, o := range outs {
		if err := b.BindOutput(o.name, o.v); err != nil {
			return fmt.Errorf("bind decoder output %s: %w", o.name, err)
		}
	}
	if graphID != nil {
		if s.run, err = ortval.GraphRunOptions(*graphID); err != nil {
			return err
		}
	}
	return nil
}

// Width and Capacity are the fixed positions per call and per row.
func (s *Static) Width() int    { return int(s.width) }
func (s *Static) Capacity() int { return int(s.capacity) }

// Start begins a request on the buffers: the cross graph runs on states
// [rows, Enc, DModel] into the cross buffers and the mask [rows, Enc] is
// copied up. The self-attention cache keeps what it held: a call attends
// only to positions written before it in this request.
func (s *Static) Start(states ort.Value, mask []int64) error {
	if sh := states.GetShape(); len(sh) != 3 || sh[0] != s.d.b || sh[1] != s.d.enc || sh[2] != s.d.model || len(mask) != len(s.maskHost) {
		return fmt.Errorf("static cache: states %v and %d mask values for [%d, %d, %d] (programmer error)", sh, len(mask), s.d.b, s.d.enc, s.d.model)
	}
	copy(s.maskHost, mask)
	if err := s.maskUp.Run(); err != nil {
		return fmt.Errorf("static cache: encoder mask: %w", err)
	}
	b, err := s.cross.CreateIoBinding()
	if err != nil {
		return fmt.Errorf("static cache: cross projection: %w", err)
	}
	defer b.Destroy()
	if err := b.BindInput(s.names.CrossStates, states); err != nil {
		return fmt.Errorf("static cache: cross projection: %w", err)
	}
	for l, kv := range s.names.CrossKV {
		for j := range kv {
			if err := b.BindOutput(kv[j], s.crossKV[2*l+j]); err != nil {
				return fmt.Errorf("static cache: cross projection: %w", err)
			}
		}
	}
	if err := s.cross.RunWithBinding(b); err != nil {
		return fmt.Errorf("static cache: cross projection: %w", err)
	}
	return nil
}

// JoinTimes is where a join's placing went (Static.Join): the cross
// projection at the joining rows, writing its K/V into the buffers
// (ScatterRows), and copying the mask up.
type JoinTimes struct{ Cross, Scatter, Mask time.Duration }

// Add adds b's times.
func (a *JoinTimes) Add(b JoinTimes) {
	a.Cross, a.Scatter, a.Mask = a.Cross+b.Cross, a.Scatter+b.Scatter, a.Mask+b.Mask
}

// Join starts requests on some rows while the other rows go on decoding
// (continuous batching): the cross graph runs on their states [len(rows),
// m, DModel] (m <= Enc) alone, its K/V are written over those rows' in the
// cross buffers, positions padded to Enc (Ops.ScatterRows: the addresses
// stay, so a captured call still reads them), and their mask [len(rows), m]
// is copied up, padded with zeros. As for Start, the rows'
// self-attention cache needs no reset. It returns how long each part took.
func (s *Static) Join(rows []int, states ort.Value, mask []int64) (JoinTimes, error) {
	var tm JoinTimes
	n := int64(len(rows))
	sh := states.GetShape()
	if n == 0 || len(sh) != 3 || sh[0] != n || sh[1] > s.d.enc || sh[2] != s.d.model || int64(len(mask)) != n*sh[1] {
		return tm, fmt.Errorf("static cache: join %d rows with states %v and %d mask values, enc %d (programmer error)", n, sh, len(mask), s.d.enc)
	}
	at := make([]int64, n)
	for j, r := range rows {
		if r < 0 || int64(r) >= s.d.b {
			return tm, fmt.Errorf("static cache: join row %d of %d (programmer error)", r, s.d.b)
		}
		at[j] = int64(r)
	}
	t := time.Now()
	kv, err := projectCross(s.names, s.cross, states, s.mem)
	if err != nil {
		return tm, fmt.Errorf("static cache: cross projection: %w", err)
	}
	defer ortval.DestroyAll(kv)
	tm.Cross = time.Since(t)
	t = time.Now()
	if err := s.ops.ScatterRows(ortval.Values(s.crossKV), at, ortval.Values(kv)); err != nil {
		return tm, fmt.Errorf("static cache: write the joining rows' cross K/V: %w", err)
	}
	tm.Scatter = time.Since(t)
	t = time.Now()
	mine := make([]int64, n)
	for j := range mine {
		mine[j] = int64(j)
	}
	err = s.setMask(at, mask, mine, sh[1])
	tm.Mask = time.Since(t)
	return tm, err
}

// setMask sets rows at[j] of the mask to rows from[j] of src, mask rows of
// m positions, padded with zeros to Enc, and copies the mask up.
func (s *Static) setMask(at []int64, src []int64, from []int64, m int64) error {
	E := s.d.enc
	for j, r := range at {
		row := s.maskHost[r*E : (r+1)*E]
		clear(row[copy(row, src[from[j]*m:(from[j]+1)*m]):])
	}
	if err := s.maskUp.Run(); err != nil {
		return fmt.Errorf("static cache: encoder mask: %w", err)
	}
	return nil
}

// Adopt takes over some rows of old's decode: old's rows rows[j] become
// s's rows j, with their self-attention cache, cross K/V and mask, the
// positions padded with zeros (masked) where s has the longer encoder
// length; s's next call goes on where old's would have for them. Both have
// the same capacity, s at least old's encoder length and len(rows) rows; the
// widths may differ. A stream moves its rows so when a longer prompt joins
// or its busy rows grow past its buffers or fall well within smaller ones.
func (s *Static) Adopt(old *Static, rows []int) error {
	k := int64(len(rows))
	if s.capacity != old.capacity || s.d.enc < old.d.enc || k == 0 || k > s.d.b {
		return fmt.Errorf("static cache: adopt %d rows of [%d rows, capacity %d, enc %d] into [%d, %d, %d] (programmer error)",
			k, old.d.b, old.capacity, old.d.enc, s.d.b, s.capacity, s.d.enc)
	}
	from, at := make([]int64, k), make([]int64, k)
	identity := k == old.d.b
	for j, r := range rows {
		if r < 0 || int64(r) >= old.d.b {
			return fmt.Errorf("static cache: adopt row %d of %d (programmer error)", r, old.d.b)
		}
		from[j], at[j] = int64(r), int64(j)
		identity = identity && r == j
	}
	L := len(old.crossKV)
	src := append(ortval.Values(old.cache), ortval.Values(old.crossKV)...)
	if !identity {
		g, err := s.ops.Gather(src, from, s.mem)
		if err != nil {
			return fmt.Errorf("static cache: adopt: gather the rows: %w", err)
		}
		defer ortval.DestroyAll(g)
		src = ortval.Values(g)
	}
	if err := s.ops.ScatterRows(ortval.Values(s.cache), at, src[:L]); err != nil {
		return fmt.Errorf("static cache: adopt the self-attention cache: %w", err)
	}
	if err := s.ops.ScatterRows(ortval.Values(s.crossKV), at, src[L:]); err != nil {
		return fmt.Errorf("static cache: adopt the cross-attention cache: %w", err)
	}
	return s.setMask(at, old.maskHost, from, old.d.enc)
}

// Runs is how many decoder calls were made on the buffers (under capture,
// the first ones are ORT's plain runs and its capture).
func (s *Static) Runs() int { return s.runs }

// Enc is the buffers' encoder length.
func (s *Static) Enc() int { return int(s.d.enc) }

// Rows is the buffers' batch rows.
func (s *Static) Rows() int { return int(s.d.b) }

// Step runs one decoder call on IDs at Pos and brings back Best, and Logits
// when asked for.
func (s *Static) Step(logits bool) error {
	if err := s.up.Run(); err != nil {
		return fmt.Errorf("decoder inputs: %w", err)
	}
	s.runs++
	if err := s.decoder.RunWithBindingOptions(s.bind, s.run); err != nil {
		return err
	}
	if err := s.down.Run(); err != nil {
		return fmt.Errorf("decoder argmax: %w", err)
	}
	if logits {
		if s.downLogits == nil {
			s.Logits = make([]float32, s.d.b*s.width*s.vocab)
			var err error
			if s.host[hostLogits], err = ortval.NewTensor(&s.shape, s.Logits, s.d.b, s.width, s.vocab); err != nil {
				return fmt.Errorf("decoder logits: %w", err)
			}
			if s.downLogits, err = s.ops.NewTransfer(true, []ort.Value{s.logitsDev}, []ort.Value{&s.host[hostLogits]}); err != nil {
				return fmt.Errorf("decoder logits: %w", err)
			}
		}
		if err := s.downLogits.Run(); err != nil {
			return fmt.Errorf("decoder logits: %w", err)
		}
	}
	return nil
}

// Close releases everything; closing twice is safe.
func (s *Static) Close() {
	for _, t := range []**Transfer{&s.up, &s.maskUp, &s.down, &s.downLogits} {
		if *t != nil {
			(*t).Close()
			*t = nil
		}
	}
	if s.bind != nil {
		s.bind.Destroy()
		s.bind = nil
	}
	if s.run != nil {
		s.run.Destroy()
		s.run = nil
	}
	ortval.DestroyAll(s.cache)
	s.cache = nil
	ortval.DestroyAll(s.crossKV)
	ortval.DestroyAll([]*ort.OwnedValue{s.idsDev, s.posDev, s.maskDev, s.bestDev, s.logitsDev})
	s.crossKV, s.idsDev, s.posDev, s.maskDev, s.bestDev, s.logitsDev = nil, nil, nil, nil, nil, nil
	ortval.ReleaseAll(s.host[:])
}
