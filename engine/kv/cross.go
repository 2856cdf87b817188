package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// CrossRun runs the cross graph with its input and outputs bound by slot
// (Slots.CrossStates, Slots.CrossKV): the encoder states in, every layer's
// cross-attention K/V out.
type CrossRun func(ins, outs []ort.Value) error

// cross is the part of the cache fixed for a request: the encoder mask and
// the cross-attention K/V every decoder call reads, projected once by the
// cross graph when the cache is made.
type cross interface {
	// bind binds the mask and the cross-attention K/V of the next call.
	bind(ins []ort.Value, sl *Slots)
	// runOptions are the calls' run options (nil: none).
	runOptions() *ort.RunOptions
	close()
}

// project runs the cross graph over states [B, E, d] into kv, one tensor per
// layer and key/value ([layer*2+k/v]).
func project(d dims, sl *Slots, states []float32, kv []Pinned, run CrossRun) error {
	shape := make(ort.Shape, 0, 3)
	st, err := NewTensor(&shape, states, d.b, d.enc, d.model)
	if err != nil {
		return fmt.Errorf("encoder states: %w", err)
	}
	defer st.Release()
	ins, outs := make([]ort.Value, sl.CrossInputs), make([]ort.Value, sl.CrossOutputs)
	ins[sl.CrossStates] = &st
	for l := range sl.CrossKV {
		for j := range sl.CrossKV[l] {
			outs[sl.CrossKV[l][j]] = &kv[2*l+j]
		}
	}
	return run(ins, outs)
}

// crossTensors makes the [B, heads, E, d_kv] tensors over bufs[i].
func crossTensors(d dims, bufs [][]float32) ([]Pinned, error) {
	shape := make(ort.Shape, 0, 4)
	kv := make([]Pinned, len(bufs))
	for i := range kv {
		var err error
		if kv[i], err = NewTensor(&shape, bufs[i], d.b, d.heads, d.enc, d.dkv); err != nil {
			ReleaseAll(kv)
			return nil, err // the callers say what it was for
		}
	}
	return kv, nil
}

// hostCross keeps the mask and the K/V in Go memory, bound to every call.
type hostCross struct {
	mask Pinned   // [B, E]
	kv   []Pinned // [layer*2+k/v] over buf: [B, heads, E, d_kv]
	buf  [][]float32
}

func newHostCross(d dims, sl *Slots, states []float32, mask []int64, run CrossRun) (*hostCross, error) {
	c := &hostCross{buf: make([][]float32, 2*d.layers)}
	fail := func(what string, err error) (*hostCross, error) {
		c.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	shape := make(ort.Shape, 0, 2)
	var err error
	if c.mask, err = NewTensor(&shape, mask, d.b, d.enc); err != nil {
		return fail("encoder mask", err)
	}
	for i := range c.buf {
		c.buf[i] = make([]float32, d.b*d.heads*d.enc*d.dkv)
	}
	if c.kv, err = crossTensors(d, c.buf); err != nil {
		return fail("cross-attention cache", err)
	}
	if err = project(d, sl, states, c.kv, run); err != nil {
		return fail("cross-attention projection", err)
	}
	return c, nil
}

func (c *hostCross) bind(ins []ort.Value, sl *Slots) {
	ins[sl.EncoderMask] = &c.mask
	for l := range sl.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			ins[sl.Past[l][kv]] = &c.kv[2*l+kv-CrossKey]
		}
	}
}

func (c *hostCross) runOptions() *ort.RunOptions { return nil }

func (c *hostCross) close() {
	c.mask.Release()
	ReleaseAll(c.kv)
}

// Device-resident cross part, for the cuda provider.
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
// So a request uploads its constants once: the cross graph writes the K/V
// straight into an adapter buffer beside the mask, which is then uploaded.
// The self-attention cache is a graph output that grows each call and can
// only be bound to host memory, so it stays in Self.
type deviceCross struct {
	adapter *ort.LoraAdapter // mask and cross-attention K/V
	ro      *ort.RunOptions  // the adapter active
	noMask  Pinned           // zero-length stand-ins for what the adapter supplies
	noKV    Pinned
}

func newDeviceCross(d dims, names Names, sl *Slots, alloc *ort.Allocator, states []float32, mask []int64, run CrossRun) (*deviceCross, error) {
	c := &deviceCross{}
	fail := func(what string, err error) (*deviceCross, error) {
		c.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	params := []adapterParam{{name: names.EncoderMask, dtype: onnxInt64, elem: 8, dims: []int64{d.b, d.enc}}}
	for l := 0; l < int(d.layers); l++ {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			params = append(params, adapterParam{name: names.Past[l][kv], dtype: onnxFloat, elem: 4, dims: []int64{d.b, d.heads, d.enc, d.dkv}})
		}
	}
	buf, err := layoutAdapter(params)
	if err != nil {
		return fail("cross-attention cache", err)
	}
	copy(buf.int64s(0), mask)
	bufs := make([][]float32, 2*d.layers)
	for i := range bufs {
		bufs[i] = buf.float32s(1 + i)
	}
	kv, err := crossTensors(d, bufs)
	if err != nil {
		return fail("cross-attention cache", err)
	}
	err = project(d, sl, states, kv, run)
	ReleaseAll(kv)
	if err != nil {
		return fail("cross-attention projection", err)
	}
	// ORT copies the buffer (to the device under cuda).
	if c.adapter, err = ort.NewLoraAdapterWithDataAndAllocator(buf.bytes, alloc); err != nil {
		return fail("cross-attention cache upload", err)
	}
	if c.ro, err = ort.NewRunOptions(); err != nil {
		return fail("run options", err)
	}
	if err = c.ro.AddActiveLoraAdapter(c.adapter); err != nil {
		return fail("run options", err)
	}
	shape := make(ort.Shape, 0, 4)
	if c.noMask, err = NewTensor[int64](&shape, nil, d.b, 0); err != nil {
		return fail("input", err)
	}
	if c.noKV, err = NewTensor[float32](&shape, nil, d.b, d.heads, 0, d.dkv); err != nil {
		return fail("input", err)
	}
	return c, nil
}

func (c *deviceCross) bind(ins []ort.Value, sl *Slots) {
	ins[sl.EncoderMask] = &c.noMask
	for l := range sl.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			ins[sl.Past[l][kv]] = &c.noKV
		}
	}
}

func (c *deviceCross) runOptions() *ort.RunOptions { return c.ro }

func (c *deviceCross) close() {
	// The run options refer to the adapter.
	if c.ro != nil {
		c.ro.Destroy()
		c.ro = nil
	}
	if c.adapter != nil {
		c.adapter.Destroy()
		c.adapter = nil
	}
	c.noMask.Release()
	c.noKV.Release()
}
