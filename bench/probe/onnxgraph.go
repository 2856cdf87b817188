package probe

import (
	"encoding/binary"
	"math"
)

// The GEMM probe's graph is generated here, as ONNX protobuf bytes, instead of
// shipping a fixture: one MatMul of an input [M, K] by a constant [K, N]. The
// constant is an initializer, so ONNX Runtime prepacks it exactly as it does
// the encoder's weights, and the measured rate is MLAS's, not a Go kernel's.

// Field numbers from onnx.proto (ModelProto, GraphProto, NodeProto, ...).
const (
	modelIRVersion   = 1
	modelProducer    = 2
	modelGraph       = 7
	modelOpsetImport = 8
	opsetVersion     = 2
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	nodeInput        = 1
	nodeOutput       = 2
	nodeName         = 3
	nodeOpType       = 4
	nodeDomain       = 7
	opsetDomain      = 1
	valueName        = 1
	valueType        = 2
	typeTensor       = 1
	tensorElemType   = 1
	tensorShape      = 2
	shapeDim         = 1
	dimValue         = 1
	tpDims           = 1
	tpDataType       = 2
	tpName           = 8
	tpRawData        = 9
	onnxFloat        = 1
	onnxInt8         = 3
	onnxFloat16      = 10
	nodeAttribute    = 5
	attrName         = 1
	attrI            = 3
	attrType         = 20
	attrTypeInt      = 2
)

// pb is a minimal protobuf writer: varints, length-delimited fields.
type pb []byte

func (b pb) varint(field int, v uint64) pb {
	b = binary.AppendUvarint(b, uint64(field)<<3|0)
	return binary.AppendUvarint(b, v)
}

func (b pb) bytes(field int, v []byte) pb {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func (b pb) str(field int, s string) pb { return b.bytes(field, []byte(s)) }

func floatValueInfo(name string, dims ...int64) []byte {
	var shape pb
	for _, d := range dims {
		shape = shape.bytes(shapeDim, pb(nil).varint(dimValue, uint64(d)))
	}
	tensor := pb(nil).varint(tensorElemType, onnxFloat).bytes(tensorShape, shape)
	typ := pb(nil).bytes(typeTensor, tensor)
	return pb(nil).str(valueName, name).bytes(valueType, typ)
}

// tensorProto is a constant [dims] of ONNX element type elem with raw data.
func tensorProto(name string, elem uint64, raw []byte, dims ...int) []byte {
	var t pb
	for _, d := range dims {
		t = t.varint(tpDims, uint64(d))
	}
	return t.varint(tpDataType, elem).str(tpName, name).bytes(tpRawData, raw)
}

// attrInt is an integer attribute of a node.
func attrInt(name string, v int64) []byte {
	return pb(nil).str(attrName, name).varint(attrI, uint64(v)).varint(attrType, attrTypeInt)
}

// nodeProto is an ONNX-domain node reading ins and writing outs.
func nodeProto(op string, ins, outs []string, attrs ...[]byte) []byte {
	n := pb(nil)
	for _, x := range ins {
		n = n.str(nodeInput, x)
	}
	for _, x := range outs {
		n = n.str(nodeOutput, x)
	}
	n = n.str(nodeName, op+"_"+outs[0]).str(nodeOpType, op)
	for _, a := range attrs {
		n = n.bytes(nodeAttribute, a)
	}
	return n
}

// graphModel is an opset-17 model of nodes and constants with the float
// input A and the float output C.
func graphModel(name string, nodes, inits [][]byte, aDims, cDims []int64) []byte {
	graph := pb(nil)
	for _, n := range nodes {
		graph = graph.bytes(graphNode, n)
	}
	graph = graph.str(graphName, name)
	for _, t := range inits {
		graph = graph.bytes(graphInitializer, t)
	}
	graph = graph.bytes(graphInput, floatValueInfo("A", aDims...)).bytes(graphOutput, floatValueInfo("C", cDims...))
	return pb(nil).varint(modelIRVersion, 8).str(modelProducer, "autoui-bench-probe").
		bytes(modelGraph, graph).bytes(modelOpsetImport, pb(nil).varint(opsetVersion, 17))
}

// gemmModel is a model of one node reading the input A [m, k] and the
// constants W (and S, when inits has two) and writing C [m, n]: op in domain
// ("" for ONNX's own, opset 17).
func gemmModel(name string, m, k, n int, op, domain string, inits ...[]byte) []byte {
	node := pb(nil).str(nodeInput, "A").str(nodeInput, "W")
	if len(inits) > 1 {
		node = node.str(nodeInput, "S")
	}
	node = node.str(nodeOutput, "C").str(nodeName, "matmul").str(nodeOpType, op)
	if domain != "" {
		node = node.str(nodeDomain, domain)
	}
	graph := pb(nil).bytes(graphNode, node).str(graphName, name)
	for _, t := range inits {
		graph = graph.bytes(graphInitializer, t)
	}
	graph = graph.bytes(graphInput, floatValueInfo("A", int64(m), int64(k))).
		bytes(graphOutput, floatValueInfo("C", int64(m), int64(n)))
	model := pb(nil).varint(modelIRVersion, 8).str(modelProducer, "autoui-bench-probe").
		bytes(modelGraph, graph).bytes(modelOpsetImport, pb(nil).varint(opsetVersion, 17))
	if domain != "" {
		model = model.bytes(modelOpsetImport, pb(nil).str(opsetDomain, domain).varint(opsetVersion, 1))
	}
	return model
}

// matMulModel returns an ONNX model (opset 17) computing C = A x W with A an
// input [m, k] and W a deterministic constant [k, n].
func matMulModel(m, k, n int) []byte {
	return gemmModel("gemm_probe", m, k, n, "MatMul", "", tensorProto("W", onnxFloat, weightBytes(k*n, false), k, n))
}

// weight is the probes' constant W at flat index i: small values of both
// signs, exact in fp16 too (any finite data gives the same speed).
func weight(i int) float32 { return float32(i%17-8) / 64 }

// weightBytes is W's raw data, float32 or float16.
func weightBytes(n int, half bool) []byte {
	if half {
		raw := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(raw[2*i:], halfBits(weight(i)))
		}
		return raw
	}
	raw := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(weight(i)))
	}
	return raw
}

// halfBits is f as IEEE binary16, truncating the mantissa: exact for zero
// and for normal values with at most 11 significant bits, which is all the
// probes use.
func halfBits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if b&0x7fffffff == 0 {
		return sign
	}
	exp := int(b>>23&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16(b&0x7fffff>>13)
}

// quantMatMulModel returns the int8 counterpart of matMulModel: the
// DynamicQuantizeMatMul that scripts.quantize puts in place of every weight
// MatMul (A quantized per call, W int8 with one scale per output column), with
// the same values: W = (i%17-8) and scale 1/64.
func quantMatMulModel(m, k, n int) []byte {
	raw := make([]byte, k*n)
	for i := range raw {
		raw[i] = byte(int8(i%17 - 8))
	}
	scale := make([]byte, 4*n)
	for j := 0; j < n; j++ {
		binary.LittleEndian.PutUint32(scale[4*j:], math.Float32bits(1.0/64))
	}
	return gemmModel("gemm_int8_probe", m, k, n, "DynamicQuantizeMatMul", "com.microsoft",
		tensorProto("W", onnxInt8, raw, k, n), tensorProto("S", onnxFloat, scale, n))
}
