package kv

import (
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// cross is the part of the cache fixed for a request: the encoder states
// and mask every call reads, and the cross-attention K/V that the first call
// projects and later calls are fed back.
type cross interface {
	// bind binds the states, the mask and the cross-attention inputs and
	// outputs of the next call.
	bind(ins, outs []ort.Value, sl *Slots)
	// runOptions are the next call's run options (nil: none).
	runOptions() *ort.RunOptions
	// after takes what a call produced; err is the call's own.
	after(outs []ort.Value, sl *Slots, err error) error
	// ready reports whether the cross-attention K/V exist (the cached
	// branch can run).
	ready() bool
	close()
}

// laterOutputs are the cached branch's cross-attention outputs (an empty
// constant in the optimum layout, a copy of the past in older bundles): ORT
// allocates them on the first cached call, and they are reused afterwards.
type laterOutputs []Pinned

func (o laterOutputs) bind(outs []ort.Value, sl *Slots) {
	for l := range sl.Present {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			j := sl.Present[l][kv]
			outs[j] = nil
			if v := &o[2*l+kv-CrossKey]; v.Value != nil {
				outs[j] = v
			}
		}
	}
}

// keep pins what ORT allocated (also after a failed call, so close
// releases it).
func (o laterOutputs) keep(outs []ort.Value, sl *Slots) {
	for l := range sl.Present {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			v := &o[2*l+kv-CrossKey]
			if got := outs[sl.Present[l][kv]]; v.Value == nil && got != nil {
				*v = Pin(got)
			}
		}
	}
}

// hostCross keeps everything in Go memory, bound as ORT tensors.
type hostCross struct {
	states, mask Pinned   // [B, E, d], [B, E]
	kv           []Pinned // [layer*2+k/v] over buf: [B, heads, E, d_kv]
	buf          [][]float32
	empty        Pinned // [B, heads, 0, d_kv]: the first call's past
	later        laterOutputs
	computed     bool
}

func newHostCross(d dims, states []float32, mask []int64) (*hostCross, error) {
	c := &hostCross{kv: make([]Pinned, 2*d.layers), buf: make([][]float32, 2*d.layers), later: make(laterOutputs, 2*d.layers)}
	shape := make(ort.Shape, 0, 4)
	fail := func(what string, err error) (*hostCross, error) {
		c.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	var err error
	if c.states, err = NewTensor(&shape, states, d.b, d.enc, d.model); err != nil {
		return fail("encoder states", err)
	}
	if c.mask, err = NewTensor(&shape, mask, d.b, d.enc); err != nil {
		return fail("encoder mask", err)
	}
	if c.empty, err = NewTensor[float32](&shape, nil, d.b, d.heads, 0, d.dkv); err != nil {
		return fail("empty past", err)
	}
	for i := range c.kv {
		c.buf[i] = make([]float32, d.b*d.heads*d.enc*d.dkv)
		if c.kv[i], err = NewTensor(&shape, c.buf[i], d.b, d.heads, d.enc, d.dkv); err != nil {
			return fail("cross-attention cache", err)
		}
	}
	return c, nil
}

func (c *hostCross) bind(ins, outs []ort.Value, sl *Slots) {
	ins[sl.EncoderStates], ins[sl.EncoderMask] = &c.states, &c.mask
	if c.computed {
		for l := range sl.Past {
			for kv := CrossKey; kv <= CrossValue; kv++ {
				ins[sl.Past[l][kv]] = &c.kv[2*l+kv-CrossKey]
			}
		}
		c.later.bind(outs, sl)
		return
	}
	for l := range sl.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			ins[sl.Past[l][kv]] = &c.empty
			outs[sl.Present[l][kv]] = &c.kv[2*l+kv-CrossKey]
		}
	}
}

func (c *hostCross) runOptions() *ort.RunOptions { return nil }

func (c *hostCross) after(outs []ort.Value, sl *Slots, err error) error {
	if c.computed {
		c.later.keep(outs, sl)
	}
	if err == nil {
		c.computed = true
	}
	return nil
}

func (c *hostCross) ready() bool { return c.computed }

