package kv

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

func TestMain(m *testing.M) {
	lib := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH")
	if lib == "" {
		lib = filepath.Join("..", "..", "third_party", "onnxruntime", "lib", "libonnxruntime.so.1.29.0")
	}
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		os.Stderr.WriteString("kv tests need ONNX Runtime (make setup): " + err.Error() + "\n")
		os.Exit(1)
	}
	code := m.Run()
	ort.DestroyEnvironment()
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
	adapter                    bool // the cross part is fed by an adapter: zero-length stand-ins
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
	p, ok := v.(*Pinned)
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
			buf[0] = crossMarker(l, j)
		}
	}
	return nil
}

// run checks the binding of a call on k positions and writes the present.
func (f *fakeDecoder) run(ins, outs []ort.Value, k int) {
	t, sl := f.t, f.slots
	f.calls++
	mask := ins[sl.EncoderMask].(*Pinned).Value.(*ort.Tensor[int64]).GetShape()
	if want := map[bool]int64{false: f.enc, true: 0}[f.adapter]; !slices.Equal(mask, ort.Shape{f.b, want}) {
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
			if f.adapter {
				if ps[2] != 0 {
					t.Fatalf("adapter placement: cross past of %d positions fed", ps[2])
				}
				continue
			}
			if !slices.Equal(ps, ort.Shape{f.b, f.heads, f.enc, f.dkv}) || buf[0] != crossMarker(l, kv-CrossKey) {
				t.Fatalf("call %d layer %d: cross past %v starting %v, not the cross graph's", f.calls, l, ps, buf[0])
			}
		}
	}
}

