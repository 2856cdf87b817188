package kv

import (
	"encoding/binary"
	"fmt"
	"strconv"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// Ops are the two small graphs that edit a device-resident cache where it
// lives, run by ORT on the decoder's provider, so that neither a rejected
// draft nor a finished batch row brings the cache back to the host:
//
//   - trim keeps the first n positions of every self-attention K/V (axis 2):
//     Slice(x, [0], n, [2]);
//   - gather keeps some batch rows of every K/V, self and cross (axis 0):
//     Gather(x, rows, axis 0).
//
// A bound output must have the shape the graph computes, so a cache cannot
// be bound at its capacity and trimmed by a shorter view; and T5's [B, heads,
// T, d_kv] layout makes a shorter T a strided subset, not a prefix. Hence a
// copy on the device, of the positions or rows that stay.
type Ops struct {
	trim, gather *ort.DynamicAdvancedSession
	tensors      int // self K/V per graph call: 2 x layers
}

// Graph input and output names.
const (
	opsLen  = "len"
	opsRows = "rows"
)

func opsIn(i int) string  { return "x" + strconv.Itoa(i) }
func opsOut(i int) string { return "y" + strconv.Itoa(i) }

// NewOps builds the graphs for a decoder of the given layers and opens them
// with so (the decoder's session options: the same provider).
func NewOps(layers int, so *ort.SessionOptions) (*Ops, error) {
	o := &Ops{tensors: 2 * layers}
	var err error
	if o.trim, err = openOps(opsGraph("trim", o.tensors, opsLen, "Slice"), opsLen, o.tensors, so); err != nil {
		return nil, fmt.Errorf("cache trim graph: %w", err)
	}
	// Gather takes the cross K/V too: 4 x layers.
	if o.gather, err = openOps(opsGraph("gather", 2*o.tensors, opsRows, "Gather"), opsRows, 2*o.tensors, so); err != nil {
		o.Close()
		return nil, fmt.Errorf("cache gather graph: %w", err)
	}
	return o, nil
}

func openOps(model []byte, first string, n int, so *ort.SessionOptions) (*ort.DynamicAdvancedSession, error) {
	ins, outs := []string{first}, make([]string, n)
	for i := range outs {
		ins = append(ins, opsIn(i))
		outs[i] = opsOut(i)
	}
	return ort.NewDynamicAdvancedSessionWithONNXData(model, ins, outs, so)
}

// Close releases the sessions.
func (o *Ops) Close() {
	for _, s := range []**ort.DynamicAdvancedSession{&o.trim, &o.gather} {
		if *s != nil {
			(*s).Destroy()
			*s = nil
		}
	}
}

// run runs one of the graphs on xs with its int64 argument arg, its outputs
// left where ORT computes them (mem), and returns them.
func (o *Ops) run(sess *ort.DynamicAdvancedSession, argName string, arg []int64, xs []ort.Value, mem *ort.MemoryInfo) ([]*ort.OwnedValue, error) {
	at, err := ort.NewTensor(ort.NewShape(int64(len(arg))), arg)
	if err != nil {
		return nil, err
	}
	defer at.Destroy()
	ins, inNames, outNames := append([]ort.Value{at}, xs...), []string{argName}, make([]string, len(xs))
	for i := range xs {
		inNames, outNames[i] = append(inNames, opsIn(i)), opsOut(i)
	}
	return ortval.RunOnDevice(sess, inNames, ins, outNames, mem)
}

// Trim returns the first n positions of each self-attention K/V, left in mem.
func (o *Ops) Trim(self []ort.Value, n int, mem *ort.MemoryInfo) ([]*ort.OwnedValue, error) {
	if len(self) != o.tensors {
		return nil, fmt.Errorf("trim %d tensors, the graph takes %d (programmer error)", len(self), o.tensors)
	}
	return o.run(o.trim, opsLen, []int64{int64(n)}, self, mem)
}

// Gather returns the given batch rows of each K/V, self then cross, left in mem.
func (o *Ops) Gather(kv []ort.Value, rows []int64, mem *ort.MemoryInfo) ([]*ort.OwnedValue, error) {
	if len(kv) != 2*o.tensors {
		return nil, fmt.Errorf("gather %d tensors, the graph takes %d (programmer error)", len(kv), 2*o.tensors)
	}
	return o.run(o.gather, opsRows, rows, kv, mem)
}

// ONNX protobuf field numbers (onnx.proto) and the values used here.
const (
	modelIRVersion, modelOpset, modelGraph = 1, 8, 7
	opsetVersion                           = 2
	graphNode, graphName, graphInit        = 1, 2, 5
	graphInput, graphOutput                = 11, 12
	nodeInput, nodeOutput, nodeOp, nodeAtt = 1, 2, 4, 5
	attName, attInt, attType               = 1, 3, 20
	tensorDims, tensorType, tensorName     = 1, 2, 8
	tensorRaw                              = 9
	valueName, valueType                   = 1, 2
	typeTensor, tensorElem                 = 1, 1

	onnxFloat, onnxInt64 = 1, 7
	attributeInt         = 2
	irVersion, opset     = 8, 17
)

// opsGraph encodes a model whose outputs y_i are op(x_i, arg) for n float
// tensors x_i of any shape: Slice (starts 0, ends arg, axis 2) or Gather
// (indices arg, axis 0).
func opsGraph(name string, n int, arg, op string) []byte {
	var g []byte
	bytesField := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	str := func(b []byte, num protowire.Number, s string) []byte { return bytesField(b, num, []byte(s)) }
	varint := func(b []byte, num protowire.Number, v int64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(v))
	}
	valueInfo := func(name string, elem int64) []byte {
		t := varint(nil, tensorElem, elem) // no shape: any
		return bytesField(str(nil, valueName, name), valueType, bytesField(nil, typeTensor, t))
	}
	int64Init := func(name string, v int64) []byte {
		t := varint(nil, tensorDims, 1)
		t = varint(t, tensorType, onnxInt64)
		t = str(t, tensorName, name)
		return bytesField(t, tensorRaw, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	}
	g = str(g, graphName, name)
	g = bytesField(g, graphInput, valueInfo(arg, onnxInt64))
	if op == "Slice" {
		g = bytesField(g, graphInit, int64Init("zero", 0))
		g = bytesField(g, graphInit, int64Init("axis", 2))
	}
	for i := 0; i < n; i++ {
		node := str(nil, nodeInput, opsIn(i))
		if op == "Slice" {
			node = str(str(str(node, nodeInput, "zero"), nodeInput, arg), nodeInput, "axis")
		} else {
			node = str(node, nodeInput, arg)
			att := varint(str(nil, attName, "axis"), attInt, 0)
			node = bytesField(node, nodeAtt, varint(att, attType, attributeInt))
		}
		node = str(str(node, nodeOutput, opsOut(i)), nodeOp, op)
		g = bytesField(g, graphNode, node)
		g = bytesField(g, graphInput, valueInfo(opsIn(i), onnxFloat))
		g = bytesField(g, graphOutput, valueInfo(opsOut(i), onnxFloat))
	}
	m := varint(nil, modelIRVersion, irVersion)
	m = bytesField(m, modelOpset, varint(nil, opsetVersion, opset))
	return bytesField(m, modelGraph, g)
}
