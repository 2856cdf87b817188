package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// Device is a decode's state kept where ORT computes it: device memory under
// cuda, ORT's own CPU memory on the cpu provider (the same code path, which
// is how CI tests it). The cross graph's K/V and each call's self-attention
// presents are ORT-owned outputs (onnxruntime_go's BindOutputToDevice and
// OwnedValue, third_party/onnxruntime_go) bound as the next call's inputs
// through one IoBinding; none of them is copied into Go memory. The encoder
// mask is bound once per request (and again after a compaction), so ORT
// uploads it once. A rejected draft and a finished row are cut on the device
// by Ops.
type Device struct {
	names Names
	bind  *ort.IoBinding // the decoder's, for this decode only
	mem   *ort.MemoryInfo
	ops   *Ops
	d     dims
	n     int               // cached positions per row
	self  []*ort.OwnedValue // [2*layer + k/v]; nil before the first call
	cross []*ort.OwnedValue // [2*layer + k/v]
	mask  []int64           // [b, enc], the host copy bound to the calls
	maskT ortval.Pinned     // over mask
	empty ortval.Pinned     // the first call's zero-length self-attention past
	shape ort.Shape         // scratch
}

// DeviceConfig is what a device-resident decode runs with.
type DeviceConfig struct {
	Shape
	Batch          int
	Names          Names
	Decoder, Cross *ort.DynamicAdvancedSession
	Ops            *Ops
	// Mem is where outputs stay: the decoder's device memory.
	Mem *ort.MemoryInfo
}

