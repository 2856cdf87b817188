package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// ORT is loaded by the tests that bind ORT values (needORT), not for the
// whole package: the layout tests (layout_test.go) run without it.
var ortOnce struct {
	sync.Once
	err error
}

func needORT(t *testing.T) {
	t.Helper()
	ortOnce.Do(func() {
		lib := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH")
		if lib == "" {
			lib = filepath.Join("..", "..", "third_party", "onnxruntime", "lib", "libonnxruntime.so.1.29.0")
		}
		ort.SetSharedLibraryPath(lib)
		ortOnce.err = ort.InitializeEnvironment(ort.WithLogLevelError())
	})
	if ortOnce.err != nil {
		t.Fatalf("this test needs ONNX Runtime (make setup): %v", ortOnce.err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ort.IsInitialized() {
		ort.DestroyEnvironment()
	}
	os.Exit(code)
}

// fakeDecoder stands in for the decoder graphs: it checks what a call binds
// and writes a present that is the past followed by k new positions whose
// values name the call and position, so the test can follow every position
// through truncations. Its cross graph marks the K/V it writes.
type fakeDecoder struct {
	t                          *testing.T
	names                      Names
	slots                      *Slots
	b, layers, heads, dkv, enc int64
	calls, crossRuns           int
}

func newFake(t *testing.T, b, layers, heads, dkv, enc int) *fakeDecoder {
	names := DecoderNames(layers)
	ins := []string{names.IDs, names.EncoderMask}
	outs := []string{names.Logits}
	var crossOuts []string
	for l := range names.Past {
		ins = append(ins, names.Past[l][:]...)
		outs = append(outs, names.Present[l][:]...)
		crossOuts = append(crossOuts, names.CrossKV[l][:]...)
	}
	// the graphs' own order is not the roles' order
	slices.Reverse(ins)
	slices.Reverse(crossOuts)
	sl, err := FindSlots(names, ins, outs, []string{names.CrossStates}, crossOuts)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeDecoder{t: t, names: names, slots: sl, b: int64(b), layers: int64(layers), heads: int64(heads), dkv: int64(dkv), enc: int64(enc)}
}

func data(t *testing.T, v ort.Value) ([]float32, ort.Shape) {
	t.Helper()
	p, ok := v.(*ortval.Pinned)
	if !ok {
		t.Fatalf("bound value %T is not pinned (binding it allocates)", v)
	}
	tt := p.Value.(*ort.Tensor[float32])
	return tt.GetData(), tt.GetShape()
}

func marker(call, pos int) float32 { return float32(1000*call + pos) }

// crossMarker is what the fake cross graph writes first in layer l's k/v.
func crossMarker(l, kv int) float32 { return float32(-1 - 2*l - kv) }

// cross is the fake cross graph.
func (f *fakeDecoder) cross(ins, outs []ort.Value) error {
	t, sl := f.t, f.slots
	f.crossRuns++
	if _, shape := data(t, ins[sl.CrossStates]); !slices.Equal(shape, ort.Shape{f.b, f.enc, 4}) {
		t.Fatalf("cross graph states %v", shape)
	}
	for l := range sl.CrossKV {
		for j, slot := range sl.CrossKV[l] {
			buf, shape := data(t, outs[slot])
			if !slices.Equal(shape, ort.Shape{f.b, f.heads, f.enc, f.dkv}) {
				t.Fatalf("cross output %v", shape)
			}
			for row := int64(0); row < f.b; row++ { // at every row's start: rows move
				buf[row*f.heads*f.enc*f.dkv] = crossMarker(l, j)
			}
		}
	}
	return nil
}

// run checks the binding of a call on k positions and writes the present.
func (f *fakeDecoder) run(ins, outs []ort.Value, k int) {
	t, sl := f.t, f.slots
	f.calls++
	mask := ins[sl.EncoderMask].(*ortval.Pinned).Value.(*ort.Tensor[int64]).GetShape()
	if !slices.Equal(mask, ort.Shape{f.b, f.enc}) {
		t.Fatalf("call %d: mask %v", f.calls, mask)
	}
	for l := range sl.Past {
		for kv := SelfKey; kv <= SelfValue; kv++ {
			past, ps := data(t, ins[sl.Past[l][kv]])
			pres, qs := data(t, outs[sl.Present[l][kv]])
			n := ps[2]
			if !slices.Equal(ps, ort.Shape{f.b, f.heads, n, f.dkv}) || !slices.Equal(qs, ort.Shape{f.b, f.heads, n + int64(k), f.dkv}) {
				t.Fatalf("call %d layer %d: past %v, present %v for %d new", f.calls, l, ps, qs, k)
			}
			if &past[:1][0] == &pres[:1][0] && n > 0 {
				t.Fatal("past and present share a buffer")
			}
			T := n + int64(k)
			for row := int64(0); row < f.b*f.heads; row++ {
				for pos := int64(0); pos < T; pos++ {
					for d := int64(0); d < f.dkv; d++ {
						v := marker(f.calls, int(pos)) + float32(row)/100
						if pos < n {
							v = past[(row*n+pos)*f.dkv+d]
						}
						pres[(row*T+pos)*f.dkv+d] = v
					}
				}
			}
		}
		for kv := CrossKey; kv <= CrossValue; kv++ {
			buf, ps := data(t, ins[sl.Past[l][kv]])
			if !slices.Equal(ps, ort.Shape{f.b, f.heads, f.enc, f.dkv}) || buf[0] != crossMarker(l, kv-CrossKey) {
				t.Fatalf("call %d layer %d: cross past %v starting %v, not the cross graph's", f.calls, l, ps, buf[0])
			}
		}
	}
}

// The cache's bookkeeping through a speculative-looking script: calls of
// several positions, truncation of rejected ones (also to nothing), views
// reused while the length stays, and finished rows dropped (compaction).
func TestCacheBookkeeping(t *testing.T) {
	needORT(t)
	const B, layers, heads, dkv, enc = 3, 2, 2, 3, 5
	f := newFake(t, B, layers, heads, dkv, enc)
	c, err := New(Config{Shape: Shape{Layers: layers, Heads: heads, DKV: dkv, DModel: 4}, Batch: B, MaxLen: 12,
		Names: f.names, Slots: f.slots}, make([]float32, B*enc*4), make([]int64, B*enc), f.cross)
	if err != nil {
		t.Fatal(err)
	}
	if f.crossRuns != 1 {
		t.Fatalf("the cross graph ran %d times making the cache, want once", f.crossRuns)
	}
	ins, outs := make([]ort.Value, f.slots.Inputs), make([]ort.Value, f.slots.Outputs)
	// want: per row (batch row x head), the value at the start of each position
	want := make([][]float32, B*heads)
	script := []struct {
		k, keep int
		rows    []int // rows kept after the call (nil: all)
	}{{1, -1, nil}, {4, 3, nil}, {1, -1, []int{0, 2}}, {5, 2, nil}, {2, 0, nil}, {3, -1, []int{1}}, {1, -1, nil}}
	for i, s := range script {
		if err := c.Bind(ins, outs, s.k); err != nil {
			t.Fatal(err)
		}
		f.run(ins, outs, s.k)
		c.Advance(s.k)
		for row := range want {
			for j := 0; j < s.k; j++ {
				want[row] = append(want[row], marker(f.calls, len(want[row]))+float32(row)/100)
			}
			if s.keep >= 0 {
				want[row] = want[row][:s.keep]
			}
		}
		if s.keep >= 0 {
			c.Truncate(s.keep)
		}
		if s.rows != nil {
			if err := c.KeepRows(s.rows); err != nil {
				t.Fatal(err)
			}
			var kept [][]float32
			for _, r := range s.rows {
				kept = append(kept, want[r*heads:(r+1)*heads]...)
			}
			want = kept
			f.b = int64(len(s.rows))
		}
		if c.Len() != len(want[0]) || c.Rows()*heads != len(want) {
			t.Fatalf("call %d: %d positions x %d rows, want %d x %d", i, c.Len(), c.Rows(), len(want[0]), len(want)/heads)
		}
		// the cached positions, read through the next call's past view
		past, err := c.self.view(c.self.cur, int64(c.Len()))
		if err != nil {
			t.Fatal(err)
		}
		buf := past[0].Value.(*ort.Tensor[float32]).GetData()
		n := c.Len()
		for row := range want {
			for pos, w := range want[row] {
				if got := buf[(row*n+pos)*dkv]; got != w {
					t.Fatalf("call %d: row %d position %d holds %v, want %v", i, row, pos, got, w)
				}
			}
		}
	}
	// a call that does not fit is refused; so are bad rows
	if err := c.Bind(ins, outs, 12); err == nil {
		t.Error("a call past the cache's capacity was bound")
	}
	for _, bad := range [][]int{nil, {1}, {0, 0}} {
		if err := c.KeepRows(bad); err == nil {
			t.Errorf("rows %v of 1 kept", bad)
		}
	}
	if f.crossRuns != 1 {
		t.Fatalf("the cross graph ran %d times, want once", f.crossRuns)
	}
	c.Close()
	c.Close() // twice is safe
	// a failing cross graph fails New, and nothing leaks
	f.b = B
	if _, err := New(Config{Shape: Shape{Layers: layers, Heads: heads, DKV: dkv, DModel: 4}, Batch: B, MaxLen: 12,
		Names: f.names, Slots: f.slots}, make([]float32, B*enc*4), make([]int64, B*enc),
		func(ins, outs []ort.Value) error { return errors.New("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing cross graph: %v", err)
	}
}

// One-position calls at a constant length make no new views.
func TestSelfViewsReused(t *testing.T) {
	needORT(t)
	s := newSelf(1, 1, 1, 2, 8)
	defer s.close()
	a, _ := s.view(0, 3)
	first := a[0].Value
	b, _ := s.view(0, 3)
	if b[0].Value != first {
		t.Fatal("view remade at the same length")
	}
	c, _ := s.view(0, 4)
	if c[0].Value == first {
		t.Fatal("view not remade for a new length")
	}
}

// cpuOps opens the ops graphs of a decoder of the given layers on the cpu
// provider, and ORT's CPU memory standing in for the device's.
func cpuOps(t *testing.T, layers int) (*Ops, *ort.MemoryInfo) { return cpuOpsOf(t, layers, Float32) }

// cpuOpsOf is cpuOps for a cache of elem.
func cpuOpsOf(t *testing.T, layers int, elem Elem) (*Ops, *ort.MemoryInfo) {
	t.Helper()
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { so.Destroy() })
	ops, err := NewOps(layers, elem, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ops.Close)
	mem, err := ort.NewMemoryInfo("Cpu", ort.AllocatorTypeDevice, 0, ort.MemTypeDefault)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Destroy() })
	return ops, mem
}

