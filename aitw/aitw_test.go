package aitw

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/autoui/autoui/action"
)

// Fixtures come from `python -m scripts.aitw_fixtures` (Python protobuf and a
// Python CRC32C), so these tests check the Go reader against independently
// written records.

type corruptExpect struct {
	Records    int     `json:"records"`
	Offsets    []int64 `json:"offsets"`
	PayloadCRC struct {
		BadRecord int   `json:"bad_record"`
		Offset    int64 `json:"offset"`
	} `json:"payload_crc"`
	HeaderCRC struct {
		BadRecord int   `json:"bad_record"`
		Offset    int64 `json:"offset"`
	} `json:"header_crc"`
	Truncated struct {
		BadRecord int   `json:"bad_record"`
		Offset    int64 `json:"offset"`
	} `json:"truncated"`
}

func readExpect(t *testing.T) corruptExpect {
	t.Helper()
	b, err := os.ReadFile("testdata/corrupt/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e corruptExpect
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func openRecords(t *testing.T, path string) *RecordReader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	rr, err := NewRecordReader(f, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func TestRecordReaderGood(t *testing.T) {
	rr := openRecords(t, "testdata/records/general/general-00000-of-00001.tfrecord.gz")
	n := 0
	for {
		p, _, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ex, err := DecodeExample(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := StepFromExample(ex)
		if err != nil {
			t.Fatal(err)
		}
		if s.Height != 128 || s.Width != 64 || s.Channels != 3 || len(s.Pixels) != 128*64*3 {
			t.Fatalf("image %dx%dx%d, %d bytes", s.Height, s.Width, s.Channels, len(s.Pixels))
		}
		if s.DeviceType != "pixel_6" || s.AndroidAPILevel != 33 {
			t.Errorf("device metadata %q %d", s.DeviceType, s.AndroidAPILevel)
		}
		n++
	}
	if n != 13 {
		t.Errorf("read %d records, want 13", n)
	}
}

func TestRecordReaderPayloadCRC(t *testing.T) {
	e := readExpect(t)
	rr := openRecords(t, "testdata/corrupt/payload_crc.tfrecord.gz")
	var good []int64
	var bad []*RecordError
	for {
		_, off, err := rr.Next()
		if err == io.EOF {
			break
		}
		var re *RecordError
		if errors.As(err, &re) {
			bad = append(bad, re)
			if !re.Resumable {
				t.Fatalf("payload CRC error not resumable: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, off)
	}
	if len(bad) != 1 || bad[0].Offset != e.PayloadCRC.Offset || !errors.Is(bad[0], ErrCorrupt) {
		t.Fatalf("bad records %v, want one at %d", bad, e.PayloadCRC.Offset)
	}
	msg := bad[0].Error()
	if !strings.Contains(msg, "payload_crc.tfrecord.gz") || !strings.Contains(msg, "at byte 25294") {
		t.Errorf("error %q lacks file and offset", msg)
	}
	if len(good) != e.Records-1 {
		t.Errorf("%d good records, want %d", len(good), e.Records-1)
	}
}

func TestRecordReaderHeaderCRC(t *testing.T) {
	e := readExpect(t)
	rr := openRecords(t, "testdata/corrupt/header_crc.tfrecord.gz")
	if _, _, err := rr.Next(); err != nil {
		t.Fatal(err)
	}
	_, _, err := rr.Next()
	var re *RecordError
	if !errors.As(err, &re) || re.Offset != e.HeaderCRC.Offset || re.Resumable || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want a non-resumable corrupt error at %d", err, e.HeaderCRC.Offset)
	}
	// Sticky.
	if _, _, err2 := rr.Next(); err2 != err {
		t.Errorf("second Next = %v", err2)
	}
}

func TestRecordReaderTruncated(t *testing.T) {
	e := readExpect(t)
	rr := openRecords(t, "testdata/corrupt/truncated.tfrecord.gz")
	var last error
	n := 0
	for {
		_, _, err := rr.Next()
		if err != nil {
			last = err
			break
		}
		n++
	}
	var re *RecordError
	if n != e.Truncated.BadRecord || !errors.As(last, &re) || !errors.Is(last, ErrTruncated) || re.Offset != e.Truncated.Offset {
		t.Fatalf("%d good then %v; want %d good then truncated at %d", n, last, e.Truncated.BadRecord, e.Truncated.Offset)
	}
}

func TestTruncatedGzipStream(t *testing.T) {
	b, err := os.ReadFile("testdata/records/single/single-00000-of-00001.tfrecord.gz")
	if err != nil {
		t.Fatal(err)
	}
	rr, err := NewRecordReader(bytes.NewReader(b[:len(b)/2]), "half.gz", 0)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := rr.Next()
		if err == io.EOF {
			t.Fatal("a cut gzip stream read as complete")
		}
		if err != nil {
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("got %v, want truncated", err)
			}
			return
		}
	}
}

func TestPlainAndGzipSame(t *testing.T) {
	var raw []byte
	raw = AppendRecord(raw, []byte("hello"))
	raw = AppendRecord(raw, nil)
	raw = AppendRecord(raw, bytes.Repeat([]byte{7}, 70000))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for name, in := range map[string][]byte{"plain": raw, "gzip": gz.Bytes()} {
		rr, err := NewRecordReader(bytes.NewReader(in), name, 0)
		if err != nil {
			t.Fatal(err)
		}
		var lens []int
		var offs []int64
		for {
			p, off, err := rr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(name, err)
			}
			lens = append(lens, len(p))
			offs = append(offs, off)
		}
		if len(lens) != 3 || lens[0] != 5 || lens[1] != 0 || lens[2] != 70000 || offs[1] != 21 || offs[2] != 37 {
			t.Errorf("%s: lens %v offsets %v", name, lens, offs)
		}
	}
}

func TestSkipCorrupt(t *testing.T) {
	files := []string{"testdata/corrupt/payload_crc.tfrecord.gz"}
	if _, _, err := LoadEpisodes(files, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "at byte 25294") {
		t.Fatalf("strict read: %v", err)
	}
	eps, st, err := LoadEpisodes(files, ReadOptions{SkipCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 1 || st.Incomplete != 1 || len(eps) != 1 || len(eps[0].Steps) != 3 || !eps[0].Incomplete {
		t.Fatalf("stats %+v, episodes %d", st, len(eps))
	}
	for _, f := range []string{"testdata/corrupt/header_crc.tfrecord.gz", "testdata/corrupt/truncated.tfrecord.gz"} {
		_, st, err := LoadEpisodes([]string{f}, ReadOptions{SkipCorrupt: true})
		if err != nil || st.Skipped != 1 || st.Incomplete != 1 {
			t.Errorf("%s: %v %+v", f, err, st)
		}
	}
}

func TestLoadEpisodesAllSubsets(t *testing.T) {
	files, err := ExpandPaths([]string{"testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("files %v", files)
	}
	eps, st, err := LoadEpisodes(files, ReadOptions{KeepPixels: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 4*13+3 || st.Skipped != 0 {
		t.Errorf("stats %+v", st)
	}
	count := map[string]int{}
	for i, ep := range eps {
		count[ep.Subset]++
		if len(ep.Steps) != ep.Steps[0].EpisodeLength {
			t.Errorf("episode %s has %d steps", ep.ID, len(ep.Steps))
		}
		for j, s := range ep.Steps {
			if s.StepID != j || s.EpisodeID != ep.ID || s.Goal != ep.Goal || len(s.Pixels) != 128*64*3 {
				t.Errorf("episode %s step %d: id %d", ep.ID, j, s.StepID)
			}
		}
		if i > 0 && eps[i-1].Subset == ep.Subset && eps[i-1].ID >= ep.ID {
			t.Errorf("episodes not sorted")
		}
	}
	for _, s := range Subsets {
		want := 3
		if count[s] != want {
			t.Errorf("subset %s: %d episodes", s, count[s])
		}
	}
	// Glob form gives the same files.
	g, err := ExpandPaths([]string{"testdata/records/*/*.tfrecord.gz"})
	if err != nil || strings.Join(g, ",") != strings.Join(files, ",") {
		t.Errorf("glob %v %v", g, err)
	}
}

func TestEpisodeLengthChecked(t *testing.T) {
	// Only some steps of an episode: an error naming the episode.
	dir := t.TempDir()
	rr := openRecords(t, "testdata/records/install/install-00000-of-00001.tfrecord.gz")
	p, _, err := rr.Next()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "install", "one.tfrecord")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, AppendRecord(nil, p), 0o644)
	_, _, err = LoadEpisodes([]string{path}, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "episode_length") {
		t.Fatalf("got %v", err)
	}
	// The same record twice: a duplicate step.
	os.WriteFile(path, AppendRecord(AppendRecord(nil, p), p), 0o644)
	_, _, err = LoadEpisodes([]string{path}, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("got %v", err)
	}
}

func TestSubsetFromPath(t *testing.T) {
	for in, want := range map[string]string{
		"/data/android-in-the-wild/general/general-0001.tfrecord.gz": "general",
		"dataset/blip/google_apps_blip_test.obj":                     "google_apps",
		"x/web_shopping/part-1":                                      "web_shopping",
		"x/y.tfrecord":                                               "",
		"single_blip_val.obj":                                        "single",
	} {
		if got := SubsetFromPath(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

func TestDecodeExampleUnpackedAndUnknown(t *testing.T) {
	// Hand-encoded: an unpacked float list, an unpacked int64 list, an
	// unknown field in Example and a map key repeated (last wins).
	var fl []byte
	fl = protowire.AppendTag(fl, 1, protowire.Fixed32Type)
	fl = protowire.AppendFixed32(fl, math.Float32bits(0.25))
	fl = protowire.AppendTag(fl, 1, protowire.Fixed32Type)
	fl = protowire.AppendFixed32(fl, math.Float32bits(0.5))
	var il []byte
	il = protowire.AppendTag(il, 1, protowire.VarintType)
	il = protowire.AppendVarint(il, uint64(1<<40))
	il = protowire.AppendTag(il, 1, protowire.VarintType)
	il = protowire.AppendVarint(il, uint64(math.MaxUint64)) // -1
	feat := func(kind protowire.Number, list []byte) []byte {
		var f []byte
		f = protowire.AppendTag(f, kind, protowire.BytesType)
		return protowire.AppendBytes(f, list)
	}
	entry := func(key string, f []byte) []byte {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, key)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		return protowire.AppendBytes(e, f)
	}
	var feats []byte
	for _, e := range [][]byte{entry("f", feat(2, fl)), entry("i", feat(1, nil)), entry("i", feat(3, il))} {
		feats = protowire.AppendTag(feats, 1, protowire.BytesType)
		feats = protowire.AppendBytes(feats, e)
	}
	var ex []byte
	ex = protowire.AppendTag(ex, 9, protowire.VarintType)
	ex = protowire.AppendVarint(ex, 5)
	ex = protowire.AppendTag(ex, 1, protowire.BytesType)
	ex = protowire.AppendBytes(ex, feats)
	got, err := DecodeExample(ex)
	if err != nil {
		t.Fatal(err)
	}
	if f := got["f"]; f.Kind != KindFloat || len(f.Floats) != 2 || f.Floats[1] != 0.5 {
		t.Errorf("f = %+v", f)
	}
	if i := got["i"]; i.Kind != KindInt64 || len(i.Ints) != 2 || i.Ints[0] != 1<<40 || i.Ints[1] != -1 {
		t.Errorf("i = %+v", i)
	}
	if _, err := DecodeExample(ex[:len(ex)-3]); err == nil {
		t.Error("truncated message decoded")
	}
}

func TestSplits(t *testing.T) {
	std, err := ReadSplits("testdata/splits/standard.json")
	if err != nil {
		t.Fatal(err)
	}
	au, err := ReadSplits("testdata/splits/general_texts_splits.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train", "test", "val", "validation"} {
		a, err1 := std.IDs(name)
		b, err2 := au.IDs(name)
		if err1 != nil || err2 != nil || len(a) != 5 || len(b) != 5 {
			t.Fatalf("%s: %v %v %d %d", name, err1, err2, len(a), len(b))
		}
		for id := range a {
			if !b[id] {
				t.Errorf("%s: %s in the AITW split but not Auto-UI's", name, id)
			}
		}
	}
	if _, err := std.IDs("nope"); err == nil {
		t.Error("unknown split accepted")
	}
	// A split selects episodes while reading.
	test, _ := std.IDs("test")
	files, _ := ExpandPaths([]string{"testdata/records"})
	eps, _, err := LoadEpisodes(files, ReadOptions{Keep: func(id string) bool { return test[id] }})
	if err != nil || len(eps) != 5 {
		t.Fatalf("%d test episodes, %v", len(eps), err)
	}
}

func TestShardPartition(t *testing.T) {
	files, _ := ExpandPaths([]string{"testdata/records"})
	eps, _, err := LoadEpisodes(files, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 7} {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			sh, err := ParseShard(strconv.Itoa(i) + "/" + strconv.Itoa(n))
			if err != nil {
				t.Fatal(err)
			}
			for _, ep := range eps {
				if sh.Has(ep.ID) {
					seen[ep.ID]++
				}
			}
		}
		for _, ep := range eps {
			if seen[ep.ID] != 1 {
				t.Errorf("n=%d: episode %s in %d shards", n, ep.ID, seen[ep.ID])
			}
		}
	}
	for _, bad := range []string{"2/2", "-1/3", "1", "a/b", "0/0", "+1/2", "1/+2", " 1/2"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
}

func TestAutoUIPickles(t *testing.T) {
	var feats map[string][][]float64
	b, _ := os.ReadFile("testdata/autoui/general_features.json")
	if err := json.Unmarshal(b, &feats); err != nil {
		t.Fatal(err)
	}
	gold, _, err := LoadEpisodes([]string{"testdata/records/general/general-00000-of-00001.tfrecord.gz"}, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Episode{}
	for _, ep := range gold {
		byID[ep.ID] = ep
	}
	for _, f := range []string{"testdata/autoui/general_blip_test.obj", "testdata/autoui/general_blip_torch_test.obj"} {
		isTorch := strings.Contains(f, "torch")
		eps, err := ReadAutoUIPickle(f, SubsetFromPath(f))
		if err != nil {
			t.Fatal(err)
		}
		if len(eps) != 3 {
			t.Fatalf("%s: %d episodes", f, len(eps))
		}
		for _, ep := range eps {
			g, ok := byID[ep.ID]
			if !ok || ep.Subset != "general" || len(ep.Steps) != len(g.Steps) {
				t.Fatalf("%s: episode %s does not match the records", f, ep.ID)
			}
			for i, s := range ep.Steps {
				gs := g.Steps[i]
				if s.Action != gs.Action || s.Goal != gs.Goal || len(s.Boxes) != len(gs.Boxes) {
					t.Errorf("%s %s/%d: %+v vs %+v", f, ep.ID, i, s.Action, gs.Action)
				}
				for k := range s.Boxes {
					if s.Boxes[k] != gs.Boxes[k] {
						t.Errorf("box %d: %v vs %v", k, s.Boxes[k], gs.Boxes[k])
					}
				}
				want := feats[ep.ID][i]
				if len(s.Features) != len(want) {
					t.Fatalf("features: %d, want %d", len(s.Features), len(want))
				}
				for k, v := range want {
					tol := 0.0
					if isTorch {
						tol = 1e-3 // stored as float16
					}
					if math.Abs(float64(s.Features[k])-v) > tol {
						t.Fatalf("%s feature %d: %v want %v", f, k, s.Features[k], v)
					}
				}
			}
		}
	}
}

func TestPickleUnsupportedClass(t *testing.T) {
	_, err := findPickleClass("torch._utils", "_rebuild_parameter")
	if err == nil || !strings.Contains(err.Error(), "numpy") {
		t.Errorf("got %v", err)
	}
}

func TestStepFromExampleErrors(t *testing.T) {
	rr := openRecords(t, "testdata/records/single/single-00000-of-00001.tfrecord.gz")
	p, _, _ := rr.Next()
	ex, err := DecodeExample(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(Example){
		"missing goal":  func(e Example) { delete(e, "goal_info") },
		"pixel size":    func(e Example) { f := e["image/encoded"]; f.Bytes = [][]byte{{1, 2, 3}}; e["image/encoded"] = f },
		"touch kind":    func(e Example) { e["results/yx_touch"] = Feature{Kind: KindInt64, Ints: []int64{1, 2}} },
		"bad type":      func(e Example) { e["results/action_type"] = Feature{Kind: KindInt64, Ints: []int64{9}} },
		"boxes not 4xN": func(e Example) { e["image/ui_annotations_positions"] = Feature{Kind: KindFloat, Floats: []float32{1}} },
		"size overflows": func(e Example) {
			for _, k := range []string{"image/height", "image/width"} {
				e[k] = Feature{Kind: KindInt64, Ints: []int64{1 << 32}}
			}
			e["image/encoded"] = Feature{Kind: KindBytes, Bytes: [][]byte{{}}}
		},
		"episode id not UTF-8": func(e Example) { e["episode_id"] = Feature{Kind: KindBytes, Bytes: [][]byte{{'e', 0xff}}} },
		"goal not UTF-8":       func(e Example) { e["goal_info"] = Feature{Kind: KindBytes, Bytes: [][]byte{{0xc3}}} },
		"text not UTF-8":       func(e Example) { e["results/type_action"] = Feature{Kind: KindBytes, Bytes: [][]byte{{0xfe}}} },
		"touch NaN": func(e Example) {
			e["results/yx_touch"] = Feature{Kind: KindFloat, Floats: []float32{float32(math.NaN()), 0}}
		},
		"lift off the screen": func(e Example) { e["results/yx_lift"] = Feature{Kind: KindFloat, Floats: []float32{0.5, 1.5}} },
	} {
		c := Example{}
		for k, v := range ex {
			c[k] = v
		}
		mutate(c)
		if _, err := StepFromExample(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := StepFromExample(ex)
	if err != nil || !s.Action.Type.Valid() || s.Action.Type == action.Type(0) {
		t.Fatal(err)
	}
}

// SubsetOf: the path first, else the nearest dataset.json above the file
// (`autoui dataset` output), whose subset must be a real one.
func TestSubsetOf(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "test", "open_app.tfrecord.gz")
	if got := SubsetOf(deep); got != "" {
		t.Errorf("no marker: %q", got)
	}
	os.WriteFile(filepath.Join(root, DatasetFile), []byte(`{"subset": "install", "episodes": {}}`), 0o644)
	if got := SubsetOf(deep); got != "install" {
		t.Errorf("marker two levels up: %q", got)
	}
	if got := SubsetOf(filepath.Join(root, "general", "x.tfrecord.gz")); got != "general" {
		t.Errorf("the path wins: %q", got)
	}
	os.WriteFile(filepath.Join(root, DatasetFile), []byte(`{"subset": "mine"}`), 0o644)
	if got := SubsetOf(deep); got != "" {
		t.Errorf("unknown subset in the marker: %q", got)
	}
}

// An eval run's --out kept inside the data's directory is not data: its
// predictions, run.json and feature cache were read back as records.
func TestExpandPathsSkipsRunOutputs(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/records/general/general-00000-of-00001.tfrecord.gz")
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		"general/general.tfrecord.gz":  src,
		"run/run.json":                 []byte("{}"),
		"run/predictions.jsonl":        nil,
		"run/feature_cache/00/ab.feat": []byte("features"),
		"elsewhere_cache/00/cd.feat":   []byte("features"),
		"run/nested/other.tfrecord.gz": src, // under a run: left out too
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := ExpandPaths([]string{dir})
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "general.tfrecord.gz" {
		t.Errorf("files %v, %v", files, err)
	}
}