// NewDevice runs the cross graph on states [Batch, E, DModel] (mask [Batch,
// E]) with its outputs left on the device, and binds them and the mask to a
// new IoBinding of the decoder. The states may be a tensor over Go memory or
// an ORT-owned value (the fusion graph's output, left on the device).
func NewDevice(cfg DeviceConfig, states ort.Value, mask []int64) (*Device, error) {
	if s := states.GetShape(); cfg.Batch <= 0 || len(mask)%cfg.Batch != 0 || len(s) != 3 ||
		s[0] != int64(cfg.Batch) || s[1]*int64(cfg.Batch) != int64(len(mask)) || s[2] != int64(cfg.DModel) {
		return nil, fmt.Errorf("decoder cache: states %v and %d mask values for %d rows of width %d (programmer error)", s, len(mask), cfg.Batch, cfg.DModel)
	}
	c := &Device{names: cfg.Names, mem: cfg.Mem, ops: cfg.Ops, shape: make(ort.Shape, 0, 4),
		d: dims{b: int64(cfg.Batch), layers: int64(cfg.Layers), heads: int64(cfg.Heads), dkv: int64(cfg.DKV),
			model: int64(cfg.DModel), enc: int64(len(mask) / cfg.Batch)}}
	fail := func(what string, err error) (*Device, error) {
		c.Close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	var err error
	if c.cross, err = projectCross(c.names, cfg.Cross, states, c.mem); err != nil {
		return fail("cross-attention projection", err)
	}
	if c.bind, err = cfg.Decoder.CreateIoBinding(); err != nil {
		return fail("io binding", err)
	}
	c.mask = append([]int64(nil), mask...)
	if err = c.bindConstants(); err != nil {
		return fail("cross-attention cache", err)
	}
	return c, nil
}

// projectCross runs the cross graph on states, its K/V [2*layer + k/v] left
// in mem.
func projectCross(names Names, cross *ort.DynamicAdvancedSession, states ort.Value, mem *ort.MemoryInfo) ([]*ort.OwnedValue, error) {
	outs := make([]string, 0, 2*len(names.CrossKV))
	for _, kv := range names.CrossKV {
		outs = append(outs, kv[0], kv[1])
	}
	return ortval.RunOnDevice(cross, []string{names.CrossStates}, []ort.Value{states}, outs, mem)
}

// bindConstants binds what stays for the calls of a batch: the mask, the
// cross-attention K/V and the zero-length past, at the current rows.
func (c *Device) bindConstants() error {
	c.maskT.Release()
	c.empty.Release()
	var err error
	if c.maskT, err = ortval.NewTensor(&c.shape, c.mask, c.d.b, c.d.enc); err != nil {
		return fmt.Errorf("encoder mask: %w", err)
	}
	if c.empty, err = emptyTensor(&c.shape, c.ops.Cache(), c.d.b, c.d.heads, 0, c.d.dkv); err != nil {
		return fmt.Errorf("empty past: %w", err)
	}
	if err := c.bind.BindInput(c.names.EncoderMask, &c.maskT); err != nil {
		return err
	}
	for l := range c.names.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			if err := c.bind.BindInput(c.names.Past[l][kv], c.cross[2*l+kv-CrossKey]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Binding is the decoder's IoBinding: Bind, then RunWithBinding, then Advance.
func (c *Device) Binding() *ort.IoBinding { return c.bind }

// Bind binds the next call: ids [rows, k], the cached past, the presents to
// the device, and then the caller's outputs (host tensors, by name).
func (c *Device) Bind(ids ort.Value, outs []Output) error {
	b := c.bind
	if err := b.BindInput(c.names.IDs, ids); err != nil {
		return fmt.Errorf("bind decoder input ids: %w", err)
	}
	// Outputs are returned in binding order: clear, presents first.
	b.ClearBoundOutputs()
	for l := range c.names.Past {
		for kv := SelfKey; kv <= SelfValue; kv++ {
			var past ort.Value = &c.empty
			if c.self != nil {
				past = c.self[2*l+kv]
			}
			if err := b.BindInput(c.names.Past[l][kv], past); err != nil {
				return fmt.Errorf("bind decoder past: %w", err)
			}
			if err := b.BindOutputToDevice(c.names.Present[l][kv], c.mem); err != nil {
				return fmt.Errorf("bind decoder present: %w", err)
			}
		}
	}
	for _, o := range outs {
		if err := b.BindOutput(o.Name, o.Value); err != nil {
			return fmt.Errorf("bind decoder output %s: %w", o.Name, err)
		}
	}
	return nil
}

// Output is a decoder output the caller reads, bound to its own tensor.
type Output struct {
	Name  string
	Value ort.Value
}

// Advance takes a successful call's presents (k new positions per row) as
// the cache.
func (c *Device) Advance(k int) error {
	outs, err := c.bind.GetBoundOutputOwnedValues()
	if err != nil {
		return fmt.Errorf("decoder presents: %w", err)
	}
	n := 2 * int(c.d.layers)
	for _, v := range outs[n:] {
		v.Destroy() // the caller's own tensors, already written
	}
	ortval.DestroyAll(c.self)
	c.self = outs[:n:n]
	c.n += k
	return nil
}

// Len is the number of cached positions per row.
func (c *Device) Len() int { return c.n }

// Rows is the number of batch rows.
func (c *Device) Rows() int { return int(c.d.b) }

// Truncate keeps the first n cached positions of every row.
func (c *Device) Truncate(n int) error {
	n = max(n, 0)
	if n >= c.n {
		return nil
	}
	if n == 0 {
		ortval.DestroyAll(c.self)
		c.self, c.n = nil, 0
		return nil
	}
	kept, err := c.ops.Trim(ortval.Values(c.self), n, c.mem)
	if err != nil {
		return fmt.Errorf("trim the self-attention cache to %d positions: %w", n, err)
	}
	ortval.DestroyAll(c.self)
	c.self, c.n = kept, n
	return nil
}

// KeepRows keeps the given batch rows (ascending indices), in that order.
func (c *Device) KeepRows(rows []int) error {
	if err := CheckRows(rows, int(c.d.b)); err != nil {
		return err
	}
	if len(rows) == int(c.d.b) {
		return nil
	}
	idx := make([]int64, len(rows))
	for i, r := range rows {
		idx[i] = int64(r)
	}
	L := 2 * int(c.d.layers)
	self := c.self
	if self == nil {
		// Nothing cached yet: the graph takes self and cross, so the cross
		// part stands in for the self part and that copy is dropped.
		self = c.cross
	}
	kept, err := c.ops.Gather(append(ortval.Values(self), ortval.Values(c.cross)...), idx, c.mem)
	if err != nil {
		return fmt.Errorf("keep %d of %d batch rows: %w", len(rows), c.d.b, err)
	}
	if c.self != nil {
		ortval.DestroyAll(c.self)
		c.self = kept[:L:L]
	} else {
		ortval.DestroyAll(kept[:L])
	}
	ortval.DestroyAll(c.cross)
	c.cross = kept[L:]
	E := int(c.d.enc)
	for i, r := range rows {
		copy(c.mask[i*E:(i+1)*E], c.mask[r*E:(r+1)*E])
	}
	c.mask = c.mask[:len(rows)*E]
	c.d.b = int64(len(rows))
	if err := c.bindConstants(); err != nil {
		return fmt.Errorf("rebind the kept rows: %w", err)
	}
	return nil
}

// CheckRows accepts ascending, distinct row indices below b, at least one.
func CheckRows(rows []int, b int) error {
	for i, r := range rows {
		if r < 0 || r >= b || (i > 0 && r <= rows[i-1]) {
			return fmt.Errorf("keep rows %v of %d: want ascending distinct rows (programmer error)", rows, b)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("keep no rows of %d (programmer error)", b)
	}
	return nil
}

// Close releases everything; closing twice is safe.
func (c *Device) Close() {
	ortval.DestroyAll(c.self)
	ortval.DestroyAll(c.cross)
	c.self, c.cross = nil, nil
	if c.bind != nil {
		c.bind.Destroy()
		c.bind = nil
	}
	c.maskT.Release()
	c.empty.Release()
}