// The cache's bookkeeping through a speculative-looking script: calls of
// several positions, truncation of rejected ones (also to nothing), views
// reused while the length stays.
func TestCacheBookkeeping(t *testing.T) {
	const B, layers, heads, dkv, enc = 3, 2, 2, 3, 5
	f := newFake(t, B, layers, heads, dkv, enc)
	for _, place := range []Placement{Host, Adapter} {
		f.calls, f.crossRuns, f.adapter = 0, 0, place == Adapter
		c, err := New(Config{Shape: Shape{Layers: layers, Heads: heads, DKV: dkv, DModel: 4}, Batch: B, MaxLen: 12,
			Names: f.names, Slots: f.slots, Place: place}, make([]float32, B*enc*4), make([]int64, B*enc), f.cross)
		if err != nil {
			t.Fatal(err)
		}
		if f.crossRuns != 1 {
			t.Fatalf("%v: the cross graph ran %d times making the cache, want once", place, f.crossRuns)
		}
		ins, outs := make([]ort.Value, f.slots.Inputs), make([]ort.Value, f.slots.Outputs)
		// want: per position, the call that wrote it
		var want []int
		script := []struct{ k, keep int }{{1, -1}, {4, 3}, {1, -1}, {5, 2}, {2, 0}, {3, -1}, {1, -1}}
		for i, s := range script {
			if err := c.Bind(ins, outs, s.k); err != nil {
				t.Fatal(err)
			}
			if place == Adapter && c.RunOptions() == nil {
				t.Fatal("adapter placement without run options")
			}
			f.run(ins, outs, s.k)
			c.Advance(s.k)
			for j := 0; j < s.k; j++ {
				want = append(want, f.calls)
			}
			if s.keep >= 0 {
				c.Truncate(s.keep)
				want = want[:s.keep]
			}
			if c.Len() != len(want) {
				t.Fatalf("%v call %d: length %d, want %d", place, i, c.Len(), len(want))
			}
			// the cached positions, read through the next call's past view
			past, err := c.self.view(c.self.cur, int64(c.Len()))
			if err != nil {
				t.Fatal(err)
			}
			buf := past[0].Value.(*ort.Tensor[float32]).GetData()
			n := c.Len()
			for row := 0; row < B*heads; row++ {
				for pos, call := range want {
					if got := buf[(row*n+pos)*dkv]; got != marker(call, pos)+float32(row)/100 {
						t.Fatalf("%v call %d: row %d position %d holds %v, want call %d's", place, i, row, pos, got, call)
					}
				}
			}
		}
		// a call that does not fit is refused
		if err := c.Bind(ins, outs, 12); err == nil {
			t.Error("a call past the cache's capacity was bound")
		}
		if f.crossRuns != 1 {
			t.Fatalf("%v: the cross graph ran %d times, want once", place, f.crossRuns)
		}
		c.Close()
		c.Close() // twice is safe
	}
	// a failing cross graph fails New, and nothing leaks
	f.adapter = false
	if _, err := New(Config{Shape: Shape{Layers: layers, Heads: heads, DKV: dkv, DModel: 4}, Batch: B, MaxLen: 12,
		Names: f.names, Slots: f.slots, Place: Host}, make([]float32, B*enc*4), make([]int64, B*enc),
		func(ins, outs []ort.Value) error { return errors.New("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing cross graph: %v", err)
	}
}

// One-position calls at a constant length make no new views.
func TestSelfViewsReused(t *testing.T) {
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

func TestFindSlotsErrors(t *testing.T) {
	names := DecoderNames(1)
	crossIn, crossOut := []string{names.CrossStates}, names.CrossKV[0][:]
	if _, err := FindSlots(names, []string{"input_ids"}, []string{"logits"}, crossIn, crossOut); err == nil {
		t.Error("missing inputs accepted")
	}
	ins := append([]string{names.IDs, names.EncoderMask}, names.Past[0][:]...)
	outs := append([]string{names.Logits}, names.Present[0][:]...)
	if _, err := FindSlots(names, ins, outs, crossIn, crossOut); err != nil {
		t.Fatalf("a whole decoder refused: %v", err)
	}
	for what, c := range map[string][4][]string{
		"an input without a role":   {append(ins, "extra"), outs, crossIn, crossOut},
		"a merged decoder's inputs": {append(ins, "encoder_hidden_states", "use_cache_branch"), outs, crossIn, crossOut},
		"a cross graph without K/V": {ins, outs, crossIn, nil},
	} {
		if _, err := FindSlots(names, c[0], c[1], c[2], c[3]); err == nil {
			t.Errorf("%s accepted", what)
		}
	}
}

func TestAdapterLayout(t *testing.T) {
	params := []adapterParam{
		{name: "a", dtype: onnxFloat, elem: 4, dims: []int64{1, 3}},
		{name: "empty_one", dtype: onnxFloat, elem: 4, dims: []int64{1, 4, 0, 2}},
		{name: "mask", dtype: onnxInt64, elem: 8, dims: []int64{2}},
	}
	buf, err := layoutAdapter(params)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf.float32s(0), []float32{1.5, -2, 3})
	copy(buf.int64s(2), []int64{-1, 1 << 40})
	if uintptr(unsafe.Pointer(&buf.bytes[0]))%8 != 0 {
		t.Error("buffer not 8-aligned in Go memory")
	}
	if string(buf.bytes[4:8]) != "TORT" {
		t.Fatalf("identifier %q", buf.bytes[4:8])
	}
	for i, r := range buf.raw {
		if len(r) == 0 {
			continue
		}
		off := uintptr(unsafe.Pointer(&r[0])) - uintptr(unsafe.Pointer(&buf.bytes[0]))
		if off%16 != 0 {
			t.Errorf("param %d data at %d, not 16-aligned", i, off)
		}
	}
	if got := binary.LittleEndian.Uint64(buf.raw[2][8:]); got != 1<<40 {
		t.Errorf("int64 view wrote %d", got)
	}
	a, err := ort.NewLoraAdapterWithData(buf.bytes)
	if err != nil {
		t.Fatalf("ORT rejects the adapter: %v", err)
	}
	a.Destroy()
	bad := append([]byte(nil), buf.bytes...)
	copy(bad[4:8], "XXXX")
	if a, err := ort.NewLoraAdapterWithData(bad); err == nil {
		a.Destroy()
		t.Error("ORT accepted an adapter without its identifier: the check above proves nothing")
	}
	if _, err := layoutAdapter([]adapterParam{{name: "x", dtype: onnxFloat, elem: 4, dims: []int64{-1}}}); err == nil {
		t.Error("negative dimension accepted")
	}
}