// half is the float16 bits of a small whole number (below 2048: exact).
func half(n int) uint16 {
	if n == 0 {
		return 0
	}
	e := 0
	for 1<<(e+1) <= n {
		e++
	}
	return uint16(e+15)<<10 | uint16((n-1<<e)<<(10-e))
}

// encode is whole numbers as the bytes of e's tensors.
func encode(e Elem, vs []int) []byte {
	out := make([]byte, 0, int(e.Bytes())*len(vs))
	for _, v := range vs {
		if e == Float16 {
			out = binary.LittleEndian.AppendUint16(out, half(v))
		} else {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		}
	}
	return out
}

// testScatter writes rows 0 and 1 of xs[2*layers+i]'s values, on T-2
// positions, over rows 2 and 0 of xs[i] in place: those rows become them
// padded with zeros, row 1 and the addresses stay.
func testScatter(t *testing.T, ops *Ops, elem Elem, at func(i, r, hh, p, dd int) int, layers, b, h, T, d int) {
	t.Helper()
	rowsOf := func(i int, rows []int, n int) []int { return kvValues(at, i, rows, h, n, d) }
	dtype := ort.TensorElementDataType(ort.TensorElementDataTypeFloat)
	if elem == Float16 {
		dtype = ort.TensorElementDataTypeFloat16
	}
	var dst, src []ort.Value
	var raws [][]byte
	for i := 0; i < 2*layers; i++ {
		raw := encode(elem, rowsOf(i, []int{0, 1, 2}, T))
		x, err := ort.NewCustomDataTensor(ort.NewShape(int64(b), int64(h), int64(T), int64(d)), raw, dtype)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Destroy()
		u, err := ort.NewCustomDataTensor(ort.NewShape(2, int64(h), int64(T-2), int64(d)), encode(elem, rowsOf(2*layers+i, []int{0, 1}, T-2)), dtype)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Destroy()
		dst, src, raws = append(dst, x), append(src, u), append(raws, raw)
	}
	if err := ops.ScatterRows(dst, []int64{2, 0}, src); err != nil {
		t.Fatal(err)
	}
	for i := range dst {
		// row 0 is now u's row 1, row 2 u's row 0, each padded to T
		var want []int
		for _, part := range [][]int{rowsOf(2*layers+i, []int{1}, T-2), rowsOf(i, []int{1}, T), rowsOf(2*layers+i, []int{0}, T-2)} {
			want = append(want, padPositions(part, h, T-2, T, d)...)
		}
		if !bytes.Equal(raws[i], encode(elem, want)) {
			t.Fatalf("scatter %d: rows not written in place", i)
		}
	}
	if err := ops.ScatterRows(dst, []int64{0, 3}, src); err == nil {
		t.Error("scatter past the last row: no error")
	}
	if err := ops.ScatterRows(dst, []int64{0}, src); err == nil {
		t.Error("scatter of 2 rows at 1: no error")
	}
}

