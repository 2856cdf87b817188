package aitw

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Readers facing broken downloads and inconsistent episodes. The broken
// files are built here from a committed fixture or with the record writer.

const generalRecords = "testdata/records/general/general-00000-of-00001.tfrecord.gz"

// writeFixture writes b to DIR/general/name (the subset comes from the path)
// and returns the path.
func writeFixture(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "general", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordEnds lists where each record of a plain TFRecord stream ends.
func recordEnds(t *testing.T, raw []byte) []int {
	t.Helper()
	rr, err := NewRecordReader(bytes.NewReader(raw), "raw", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	for {
		p, off, err := rr.Next()
		if err == io.EOF {
			return ends
		}
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, int(off)+12+len(p)+4)
	}
}

// gunzipPrefix is what gzip.Reader inflates from a cut gzip file.
func gunzipPrefix(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil && err != io.ErrUnexpectedEOF {
		t.Fatal(err)
	}
	return data
}

func TestGzipMissingTrailer(t *testing.T) {
	gz := readFile(t, generalRecords)
	for _, cut := range []int{8, 5, 1} { // the whole trailer, or part of it
		path := writeFixture(t, "cut.tfrecord.gz", gz[:len(gz)-cut])
		for _, skip := range []bool{false, true} {
			eps, st, err := LoadEpisodes([]string{path}, ReadOptions{SkipCorrupt: skip})
			if err != nil {
				t.Fatalf("cut %d, skip %v: %v", cut, skip, err)
			}
			if len(eps) != 3 || st.Records != 13 || st.Skipped != 0 || st.Incomplete != 0 || st.Warnings != 1 {
				t.Fatalf("cut %d: %d episodes, stats %+v", cut, len(eps), st)
			}
			want := path + ": gzip stream truncated (no trailer); 13 intact records read"
			if len(st.Problems) != 1 || st.Problems[0] != want {
				t.Fatalf("problems %q, want %q", st.Problems, want)
			}
		}
	}
	// The intact file reads without a warning.
	_, st, err := LoadEpisodes([]string{generalRecords}, ReadOptions{})
	if err != nil || st.Warnings != 0 || len(st.Problems) != 0 || st.Summary() != "" {
		t.Fatalf("intact file: %v %+v", err, st)
	}
}

func TestGzipBadTrailerStillAnError(t *testing.T) {
	gz := readFile(t, generalRecords)
	bad := append([]byte(nil), gz...)
	bad[len(bad)-6] ^= 0xff // the stored CRC32
	path := writeFixture(t, "badcrc.tfrecord.gz", bad)
	_, _, err := LoadEpisodes([]string{path}, ReadOptions{})
	if !errors.Is(err, gzip.ErrChecksum) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want a checksum error naming the file", err)
	}
}

func TestGzipCutInsideData(t *testing.T) {
	gz := readFile(t, generalRecords)
	ends := recordEnds(t, gunzipPrefix(t, gz))
	cuts := []int{len(gz) - 9, len(gz) - 12} // the last deflate bytes gone too
	for cut := 40; cut < len(gz)-9; cut += 211 {
		cuts = append(cuts, cut)
	}
	for _, cut := range cuts {
		path := writeFixture(t, "cut.tfrecord.gz", gz[:cut])
		inflated := len(gunzipPrefix(t, gz[:cut]))
		intact := 0 // records wholly inside what the cut file still inflates to
		for _, end := range ends {
			if end <= inflated {
				intact++
			}
		}
		_, _, err := LoadEpisodes([]string{path}, ReadOptions{})
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), "gzip stream cut short") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("cut at %d: got %v, want a one-line truncation error naming the file", cut, err)
		}
		eps, st, err := LoadEpisodes([]string{path}, ReadOptions{SkipCorrupt: true})
		if err != nil || st.Records != intact || st.Skipped != 1 || st.Warnings != 0 {
			t.Fatalf("cut at %d: %v, stats %+v, want %d intact records", cut, err, st, intact)
		}
		steps := 0
		for _, ep := range eps {
			steps += len(ep.Steps)
		}
		if steps != intact {
			t.Fatalf("cut at %d: %d steps in episodes, want %d", cut, steps, intact)
		}
	}
}

