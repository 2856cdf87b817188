package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// CrossRun runs the cross graph with its input and outputs bound by slot
// (Slots.CrossStates, Slots.CrossKV): the encoder states in, every layer's
// cross-attention K/V out.
type CrossRun func(ins, outs []ort.Value) error

// project runs the cross graph over states [B, E, d] into kv, one tensor per
// layer and key/value ([layer*2+k/v]).
func project(d dims, sl *Slots, states []float32, kv []ortval.Pinned, run CrossRun) error {
	shape := make(ort.Shape, 0, 3)
	st, err := ortval.NewTensor(&shape, states, d.b, d.enc, d.model)
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

// crossTensors makes the [B, heads, E, d_kv] tensors over the start of bufs[i].
func crossTensors(d dims, bufs [][]float32) ([]ortval.Pinned, error) {
	shape := make(ort.Shape, 0, 4)
	kv := make([]ortval.Pinned, len(bufs))
	for i := range kv {
		var err error
		if kv[i], err = ortval.NewTensor(&shape, bufs[i][:d.b*d.heads*d.enc*d.dkv], d.b, d.heads, d.enc, d.dkv); err != nil {
			ortval.ReleaseAll(kv)
			return nil, err // the callers say what it was for
		}
	}
	return kv, nil
}

// hostCross is the part of the cache fixed for a request: the encoder mask
// and the cross-attention K/V every decoder call reads, projected once by
// the cross graph when the cache is made, kept in Go memory and bound to
// every call.
type hostCross struct {
	d    dims
	mask ortval.Pinned   // [B, E] over maskBuf
	kv   []ortval.Pinned // [layer*2+k/v] over buf: [B, heads, E, d_kv]
	buf  [][]float32

	maskBuf []int64
}

func newHostCross(d dims, sl *Slots, states []float32, mask []int64, run CrossRun) (*hostCross, error) {
	c := &hostCross{d: d, buf: make([][]float32, 2*d.layers), maskBuf: append([]int64(nil), mask...)}
	fail := func(what string, err error) (*hostCross, error) {
		c.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	for i := range c.buf {
		c.buf[i] = make([]float32, d.b*d.heads*d.enc*d.dkv)
	}
	if err := c.tensors(); err != nil {
		return fail("cross-attention cache", err)
	}
	if err := project(d, sl, states, c.kv, run); err != nil {
		return fail("cross-attention projection", err)
	}
	return c, nil
}

// tensors (re)makes the mask and K/V tensors over the buffers' first rows.
func (c *hostCross) tensors() error {
	c.mask.Release()
	ortval.ReleaseAll(c.kv)
	shape := make(ort.Shape, 0, 2)
	var err error
	if c.mask, err = ortval.NewTensor(&shape, c.maskBuf[:c.d.b*c.d.enc], c.d.b, c.d.enc); err != nil {
		return fmt.Errorf("encoder mask: %w", err)
	}
	c.kv, err = crossTensors(c.d, c.buf)
	return err
}

// keepRows keeps the given rows (ascending) of the mask and the K/V.
func (c *hostCross) keepRows(rows []int) error {
	KeepRows([][]int64{c.maskBuf}, rows, c.d.enc)
	KeepRows(c.buf, rows, c.d.heads*c.d.enc*c.d.dkv)
	c.d.b = int64(len(rows))
	if err := c.tensors(); err != nil {
		return fmt.Errorf("decoder cross-attention cache: %w", err)
	}
	return nil
}

// KeepRows moves rows (ascending indices) of each buffer, laid out [rows,
// size], to the front in order; no row is overwritten before it moved.
func KeepRows[T any](bufs [][]T, rows []int, size int64) {
	for _, buf := range bufs {
		for i, r := range rows {
			copy(buf[int64(i)*size:int64(i+1)*size], buf[int64(r)*size:int64(r+1)*size])
		}
	}
}

func (c *hostCross) bind(ins []ort.Value, sl *Slots) {
	ins[sl.EncoderMask] = &c.mask
	for l := range sl.Past {
		for kv := CrossKey; kv <= CrossValue; kv++ {
			ins[sl.Past[l][kv]] = &c.kv[2*l+kv-CrossKey]
		}
	}
}

func (c *hostCross) close() {
	c.mask.Release()
	ortval.ReleaseAll(c.kv)
}