// kvValues are tensor i's values at(i, r, hh, p, dd) over the given rows
// and the first n positions: [rows, h, n, d].
func kvValues(at func(i, r, hh, p, dd int) int, i int, rows []int, h, n, d int) []int {
	var v []int
	for _, r := range rows {
		for hh := 0; hh < h; hh++ {
			for p := 0; p < n; p++ {
				for dd := 0; dd < d; dd++ {
					v = append(v, at(i, r, hh, p, dd))
				}
			}
		}
	}
	return v
}

// padPositions is one row's values [h, n, d] padded with zeros to [h, T,
// d]; a row of T positions is returned as it is.
func padPositions(v []int, h, n, T, d int) []int {
	if len(v) == h*T*d {
		return v
	}
	out := make([]int, 0, h*T*d)
	for hh := 0; hh < h; hh++ {
		out = append(out, v[hh*n*d:(hh+1)*n*d]...)
		out = append(out, make([]int, (T-n)*d)...)
	}
	return out
}

// The trim and gather graphs cut positions and rows exactly, in either cache
// type, and leave their outputs in ORT's memory; the zeros and the empty past
// are of that type.
func TestOps(t *testing.T) {
	needORT(t)
	if got := []uint16{half(1), half(2), half(3), half(1000)}; !slices.Equal(got, []uint16{0x3c00, 0x4000, 0x4200, 0x63d0}) {
		t.Fatalf("half: %x", got)
	}
	for _, elem := range []Elem{Float32, Float16} {
		t.Run(elem.String(), func(t *testing.T) { testOps(t, elem) })
	}
}