// gzipWith compresses raw as one member written by w's settings.
func gzipWith(t *testing.T, raw []byte, level int, hdr gzip.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	zw.Header = hdr
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func countRecords(t *testing.T, b []byte) (int, *RecordReader, error) {
	t.Helper()
	rr, err := NewRecordReader(bytes.NewReader(b), "mem", 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, _, err := rr.Next()
		if err == io.EOF {
			return n, rr, nil
		}
		if err != nil {
			return n, rr, err
		}
		n++
	}
}

// Other gzip writers: header fields, stored (uncompressed) blocks and
// concatenated members all read as gzip.Reader reads them.
func TestGzipHeadersBlocksMembers(t *testing.T) {
	var raw []byte
	for i := 0; i < 5; i++ {
		raw = AppendRecord(raw, bytes.Repeat([]byte{byte(i)}, 3000+i))
	}
	named := gzip.Header{Name: "x.tfrecord", Comment: "c", Extra: []byte("ex")}
	stored := gzipWith(t, raw, gzip.NoCompression, named)
	two := append(gzipWith(t, raw[:3015], gzip.BestSpeed, gzip.Header{}), gzipWith(t, raw[3015:], gzip.BestCompression, named)...)
	for name, gz := range map[string][]byte{"stored": stored, "two members": two} {
		n, rr, err := countRecords(t, gz)
		if err != nil || n != 5 || rr.TrailerMissing() {
			t.Fatalf("%s: %d records, %v, trailer missing %v", name, n, err, rr.TrailerMissing())
		}
		n, rr, err = countRecords(t, gz[:len(gz)-8])
		if err != nil || n != 5 || !rr.TrailerMissing() {
			t.Fatalf("%s without trailer: %d records, %v, trailer missing %v", name, n, err, rr.TrailerMissing())
		}
	}
	// Stored blocks cut inside a record.
	n, _, err := countRecords(t, stored[:len(stored)/2])
	if n == 0 || n == 5 || !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut stored stream: %d records, %v", n, err)
	}
	// Trailing bytes that are not a gzip member stay an error.
	if _, _, err := countRecords(t, append(append([]byte(nil), stored...), 0, 0, 0)); err == nil {
		t.Fatal("trailing garbage accepted")
	}
}

func TestEmptyFile(t *testing.T) {
	for _, name := range []string{"empty.tfrecord.gz", "general_blip_test.obj"} {
		path := writeFixture(t, name, nil)
		_, _, err := LoadEpisodes([]string{path}, ReadOptions{})
		if !errors.Is(err, ErrEmptyFile) || err.Error() != path+": empty file (0 bytes)" {
			t.Fatalf("%s: got %v", name, err)
		}
		good := generalRecords
		if IsPickle(name) {
			good = "testdata/autoui/general_blip_test.obj"
		}
		eps, st, err := LoadEpisodes([]string{path, good}, ReadOptions{SkipCorrupt: true})
		if err != nil || len(eps) != 3 || st.Skipped != 1 || len(st.Problems) != 1 ||
			st.Problems[0] != path+": empty file (0 bytes); skipped" {
			t.Fatalf("%s with --skip-corrupt: %v, %d episodes, stats %+v", name, err, len(eps), st)
		}
	}
	if _, err := ReadAutoUIPickle(writeFixture(t, "x.pkl", nil), "general"); !errors.Is(err, ErrEmptyFile) {
		t.Fatalf("pickle: %v", err)
	}
	if _, err := NewRecordReader(bytes.NewReader(nil), "mem", 0); !errors.Is(err, ErrEmptyFile) {
		t.Fatalf("record reader: %v", err)
	}
}

