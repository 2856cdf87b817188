package aitw

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/autoui/autoui/action"
)

func writerStep(ep string, id, n int) Step {
	return Step{
		EpisodeID: ep, StepID: id, EpisodeLength: n, Goal: "Open the Clock app",
		Height: 2, Width: 3, Channels: 3, Pixels: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18},
		Boxes:  []action.Box{{Y: 0.1, X: 0.2, H: 0.3, W: 0.4}, {Y: 0.5, X: 0, H: 0.05, W: 1}},
		UIText: []string{"Clock", ""}, UITypes: []string{"ICON_TIME", "TEXT"},
		Action:     action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.25, X: 0.5}, Lift: action.Point{Y: 0.25, X: 0.5}},
		DeviceType: "sim", AndroidAPILevel: 34, CurrentActivity: "sim/launcher.home",
	}
}

func TestStepExampleRoundTrip(t *testing.T) {
	want := writerStep("ep1", 0, 2)
	got, err := StepFromExample(mustDecode(t, EncodeExample(StepExample(want))))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// Steps without annotations or metadata (AITW has such screens).
	bare := want
	bare.Boxes, bare.UIText, bare.UITypes = nil, nil, nil
	bare.DeviceType, bare.AndroidAPILevel, bare.CurrentActivity = "", 0, ""
	bare.Action = action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: `say "hi"`}
	got, err = StepFromExample(mustDecode(t, EncodeExample(StepExample(bare))))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Boxes)+len(got.UIText)+len(got.UITypes) != 0 {
		t.Fatalf("annotations appeared: %+v", got)
	}
	got.Boxes, got.UIText, got.UITypes = nil, nil, nil // empty and nil lists read the same
	if !reflect.DeepEqual(got, bare) {
		t.Fatalf("bare round trip:\n got %+v\nwant %+v", got, bare)
	}
}

func mustDecode(t *testing.T, b []byte) Example {
	t.Helper()
	ex, err := DecodeExample(b)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestEncodeExampleKinds(t *testing.T) {
	ex := Example{
		"b": BytesFeature([]byte("x"), nil), "f": FloatFeature(1.5, -2), "i": Int64Feature(-1, 0, 1<<40),
		"empty_f": FloatFeature(), "none": {},
	}
	got := mustDecode(t, EncodeExample(ex))
	if !reflect.DeepEqual(got["f"].Floats, []float32{1.5, -2}) || !reflect.DeepEqual(got["i"].Ints, []int64{-1, 0, 1 << 40}) {
		t.Fatalf("scalars: %+v", got)
	}
	if b := got["b"].Bytes; len(b) != 2 || string(b[0]) != "x" || len(b[1]) != 0 {
		t.Fatalf("bytes: %q", b)
	}
	if got["empty_f"].Kind != KindFloat || len(got["empty_f"].Floats) != 0 || got["none"].Kind != KindNone {
		t.Fatalf("empty features: %+v %+v", got["empty_f"], got["none"])
	}
}

func writeEpisodes(t testing.TB, path string, steps []Step) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewRecordWriter(&buf, path)
	for _, s := range steps {
		if err := w.WriteExample(StepExample(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Records() != len(steps) {
		t.Fatalf("Records() = %d, want %d", w.Records(), len(steps))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRecordWriterReadBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "general", "sim.tfrecord.gz")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	steps := []Step{writerStep("a", 0, 2), writerStep("a", 1, 2), writerStep("b", 0, 1)}
	steps[1].Action = action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	for i := range steps { // screens that differ, so a record read over another's shows
		steps[i].Pixels = bytes.Repeat([]byte{byte(10 * (i + 1))}, len(steps[i].Pixels))
	}
	b := writeEpisodes(t, path, steps)
	if b[0] != 0x1f || b[1] != 0x8b {
		t.Fatal("not gzip")
	}
	eps, st, err := LoadEpisodes([]string{path}, ReadOptions{KeepPixels: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 3 || len(eps) != 2 || len(eps[0].Steps) != 2 || eps[0].Subset != "general" {
		t.Fatalf("read back %d records, %d episodes: %+v", st.Records, len(eps), eps)
	}
	for i, got := range append(eps[0].Steps, eps[1].Steps...) {
		got.Subset, got.Source = "", ""
		if !reflect.DeepEqual(got, steps[i]) {
			t.Fatalf("step %d:\n got %+v\nwant %+v", i, got, steps[i])
		}
	}
	// The record framing is plain TFRecord inside the gzip stream.
	f, _ := os.Open(path)
	defer f.Close()
	rr, err := NewRecordReader(f, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	n := 0
	for {
		_, _, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d records", n)
	}
}

func TestRecordWriterDeterministic(t *testing.T) {
	dir := t.TempDir()
	steps := []Step{writerStep("a", 0, 1)}
	a := writeEpisodes(t, filepath.Join(dir, "a.gz"), steps)
	b := writeEpisodes(t, filepath.Join(dir, "b.gz"), steps)
	if !bytes.Equal(a, b) {
		t.Fatal("equal records gave different files")
	}
}
