package kv

import (
	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// Elem is the element type of a decoder's K/V tensors: float32, or float16
// where a bundle's half-precision graphs keep their cache in half precision
// too (scripts.half --fp16-cache: no cast of the whole cache at every call,
// half its memory).
type Elem int

const (
	Float32 Elem = iota
	Float16
)

// ParseElem is the Elem of a manifest dtype.
func ParseElem(dtype string) (Elem, bool) {
	switch dtype {
	case "float32":
		return Float32, true
	case "float16":
		return Float16, true
	}
	return 0, false
}

func (e Elem) String() string {
	if e == Float16 {
		return "float16"
	}
	return "float32"
}

// Bytes is the size of one element.
func (e Elem) Bytes() int64 {
	if e == Float16 {
		return 2
	}
	return 4
}

func (e Elem) onnx() int64 {
	if e == Float16 {
		return onnxFloat16
	}
	return onnxFloat
}

// emptyTensor is a tensor of e with no elements (a zero-length past) over
// Go memory; onnxruntime_go's NewCustomDataTensor refuses an empty buffer,
// so a float16 one gets two bytes it never reads.
func emptyTensor(shape *ort.Shape, e Elem, dims ...int64) (ortval.Pinned, error) {
	if e == Float32 {
		return ortval.NewTensor[float32](shape, nil, dims...)
	}
	*shape = append((*shape)[:0], dims...)
	t, err := ort.NewCustomDataTensor(*shape, make([]byte, 2), ort.TensorElementDataTypeFloat16)
	if err != nil {
		return ortval.Pinned{}, err
	}
	return ortval.Pin(t), nil
}