// episodeFile writes steps with the record writer, between two good
// episodes "before" and "after", and returns the path.
func episodeFile(t *testing.T, steps ...Step) string {
	t.Helper()
	all := []Step{writerStep("before", 0, 1)}
	all = append(all, steps...)
	all = append(all, writerStep("after", 0, 2), writerStep("after", 1, 2))
	path := writeFixture(t, "eps.tfrecord.gz", nil)
	writeEpisodes(t, path, all)
	return path
}

func withLength(s Step, n int) Step {
	s.EpisodeLength = n
	return s
}

func TestInconsistentEpisodes(t *testing.T) {
	for name, tc := range map[string]struct {
		steps   []Step
		problem string
	}{
		"duplicate before complete": {[]Step{writerStep("a", 0, 3), writerStep("a", 0, 3), writerStep("a", 1, 3)}, "has step 0 twice"},
		"duplicate after complete":  {[]Step{writerStep("a", 0, 2), writerStep("a", 1, 2), writerStep("a", 1, 2)}, "has step 1 twice"},
		"length disagrees":          {[]Step{writerStep("a", 0, 3), withLength(writerStep("a", 1, 3), 2)}, "step 1 says episode_length 2, step 0"},
		"more steps than length":    {[]Step{writerStep("a", 0, 2), writerStep("a", 1, 2), writerStep("a", 2, 2)}, "step_id 2 is out of range for episode_length 2"},
		"negative step_id":          {[]Step{writerStep("a", -1, 2), writerStep("a", 0, 2), writerStep("a", 1, 2)}, "step_id -1 is out of range"},
		"zero length":               {[]Step{writerStep("a", 0, 0)}, "step_id 0 is out of range for episode_length 0"},
	} {
		path := episodeFile(t, tc.steps...)
		_, _, err := LoadEpisodes([]string{path}, ReadOptions{})
		var ee *EpisodeError
		if !errors.As(err, &ee) || ee.EpisodeID != "a" || !strings.HasPrefix(err.Error(), path+"@") ||
			!strings.Contains(err.Error(), ": episode a: "+tc.problem) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: got %v, want a one-line error naming %s, episode a and %q", name, err, path, tc.problem)
		}
		eps, st, err := LoadEpisodes([]string{path}, ReadOptions{SkipCorrupt: true})
		if err != nil {
			t.Fatalf("%s with --skip-corrupt: %v", name, err)
		}
		if len(eps) != 2 || eps[0].ID != "after" || eps[1].ID != "before" || len(eps[0].Steps) != 2 {
			t.Fatalf("%s: episodes %+v, want only the good ones", name, eps)
		}
		if st.DroppedEpisodes != 1 || st.Skipped != 0 || st.Incomplete != 0 || len(st.Problems) != 1 ||
			!strings.Contains(st.Problems[0], "episode a: "+tc.problem) || !strings.HasSuffix(st.Problems[0], "; episode dropped") {
			t.Fatalf("%s: stats %+v", name, st)
		}
		if got := st.Summary(); got != "dropped episodes (inconsistent records): 1" {
			t.Fatalf("%s: summary %q", name, got)
		}
	}
}

// A duplicate far from its episode arrives after the episode was emitted:
// the record alone is skipped.
func TestRecordAfterEpisodeEmitted(t *testing.T) {
	path := episodeFile(t, writerStep("a", 0, 2), writerStep("a", 1, 2), writerStep("b", 0, 1), writerStep("a", 1, 2))
	_, _, err := LoadEpisodes([]string{path}, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "episode a: step 1 comes after the episode was read complete") {
		t.Fatalf("got %v", err)
	}
	eps, st, err := LoadEpisodes([]string{path}, ReadOptions{SkipCorrupt: true})
	if err != nil || len(eps) != 4 || st.Skipped != 1 || st.DroppedEpisodes != 0 || !strings.HasSuffix(st.Problems[0], "; record skipped") {
		t.Fatalf("%v, %d episodes, stats %+v", err, len(eps), st)
	}
	// A record dropped by Keep ends the held episode the same way.
	keep := func(id string) bool { return id != "b" }
	eps, st, err = LoadEpisodes([]string{path}, ReadOptions{SkipCorrupt: true, Keep: keep})
	if err != nil || len(eps) != 3 || st.Skipped != 1 {
		t.Fatalf("with Keep: %v, %d episodes, stats %+v", err, len(eps), st)
	}
}

