package kv

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
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
// Both are typed for the cache's element type (Elem).
//
// A bound output must have the shape the graph computes, so a cache cannot
// be bound at its capacity and trimmed by a shorter view; and T5's [B, heads,
// T, d_kv] layout makes a shorter T a strided subset, not a prefix. Hence a
// copy on the device, of the positions or rows that stay.
//
// Four more serve the static cache (Static): copies between host and
// device memory of int64 and float32 tensors (Identity), zeros
// (ConstantOfShape, float32 and the cache's type) to allocate its buffers on
// the device, and rows of zeros appended to a batch's states (Pad), so
// batches of a few sizes share them.
//
// And merge puts a batch's states back together when its prompts were
// encoded in groups of similar length (Merge); scatter writes some rows of
// the static cache's cross K/V in place, for requests that join a running
// decode (ScatterRows).
type Ops struct {
	trim, gather, padSess, scatter *ort.DynamicAdvancedSession
	zerosOf                        [2]*ort.DynamicAdvancedSession // by Elem: float32's always, the cache's
	cache                          Elem
	// merges[g-1] merges g parts
	merges [MergeParts]*ort.DynamicAdvancedSession
	// copies[float][n-1] copies n tensors of int64 (float false) or float32
	copies  [2][transferTensors]*ort.DynamicAdvancedSession
	tensors int // self K/V per graph call: 2 x layers
}

// transferTensors is how many tensors one copy graph run moves at most.
const transferTensors = 2

// Graph input and output names.
const (
	opsLen  = "len"
	opsRows = "rows"
)

func opsIn(i int) string  { return "x" + strconv.Itoa(i) }
func opsOut(i int) string { return "y" + strconv.Itoa(i) }

// NewOps builds the graphs for a decoder of the given layers whose K/V are of
// type cache and opens them with so (the decoder's session options: the same
// provider).
func NewOps(layers int, cache Elem, so *ort.SessionOptions) (*Ops, error) {
	o := &Ops{tensors: 2 * layers, cache: cache}
	var err error
	if o.trim, err = openOps(opsGraph("trim", o.tensors, opsLen, "Slice", cache.onnx()), []string{opsLen}, o.tensors, so); err != nil {
		return nil, fmt.Errorf("cache trim graph: %w", err)
	}
	// Gather takes the cross K/V too: 4 x layers.
	if o.gather, err = openOps(opsGraph("gather", 2*o.tensors, opsRows, "Gather", cache.onnx()), []string{opsRows}, 2*o.tensors, so); err != nil {
		o.Close()
		return nil, fmt.Errorf("cache gather graph: %w", err)
	}
	if o.scatter, err = openScatter(o.tensors, cache, so); err != nil {
		o.Close()
		return nil, fmt.Errorf("cache scatter graph: %w", err)
	}
	for f, elem := range []int64{onnxInt64, onnxFloat} {
		for n := 1; n <= transferTensors; n++ {
			if o.copies[f][n-1], err = openOps(copyGraph(n, elem), nil, n, so); err != nil {
				o.Close()
				return nil, fmt.Errorf("copy graph: %w", err)
			}
		}
	}
	for _, e := range []Elem{Float32, cache} {
		if o.zerosOf[e] != nil {
			continue
		}
		if o.zerosOf[e], err = ort.NewDynamicAdvancedSessionWithONNXData(zerosGraph(e), []string{"shape"}, []string{opsOut(0)}, so); err != nil {
			o.Close()
			return nil, fmt.Errorf("zeros graph: %w", err)
		}
	}
	if o.padSess, err = ort.NewDynamicAdvancedSessionWithONNXData(padGraph(), []string{opsIn(0), "pads"}, []string{opsOut(0)}, so); err != nil {
		o.Close()
		return nil, fmt.Errorf("pad graph: %w", err)
	}
	for g := 1; g <= MergeParts; g++ {
		if o.merges[g-1], err = ort.NewDynamicAdvancedSessionWithONNXData(mergeGraph(g), mergeInputs(g), []string{opsOut(0)}, so); err != nil {
			o.Close()
			return nil, fmt.Errorf("merge graph: %w", err)
		}
	}
	return o, nil
}

