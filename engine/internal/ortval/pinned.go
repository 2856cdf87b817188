// Package ortval holds the ONNX Runtime values the engine binds to its
// graphs: tensors over Go memory pinned for allocation-free binding, and
// ORT-owned values (a device-resident decoder's state).
package ortval

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// Pinned is an ORT value with its internals (the C pointer) read once.
// onnxruntime_go's Tensor.GetInternals allocates on every call and Run calls
// it for every input and output: with 4 x layers cache tensors that was most
// of a decoder call's Go allocations. Bind it as &v; a Pinned value lives in
// its owner's fields and slices, so binding allocates nothing.
type Pinned struct {
	ort.Value
	internals *ort.ValueInternalData
}

// GetInternals returns the internals read when the value was pinned.
func (v *Pinned) GetInternals() *ort.ValueInternalData { return v.internals }

// Pin wraps v.
func Pin(v ort.Value) Pinned { return Pinned{Value: v, internals: v.GetInternals()} }

// Release destroys the value; releasing twice is safe.
func (v *Pinned) Release() {
	if v.Value != nil {
		v.Value.Destroy()
	}
	*v = Pinned{}
}

// ReleaseAll releases every value of vs.
func ReleaseAll(vs []Pinned) {
	for i := range vs {
		vs[i].Release()
	}
}

// NewTensor wraps data in an ORT tensor of the given dims, reusing *shape
// for the dims (ORT copies them) so that no shape slice is allocated.
func NewTensor[T ort.TensorData](shape *ort.Shape, data []T, dims ...int64) (Pinned, error) {
	*shape = append((*shape)[:0], dims...)
	t, err := ort.NewTensor(*shape, data)
	if err != nil {
		return Pinned{}, fmt.Errorf("tensor %v: %w", *shape, err) // not dims: it would escape
	}
	return Pin(t), nil
}

// Values are vs as the Values a binding or a run takes.
func Values(vs []*ort.OwnedValue) []ort.Value {
	out := make([]ort.Value, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// DestroyAll destroys every value of vs that is there.
func DestroyAll(vs []*ort.OwnedValue) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
}