func (c *hostCross) close() {
	c.states.Release()
	c.mask.Release()
	c.empty.Release()
	ReleaseAll(c.kv)
	ReleaseAll(c.later)
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
// So a request uploads its constants once: the encoder states and mask
// before the first call, the cross-attention K/V (computed by the first
// call) right after it. The self-attention cache is a graph output that
// grows each call and can only be bound to host memory, so it stays in Self.
type deviceCross struct {
	alloc    *ort.Allocator   // device memory; nil keeps the adapters in ORT's host memory
	states   *ort.LoraAdapter // encoder states and mask
	kv       *ort.LoraAdapter // cross-attention K/V: nil until the first call
	kvBuf    *adapterBuffer   // the first call writes the cross K/V here, then it is uploaded
	kvOut    []Pinned         // [layer*2+k/v] over kvBuf: the first call's outputs
	firstRO  *ort.RunOptions  // states active
	laterRO  *ort.RunOptions  // states and K/V active
	later    laterOutputs
	noStates Pinned // zero-length stand-ins for what the adapters supply
	noMask   Pinned
	noKV     Pinned
}

func newDeviceCross(d dims, names Names, alloc *ort.Allocator, states []float32, mask []int64) (*deviceCross, error) {
	c := &deviceCross{alloc: alloc, later: make(laterOutputs, 2*d.layers)}
	shape := make(ort.Shape, 0, 4)
	fail := func(what string, err error) (*deviceCross, error) {
		c.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	st, err := layoutAdapter([]adapterParam{
		{name: names.EncoderStates, dtype: onnxFloat, elem: 4, dims: []int64{d.b, d.enc, d.model}},
		{name: names.EncoderMask, dtype: onnxInt64, elem: 8, dims: []int64{d.b, d.enc}},
	})
	if err != nil {
		return fail("encoder states", err)
	}
	copy(st.float32s(0), states)
	copy(st.int64s(1), mask)
	if c.states, err = ort.NewLoraAdapterWithDataAndAllocator(st.bytes, alloc); err != nil {
		return fail("encoder states upload", err)
	}
	// The first call's cross-attention outputs are written straight into
	// the adapter buffer that feeds them back, under the past input names.
	params := make([]adapterParam, 0, 2*d.layers)
	for l := 0; l < int(d.layers); l++ {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			params = append(params, adapterParam{name: names.Past[l][kv], dtype: onnxFloat, elem: 4, dims: []int64{d.b, d.heads, d.enc, d.dkv}})
		}
	}
	if c.kvBuf, err = layoutAdapter(params); err != nil {
		return fail("cross-attention cache", err)
	}
	c.kvOut = make([]Pinned, 2*d.layers)
	for i := range c.kvOut {
		if c.kvOut[i], err = NewTensor(&shape, c.kvBuf.float32s(i), d.b, d.heads, d.enc, d.dkv); err != nil {
			return fail("cross-attention cache", err)
		}
	}
	if c.firstRO, err = ort.NewRunOptions(); err != nil {
		return fail("run options", err)
	}
	if err = c.firstRO.AddActiveLoraAdapter(c.states); err != nil {
		return fail("run options", err)
	}
	if c.noStates, err = NewTensor[float32](&shape, nil, d.b, 0, d.model); err != nil {
		return fail("input", err)
	}
	if c.noMask, err = NewTensor[int64](&shape, nil, d.b, 0); err != nil {
		return fail("input", err)
	}
	if c.noKV, err = NewTensor[float32](&shape, nil, d.b, d.heads, 0, d.dkv); err != nil {
		return fail("input", err)
	}
	return c, nil
}

func (c *deviceCross) bind(ins, outs []ort.Value, sl *Slots) {
	ins[sl.EncoderStates], ins[sl.EncoderMask] = &c.noStates, &c.noMask
	for l := range sl.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			ins[sl.Past[l][kv]] = &c.noKV
			if c.kv == nil {
				outs[sl.Present[l][kv]] = &c.kvOut[2*l+kv-CrossKey]
			}
		}
	}
	if c.kv != nil {
		c.later.bind(outs, sl)
	}
}

func (c *deviceCross) runOptions() *ort.RunOptions {
	if c.kv != nil {
		return c.laterRO
	}
	return c.firstRO
}

func (c *deviceCross) after(outs []ort.Value, sl *Slots, err error) error {
	if c.kv != nil {
		c.later.keep(outs, sl)
		return nil
	}
	if err != nil {
		return nil
	}
	return c.upload()
}

// upload turns the first call's cross-attention K/V into an adapter (on the
// device under cuda) that later calls run with.
func (c *deviceCross) upload() error {
	a, err := ort.NewLoraAdapterWithDataAndAllocator(c.kvBuf.bytes, c.alloc)
	if err != nil {
		return fmt.Errorf("decoder cross-attention cache upload: %w", err)
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		a.Destroy()
		return fmt.Errorf("decoder run options: %w", err)
	}
	if err := errors.Join(ro.AddActiveLoraAdapter(c.states), ro.AddActiveLoraAdapter(a)); err != nil {
		ro.Destroy()
		a.Destroy()
		return fmt.Errorf("decoder run options: %w", err)
	}
	c.kv, c.laterRO = a, ro
	ReleaseAll(c.kvOut) // ORT copied the buffer
	c.kvOut, c.kvBuf = nil, nil
	return nil
}

func (c *deviceCross) ready() bool { return c.kv != nil }

func (c *deviceCross) close() {
	// Run options refer to the adapters.
	for _, ro := range []*ort.RunOptions{c.laterRO, c.firstRO} {
		if ro != nil {
			ro.Destroy()
		}
	}
	c.laterRO, c.firstRO = nil, nil
	for _, a := range []*ort.LoraAdapter{c.kv, c.states} {
		if a != nil {
			a.Destroy()
		}
	}
	c.kv, c.states = nil, nil
	ReleaseAll(c.kvOut)
	ReleaseAll(c.later)
	c.noStates.Release()
	c.noMask.Release()
	c.noKV.Release()
}