// openOps opens a graph of inputs lead then x_i and outputs y_i, i < n.
func openOps(model []byte, lead []string, n int, so *ort.SessionOptions) (*ort.DynamicAdvancedSession, error) {
	ins, outs := slices.Clone(lead), make([]string, n)
	for i := range outs {
		ins = append(ins, opsIn(i))
		outs[i] = opsOut(i)
	}
	return ort.NewDynamicAdvancedSessionWithONNXData(model, ins, outs, so)
}

// Close releases the sessions.
func (o *Ops) Close() {
	sessions := []**ort.DynamicAdvancedSession{&o.trim, &o.gather, &o.scatter, &o.zerosOf[Float32], &o.zerosOf[Float16], &o.padSess}
	for g := range o.merges {
		sessions = append(sessions, &o.merges[g])
	}
	for f := range o.copies {
		for n := range o.copies[f] {
			sessions = append(sessions, &o.copies[f][n])
		}
	}
	for _, s := range sessions {
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

// ScatterRows writes src[i]'s rows into dst[i] at the given batch rows, in
// place: row rows[j] of each dst becomes row j of its src, positions (axis
// 2) padded with zeros up to dst's. It takes 2 x layers K/V tensors [B,
// heads, positions, d_kv] of the cache's type (the cross K/V, or a whole
// self-attention cache). dst is bound as both the input and the output, so
// the static cache's addresses stay; the result lands there whether or not
// the kernel first copies its input (ORT's ScatterND skips that copy when
// the two are one buffer, as its own in-place planning makes them).
func (o *Ops) ScatterRows(dst []ort.Value, rows []int64, src []ort.Value) error {
	if len(dst) != o.tensors || len(src) != o.tensors {
		return fmt.Errorf("scatter %d tensors into %d, the graph takes %d (programmer error)", len(src), len(dst), o.tensors)
	}
	d0 := dst[0].GetShape()
	s0 := src[0].GetShape()
	for i := range dst {
		d, s := dst[i].GetShape(), src[i].GetShape()
		if len(d) != 4 || !slices.Equal(d, d0) || !slices.Equal(s, s0) || s[0] != int64(len(rows)) || s[1] != d[1] || s[2] > d[2] || s[3] != d[3] {
			return fmt.Errorf("scatter %v into %v at %d rows (programmer error)", s, d, len(rows))
		}
	}
	for _, r := range rows {
		if r < 0 || r >= d0[0] {
			return fmt.Errorf("scatter into row %d of %d (programmer error)", r, d0[0])
		}
	}
	rowsT, err := ort.NewTensor(ort.NewShape(int64(len(rows))), rows)
	if err != nil {
		return err
	}
	defer rowsT.Destroy()
	pads, err := ort.NewTensor(ort.NewShape(8), []int64{0, 0, 0, 0, 0, 0, d0[2] - s0[2], 0})
	if err != nil {
		return err
	}
	defer pads.Destroy()
	b, err := o.scatter.CreateIoBinding()
	if err != nil {
		return fmt.Errorf("scatter binding: %w", err)
	}
	defer b.Destroy()
	bind := func(name string, v ort.Value) error { return b.BindInput(name, v) }
	if err := cmp.Or(bind(opsRows, rowsT), bind("pads", pads)); err != nil {
		return fmt.Errorf("scatter binding: %w", err)
	}
	for i := range dst {
		if err := cmp.Or(bind(opsIn(i), dst[i]), bind(scatterUpdate(i), src[i]), b.BindOutput(opsOut(i), dst[i])); err != nil {
			return fmt.Errorf("scatter binding: %w", err)
		}
	}
	return o.scatter.RunWithBinding(b)
}

func scatterUpdate(i int) string { return "u" + strconv.Itoa(i) }

// openScatter opens the scatter graph of n tensors of type e.
func openScatter(n int, e Elem, so *ort.SessionOptions) (*ort.DynamicAdvancedSession, error) {
	ins, outs := []string{opsRows, "pads"}, make([]string, n)
	for i := range outs {
		ins = append(ins, opsIn(i), scatterUpdate(i))
		outs[i] = opsOut(i)
	}
	return ort.NewDynamicAdvancedSessionWithONNXData(scatterGraph(n, e.onnx()), ins, outs, so)
}

// Transfer is a copy that runs again and again between the same tensors
// (host to device or back): one binding of a copy graph.
type Transfer struct {
	sess *ort.DynamicAdvancedSession
	bind *ort.IoBinding
	srcs []ort.Value
}

// NewTransfer binds a copy of srcs into dsts (pairwise, the same shapes;
// float32 or int64 tensors, at most two).
func (o *Ops) NewTransfer(float bool, srcs, dsts []ort.Value) (*Transfer, error) {
	if len(srcs) != len(dsts) || len(srcs) == 0 || len(srcs) > transferTensors {
		return nil, fmt.Errorf("copy %d tensors into %d (programmer error)", len(srcs), len(dsts))
	}
	f := 0
	if float {
		f = 1
	}
	t := &Transfer{sess: o.copies[f][len(srcs)-1], srcs: srcs}
	var err error
	if t.bind, err = t.sess.CreateIoBinding(); err != nil {
		return nil, fmt.Errorf("copy binding: %w", err)
	}
	for i := range srcs {
		if err = t.bind.BindInput(opsIn(i), srcs[i]); err == nil {
			err = t.bind.BindOutput(opsOut(i), dsts[i])
		}
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("copy binding: %w", err)
		}
	}
	return t, nil
}

// Run copies what srcs hold now. Its inputs are bound again first: ORT
// copies an input that lives on another device than the graph reads it
// from (host memory into a cuda graph) when it is bound, not when the
// graph runs, so a binding made once would copy the first values forever.
func (t *Transfer) Run() error {
	t.bind.ClearBoundInputs()
	for i, v := range t.srcs {
		if err := t.bind.BindInput(opsIn(i), v); err != nil {
			return fmt.Errorf("copy binding: %w", err)
		}
	}
	return t.sess.RunWithBinding(t.bind)
}

// Close releases the binding.
func (t *Transfer) Close() { t.bind.Destroy() }

// upload returns a copy of the int64 tensor src in mem.
func (o *Ops) upload(src ort.Value, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	return runOne(o.copies[0][0], []string{opsIn(0)}, []ort.Value{src}, mem)
}

// Cache is the element type of the K/V tensors the ops take.
func (o *Ops) Cache() Elem { return o.cache }

// Zeros returns a float32 tensor of zeros of the given dims in mem.
func (o *Ops) Zeros(dims []int64, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	return o.zeros(o.zerosOf[Float32], dims, mem)
}

// CacheZeros returns a tensor of zeros of the cache's type (Cache) in mem.
func (o *Ops) CacheZeros(dims []int64, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	return o.zeros(o.zerosOf[o.cache], dims, mem)
}

func (o *Ops) zeros(sess *ort.DynamicAdvancedSession, dims []int64, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	shape, err := ort.NewTensor(ort.NewShape(int64(len(dims))), dims)
	if err != nil {
		return nil, err
	}
	defer shape.Destroy()
	return runOne(sess, []string{"shape"}, []ort.Value{shape}, mem)
}

// PadRows returns x [b, ...] (float32, rank 3) with rows of zeros after its
// own up to rows, in mem.
func (o *Ops) PadRows(x ort.Value, rows int, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	sh := x.GetShape()
	if len(sh) != 3 || int64(rows) < sh[0] {
		return nil, fmt.Errorf("pad %v to %d rows (programmer error)", sh, rows)
	}
	pads, err := ort.NewTensor(ort.NewShape(6), []int64{0, 0, 0, int64(rows) - sh[0], 0, 0})
	if err != nil {
		return nil, err
	}
	defer pads.Destroy()
	return runOne(o.padSess, []string{opsIn(0), "pads"}, []ort.Value{x, pads}, mem)
}

// MergeParts is the most parts Merge takes.
const MergeParts = 4

// Merge returns one batch's states [B, n, d] (float32) from parts [b_g, n_g,
// d] with n_g <= n and the b_g summing to B: each part's positions padded
// with zeros to n, the parts concatenated, and row i of the result row
// rows[i] of that concatenation. It is left in mem.
func (o *Ops) Merge(parts []ort.Value, rows []int64, n int, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	return o.merge(parts, rows, n, func(sess *ort.DynamicAdvancedSession, names []string, ins []ort.Value) (*ort.OwnedValue, error) {
		return runOne(sess, names, ins, mem)
	})
}

// MergeInto is Merge writing into out, a [B, n, d] tensor (over Go memory).
func (o *Ops) MergeInto(parts []ort.Value, rows []int64, n int, out ort.Value) error {
	_, err := o.merge(parts, rows, n, func(sess *ort.DynamicAdvancedSession, _ []string, ins []ort.Value) (*ort.OwnedValue, error) {
		return nil, sess.Run(ins, []ort.Value{out})
	})
	return err
}

// merge checks Merge's arguments and runs the merge graph of len(parts)
// inputs through run.
func (o *Ops) merge(parts []ort.Value, rows []int64, n int,
	run func(*ort.DynamicAdvancedSession, []string, []ort.Value) (*ort.OwnedValue, error)) (*ort.OwnedValue, error) {
	g := len(parts)
	if g == 0 || g > MergeParts {
		return nil, fmt.Errorf("merge %d parts, at most %d (programmer error)", g, MergeParts)
	}
	ins := make([]ort.Value, 0, 1+2*g)
	rowsT, err := ort.NewTensor(ort.NewShape(int64(len(rows))), rows)
	if err != nil {
		return nil, err
	}
	defer rowsT.Destroy()
	ins = append(ins, rowsT)
	total := int64(0)
	for _, x := range parts {
		sh := x.GetShape()
		if len(sh) != 3 || sh[1] > int64(n) {
			return nil, fmt.Errorf("merge part %v into %d positions (programmer error)", sh, n)
		}
		total += sh[0]
		pads, err := ort.NewTensor(ort.NewShape(6), []int64{0, 0, 0, 0, int64(n) - sh[1], 0})
		if err != nil {
			return nil, err
		}
		defer pads.Destroy()
		ins = append(ins, pads)
	}
	if total != int64(len(rows)) {
		return nil, fmt.Errorf("merge parts of %d rows into %d (programmer error)", total, len(rows))
	}
	for _, r := range rows {
		if r < 0 || r >= total {
			return nil, fmt.Errorf("merge row %d of %d (programmer error)", r, total)
		}
	}
	ins = append(ins, parts...)
	return run(o.merges[g-1], mergeInputs(g), ins)
}

// runOne runs a graph of one output, y_0, left in mem.
func runOne(sess *ort.DynamicAdvancedSession, inNames []string, ins []ort.Value, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	vs, err := ortval.RunOnDevice(sess, inNames, ins, []string{opsOut(0)}, mem)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// ONNX protobuf field numbers (onnx.proto) and the values used here.
const (
	modelIRVersion, modelOpset, modelGraph = 1, 8, 7
	opsetVersion                           = 2
	graphNode, graphName, graphInit        = 1, 2, 5
	graphInput, graphOutput                = 11, 12
	nodeInput, nodeOutput, nodeOp, nodeAtt = 1, 2, 4, 5
	attName, attInt, attTensor, attType    = 1, 3, 5, 20
	tensorDims, tensorType, tensorName     = 1, 2, 8
	tensorRaw                              = 9
	valueName, valueType                   = 1, 2
	typeTensor, tensorElem                 = 1, 1

	onnxFloat, onnxInt64 = 1, 7
	onnxFloat16          = 10
	attributeInt         = 2
	attributeTensor      = 4
	irVersion, opset     = 8, 17
)

// graphProto encodes a small ONNX model: its inputs and outputs are typed
// tensors of any shape.
type graphProto struct{ g []byte }

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func strField(b []byte, num protowire.Number, s string) []byte { return bytesField(b, num, []byte(s)) }

func varintField(b []byte, num protowire.Number, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(v))
}

func newGraphProto(name string) *graphProto { return &graphProto{g: strField(nil, graphName, name)} }

func valueInfo(name string, elem int64) []byte {
	t := varintField(nil, tensorElem, elem) // no shape: any
	return bytesField(strField(nil, valueName, name), valueType, bytesField(nil, typeTensor, t))
}

func (p *graphProto) input(name string, elem int64) {
	p.g = bytesField(p.g, graphInput, valueInfo(name, elem))
}

func (p *graphProto) output(name string, elem int64) {
	p.g = bytesField(p.g, graphOutput, valueInfo(name, elem))
}

// int64Init adds a one-element int64 initializer.
func (p *graphProto) int64Init(name string, v int64) { p.int64sInit(name, []int64{1}, v) }

// int64sInit adds an int64 initializer of the given dims (none: a scalar).
func (p *graphProto) int64sInit(name string, dims []int64, vs ...int64) {
	var t, raw []byte
	for _, d := range dims {
		t = varintField(t, tensorDims, d)
	}
	t = varintField(t, tensorType, onnxInt64)
	t = strField(t, tensorName, name)
	for _, v := range vs {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
	}
	p.g = bytesField(p.g, graphInit, bytesField(t, tensorRaw, raw))
}

// node adds op(ins) -> out, with int attributes.
func (p *graphProto) node(op string, ins []string, out string, ints map[string]int64) {
	var atts [][]byte
	for name, v := range ints {
		atts = append(atts, varintField(varintField(strField(nil, attName, name), attInt, v), attType, attributeInt))
	}
	p.nodeAtts(op, ins, out, atts...)
}

// nodeAtts adds op(ins) -> out with attributes already encoded.
func (p *graphProto) nodeAtts(op string, ins []string, out string, atts ...[]byte) {
	var n []byte
	for _, in := range ins {
		n = strField(n, nodeInput, in)
	}
	for _, att := range atts {
		n = bytesField(n, nodeAtt, att)
	}
	n = strField(strField(n, nodeOutput, out), nodeOp, op)
	p.g = bytesField(p.g, graphNode, n)
}

// tensorAttr encodes an attribute holding a one-element tensor of elem over raw.
func tensorAttr(name string, elem int64, raw []byte) []byte {
	t := varintField(nil, tensorDims, 1)
	t = varintField(t, tensorType, elem)
	t = bytesField(t, tensorRaw, raw)
	return varintField(bytesField(strField(nil, attName, name), attTensor, t), attType, attributeTensor)
}

func (p *graphProto) model() []byte {
	m := varintField(nil, modelIRVersion, irVersion)
	m = bytesField(m, modelOpset, varintField(nil, opsetVersion, opset))
	return bytesField(m, modelGraph, p.g)
}

// opsGraph encodes a model whose outputs y_i are op(x_i, arg) for n tensors
// x_i of element type elem and any shape: Slice (starts 0, ends arg, axis 2)
// or Gather (indices arg, axis 0).
func opsGraph(name string, n int, arg, op string, elem int64) []byte {
	p := newGraphProto(name)
	p.input(arg, onnxInt64)
	if op == "Slice" {
		p.int64Init("zero", 0)
		p.int64Init("axis", 2)
	}
	for i := 0; i < n; i++ {
		if op == "Slice" {
			p.node(op, []string{opsIn(i), "zero", arg, "axis"}, opsOut(i), nil)
		} else {
			p.node(op, []string{opsIn(i), arg}, opsOut(i), map[string]int64{"axis": 0})
		}
		p.input(opsIn(i), elem)
		p.output(opsOut(i), elem)
	}
	return p.model()
}

// scatterGraph encodes y_i = ScatterND(x_i, at, Pad(u_i, pads)) for n
// tensors of element type elem: rows of u_i, padded, written over x_i's at
// rows. The index at[j, h, p] = (rows[j], h, p) names each position's d_kv
// values, not the whole row: ORT's CUDA ScatterND gives each index one
// thread that copies its slice alone, and a whole row at base size (12 x
// 256 x 64 values) took one thread ~45 ms, a join of 40 rows ~1.1 s.
func scatterGraph(n int, elem int64) []byte {
	p := newGraphProto("scatter")
	p.input(opsRows, onnxInt64)
	p.input("pads", onnxInt64)
	p.int64sInit("zero", nil, 0)
	p.int64sInit("one", nil, 1)
	p.int64sInit("last", []int64{1}, 1)
	for i := 0; i < n; i++ {
		p.node("Pad", []string{scatterUpdate(i), "pads"}, "padded"+strconv.Itoa(i), nil)
	}
	// [n, H, P, 1], and each coordinate broadcast over it
	p.node("Shape", []string{"padded0"}, "nhp", map[string]int64{"start": 0, "end": 3})
	p.node("Concat", []string{"nhp", "last"}, "grid", map[string]int64{"axis": 0})
	coords := []string{"r4", "h4", "p4"}
	p.int64sInit("r4shape", []int64{4}, -1, 1, 1, 1)
	p.node("Reshape", []string{opsRows, "r4shape"}, "r4", nil)
	for a, name := range []string{"h", "p"} {
		p.node("Shape", []string{"padded0"}, name+"n", map[string]int64{"start": int64(a + 1), "end": int64(a + 2)})
		p.node("Squeeze", []string{name + "n"}, name+"s", nil)
		p.node("Range", []string{"zero", name + "s", "one"}, name+"r", nil)
		shape := []int64{1, 1, 1, 1}
		shape[a+1] = -1
		p.int64sInit(name+"4shape", []int64{4}, shape...)
		p.node("Reshape", []string{name + "r", name + "4shape"}, name+"4", nil)
	}
	for a, c := range coords {
		coords[a] = c + "x"
		p.node("Expand", []string{c, "grid"}, coords[a], nil)
	}
	p.node("Concat", coords, "at", map[string]int64{"axis": 3})
	for i := 0; i < n; i++ {
		p.node("ScatterND", []string{opsIn(i), "at", "padded" + strconv.Itoa(i)}, opsOut(i), nil)
		p.input(opsIn(i), elem)
		p.input(scatterUpdate(i), elem)
		p.output(opsOut(i), elem)
	}
	return p.model()
}

// copyGraph encodes y_i = Identity(x_i) for n tensors of one element type:
// run with x_i in one memory and y_i bound in another, it is a copy between
// them, by the provider's own transfer.
func copyGraph(n int, elem int64) []byte {
	p := newGraphProto("copy")
	for i := 0; i < n; i++ {
		p.node("Identity", []string{opsIn(i)}, opsOut(i), nil)
		p.input(opsIn(i), elem)
		p.output(opsOut(i), elem)
	}
	return p.model()
}

// padGraph encodes y = Pad(x, pads): zeros around a float32 tensor.
func padGraph() []byte {
	p := newGraphProto("pad")
	p.input(opsIn(0), onnxFloat)
	p.input("pads", onnxInt64)
	p.node("Pad", []string{opsIn(0), "pads"}, opsOut(0), nil)
	p.output(opsOut(0), onnxFloat)
	return p.model()
}

// mergeInputs are the merge graph's inputs for g parts: the row order,
// each part's pads, the parts.
func mergeInputs(g int) []string {
	names := []string{opsRows}
	for i := 0; i < g; i++ {
		names = append(names, "pads"+strconv.Itoa(i))
	}
	for i := 0; i < g; i++ {
		names = append(names, opsIn(i))
	}
	return names
}

// mergeGraph encodes y = Gather(Concat(Pad(x_0, pads_0), ...,
// Pad(x_{g-1}, pads_{g-1}), axis 0), rows, axis 0) for g float32 parts.
func mergeGraph(g int) []byte {
	p := newGraphProto("merge")
	p.input(opsRows, onnxInt64)
	padded := make([]string, g)
	for i := 0; i < g; i++ {
		pads := "pads" + strconv.Itoa(i)
		padded[i] = "padded" + strconv.Itoa(i)
		p.input(pads, onnxInt64)
		p.input(opsIn(i), onnxFloat)
		p.node("Pad", []string{opsIn(i), pads}, padded[i], nil)
	}
	p.node("Concat", padded, "all", map[string]int64{"axis": 0})
	p.node("Gather", []string{"all", opsRows}, opsOut(0), map[string]int64{"axis": 0})
	p.output(opsOut(0), onnxFloat)
	return p.model()
}

// zerosGraph encodes y = ConstantOfShape(shape) with a zero of e as its
// value: zeros of e.
func zerosGraph(e Elem) []byte {
	p := newGraphProto("zeros")
	p.input("shape", onnxInt64)
	p.nodeAtts("ConstantOfShape", []string{"shape"}, opsOut(0), tensorAttr("value", e.onnx(), make([]byte, e.Bytes())))
	p.output(opsOut(0), e.onnx())
	return p.model()
}