func testOps(t *testing.T, elem Elem) {
	const layers, b, h, T, d = 2, 3, 2, 5, 4
	ops, mem := cpuOpsOf(t, layers, elem)
	if ops.Cache() != elem {
		t.Fatalf("ops for %s", ops.Cache())
	}
	// x_i[r, hh, p, dd], whole numbers below 2048 (exact in float16)
	at := func(i, r, hh, p, dd int) int { return 256*i + 64*r + 16*hh + 3*p + dd }
	var xs []ort.Value
	for i := 0; i < 4*layers; i++ {
		var v []int
		for r := 0; r < b; r++ {
			for hh := 0; hh < h; hh++ {
				for p := 0; p < T; p++ {
					for dd := 0; dd < d; dd++ {
						v = append(v, at(i, r, hh, p, dd))
					}
				}
			}
		}
		dtype := ort.TensorElementDataType(ort.TensorElementDataTypeFloat)
		if elem == Float16 {
			dtype = ort.TensorElementDataTypeFloat16
		}
		x, err := ort.NewCustomDataTensor(ort.NewShape(b, h, T, d), encode(elem, v), dtype)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Destroy()
		xs = append(xs, x)
	}
	check := func(what string, ys []*ort.OwnedValue, rows []int, n int) {
		t.Helper()
		defer ortval.DestroyAll(ys)
		for i, y := range ys {
			if y.Location() != "Cpu" || !slices.Equal(y.GetShape(), ort.Shape{int64(len(rows)), h, int64(n), d}) {
				t.Fatalf("%s %d: %v in %s", what, i, y.GetShape(), y.Location())
			}
			want := kvValues(at, i, rows, h, n, d)
			if raw, err := y.HostData(); err != nil || !bytes.Equal(raw, encode(elem, want)) {
				t.Fatalf("%s %d: not rows %v's first %d positions (%v)", what, i, rows, n, err)
			}
		}
	}
	for _, n := range []int{1, 3, T} {
		ys, err := ops.Trim(xs[:2*layers], n, mem)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("trim to %d", n), ys, []int{0, 1, 2}, n)
	}
	for _, rows := range [][]int{{0, 2}, {1}, {0, 1, 2}} {
		idx := make([]int64, len(rows))
		for i, r := range rows {
			idx[i] = int64(r)
		}
		ys, err := ops.Gather(xs, idx, mem)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("gather %v", rows), ys, rows, T)
	}
	if _, err := ops.Trim(xs, 1, mem); err == nil {
		t.Error("trim of the wrong number of tensors: no error")
	}
	testScatter(t, ops, elem, at, layers, b, h, T, d)
	z, err := ops.CacheZeros([]int64{2, 3}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Destroy()
	if raw, err := z.HostData(); err != nil || !bytes.Equal(raw, encode(elem, make([]int, 6))) {
		t.Errorf("zeros: %v (%v)", raw, err)
	}
	var shape ort.Shape
	e, err := emptyTensor(&shape, elem, b, h, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Release()
	if !slices.Equal(e.GetShape(), ort.Shape{b, h, 0, d}) {
		t.Errorf("empty past %v", e.GetShape())
	}
}

// Merge pads each part's positions with zeros, concatenates the parts and
// puts the rows in the asked order, on the device and into Go memory alike.
func TestMerge(t *testing.T) {
	needORT(t)
	ops, mem := cpuOps(t, 1)
	const d = 3
	// part i has rows[i] rows of lens[i] positions; x[i][r, p, k] = 100*i + 10*r + p + k/10
	at := func(i, r, p, k int) float32 { return float32(100*i+10*r+p) + float32(k)/10 }
	for _, c := range []struct {
		rows, lens []int
		n          int
		order      []int64
	}{
		{[]int{2}, []int{4}, 4, []int64{1, 0}},
		{[]int{1, 2}, []int{2, 5}, 5, []int64{1, 0, 2}},
		{[]int{1, 1, 2, 1}, []int{1, 3, 3, 6}, 8, []int64{4, 2, 0, 3, 1}},
	} {
		var parts []ort.Value
		type src struct{ part, row int }
		var cat []src // the concatenation's rows
		for i, b := range c.rows {
			v := make([]float32, b*c.lens[i]*d)
			for r := 0; r < b; r++ {
				cat = append(cat, src{i, r})
				for p := 0; p < c.lens[i]; p++ {
					for k := 0; k < d; k++ {
						v[(r*c.lens[i]+p)*d+k] = at(i, r, p, k)
					}
				}
			}
			x, err := ort.NewTensor(ort.NewShape(int64(b), int64(c.lens[i]), d), v)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Destroy()
			parts = append(parts, x)
		}
		want := make([]float32, len(c.order)*c.n*d)
		for j, o := range c.order {
			s := cat[o]
			for p := 0; p < c.lens[s.part]; p++ {
				for k := 0; k < d; k++ {
					want[(j*c.n+p)*d+k] = at(s.part, s.row, p, k)
				}
			}
		}
		y, err := ops.Merge(parts, c.order, c.n, mem)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := y.HostData()
		if err != nil {
			t.Fatal(err)
		}
		got := unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(raw)/4)
		if !slices.Equal(y.GetShape(), ort.Shape{int64(len(c.order)), int64(c.n), d}) || !slices.Equal(got, want) {
			t.Errorf("merge %+v: %v %v, want %v", c, y.GetShape(), got, want)
		}
		y.Destroy()
		into := make([]float32, len(want))
		for i := range into {
			into[i] = -1 // every value must be written
		}
		out, err := ort.NewTensor(ort.NewShape(int64(len(c.order)), int64(c.n), d), into)
		if err != nil {
			t.Fatal(err)
		}
		if err := ops.MergeInto(parts, c.order, c.n, out); err != nil {
			t.Fatal(err)
		}
		out.Destroy()
		if !slices.Equal(into, want) {
			t.Errorf("merge into %+v: %v, want %v", c, into, want)
		}
	}
	x, err := ort.NewTensor(ort.NewShape(2, 3, d), make([]float32, 2*3*d))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Destroy()
	for _, bad := range []struct {
		parts []ort.Value
		order []int64
		n     int
	}{
		{nil, nil, 3},
		{[]ort.Value{x}, []int64{0, 1}, 2},   // positions over n
		{[]ort.Value{x}, []int64{0}, 3},      // rows do not add up
		{[]ort.Value{x}, []int64{0, 2}, 3},   // a row past the parts
		{[]ort.Value{x, x, x, x, x}, nil, 3}, // too many parts
	} {
		if _, err := ops.Merge(bad.parts, bad.order, bad.n, mem); err == nil {
			t.Errorf("merge %d parts, rows %v, n %d: no error", len(bad.parts), bad.order, bad.n)
		}
	}
}

// A Transfer copies what its sources hold when it runs, not what they held
// when it was bound: the second run copies new values, both ways. (Under
// cuda ORT copies a host input into the device when it is bound; a binding
// kept from the first run copied the first values forever, which the CUDA
// tests in engine caught. Here it holds the contract on the CPU.)
func TestTransferCopiesAtRun(t *testing.T) {
	needORT(t)
	ops, mem := cpuOps(t, 1)
	src := []int64{1, 2, 3}
	host, err := ort.NewTensor(ort.NewShape(3), src)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Destroy()
	dev, err := ops.upload(host, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Destroy()
	back := make([]int64, 3)
	out, err := ort.NewTensor(ort.NewShape(3), back)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Destroy()
	up, err := ops.NewTransfer(false, []ort.Value{host}, []ort.Value{dev})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	down, err := ops.NewTransfer(false, []ort.Value{dev}, []ort.Value{out})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	for run, want := range [][]int64{{4, 5, 6}, {7, 8, 9}} {
		copy(src, want)
		if err := up.Run(); err != nil {
			t.Fatal(err)
		}
		if err := down.Run(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back, want) {
			t.Fatalf("run %d: copied %v, want %v", run, back, want)
		}
	}
}