// A complete episode at the end of one file is held, so a duplicate at the
// start of the next still drops it.
func TestDuplicateAcrossFiles(t *testing.T) {
	first := episodeFile(t, writerStep("a", 0, 1))
	second := writeFixture(t, "second.tfrecord.gz", nil)
	writeEpisodes(t, second, []Step{writerStep("after", 1, 2)})
	_, _, err := LoadEpisodes([]string{first, second}, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), second+"@0: episode after: has step 1 twice") {
		t.Fatalf("got %v", err)
	}
	eps, st, err := LoadEpisodes([]string{first, second}, ReadOptions{SkipCorrupt: true})
	if err != nil || len(eps) != 2 || st.DroppedEpisodes != 1 {
		t.Fatalf("%v, %d episodes, stats %+v", err, len(eps), st)
	}
}

func TestReadStatsSummary(t *testing.T) {
	st := ReadStats{Skipped: 2, DroppedEpisodes: 1, Incomplete: 3, Warnings: 1}
	want := "skipped (corrupt records or files): 2; dropped episodes (inconsistent records): 1; incomplete episodes: 3; warnings: 1"
	if got := st.Summary(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Every read error that SkipCorrupt would skip is a *SkippableError (so the
// CLI can name --skip-corrupt); a file that is not there is not one.
func TestSkippableErrors(t *testing.T) {
	for name, files := range map[string][]string{
		"payload crc":    {"testdata/corrupt/payload_crc.tfrecord.gz"},
		"header crc":     {"testdata/corrupt/header_crc.tfrecord.gz"},
		"truncated":      {"testdata/corrupt/truncated.tfrecord.gz"},
		"empty file":     {writeFixture(t, "empty.tfrecord.gz", nil)},
		"duplicate step": {episodeFile(t, writerStep("a", 0, 2), writerStep("a", 0, 2), writerStep("a", 1, 2))},
		"late record":    {episodeFile(t, writerStep("a", 0, 1), writerStep("b", 0, 1), writerStep("a", 0, 1))},
		"incomplete":     {episodeFile(t, writerStep("a", 0, 3))},
	} {
		_, _, err := LoadEpisodes(files, ReadOptions{Subset: "general"})
		var se *SkippableError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v is not a *SkippableError", name, err)
		}
	}
	_, _, err := LoadEpisodes([]string{filepath.Join(t.TempDir(), "gone.tfrecord.gz")}, ReadOptions{Subset: "general"})
	var se *SkippableError
	if err == nil || errors.As(err, &se) {
		t.Errorf("a missing file: %v", err)
	}
}

// ReadOptions.Stop is asked before every record, kept or not: its error
// ends the read there.
func TestStreamEpisodesStop(t *testing.T) {
	files, err := ExpandPaths([]string{"testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	asked := 0
	opts := ReadOptions{
		Keep: func(string) bool { return false }, // nothing handed over: only Stop can end it early
		Stop: func() error {
			if asked++; asked == 3 {
				return stop
			}
			return nil
		},
	}
	st, err := StreamEpisodes(files, opts, func(Episode) error { t.Fatal("an episode was handed over"); return nil })
	if !errors.Is(err, stop) || st.Records != 2 || asked != 3 {
		t.Fatalf("%v after %d records, Stop asked %d times: want stop after 2", err, st.Records, asked)
	}
}
