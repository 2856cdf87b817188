package kv

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

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
