package aitw

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stepsOf returns n steps of episode id.
func stepsOf(id string, n int) []Step {
	var out []Step
	for i := range n {
		out = append(out, writerStep(id, i, n))
	}
	return out
}

// streamIDs reads files with opts and returns the episodes' ids in the
// order they were handed over, each with its step count.
func streamIDs(t *testing.T, files []string, opts ReadOptions) ([]string, ReadStats, error) {
	t.Helper()
	var ids []string
	st, err := StreamEpisodes(files, opts, func(ep Episode) error {
		ids = append(ids, fmt.Sprintf("%s:%d", ep.ID, len(ep.Steps)))
		return nil
	})
	return ids, st, err
}

// Files take turns an episode at a time, a file that ends giving its place
// to the next; the order is the same however the goroutines run.
func TestInterleaveOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, steps ...[]Step) string {
		path := filepath.Join(dir, name)
		writeEpisodes(t, path, slices.Concat(steps...))
		return path
	}
	files := []string{
		write("a.tfrecord.gz", stepsOf("a1", 2), stepsOf("a2", 1), stepsOf("a3", 1)),
		write("b.tfrecord.gz", stepsOf("b1", 3)),
		write("c.tfrecord.gz", stepsOf("c1", 1), stepsOf("c2", 2)),
	}
	serial, _, err := streamIDs(t, files, ReadOptions{})
	if want := []string{"a1:2", "a2:1", "a3:1", "b1:3", "c1:1", "c2:2"}; err != nil || !slices.Equal(serial, want) {
		t.Fatalf("one file after another: %v %v, want %v", serial, err, want)
	}
	for _, tc := range []struct {
		interleave int
		want       []string
	}{
		// turns: a[a1] b[b1, ends: c takes its place] a[a2] c[c1] a[a3, ends] c[c2, ends]
		{2, []string{"a1:2", "b1:3", "a2:1", "c1:1", "a3:1", "c2:2"}},
		{3, []string{"a1:2", "b1:3", "c1:1", "a2:1", "c2:2", "a3:1"}},
		{8, []string{"a1:2", "b1:3", "c1:1", "a2:1", "c2:2", "a3:1"}},
	} {
		for round := range 20 {
			// the readers' timing scrambled: Keep runs on them, before each record is handed over
			keep := func(string) bool { time.Sleep(rand.N(300 * time.Microsecond)); return true }
			got, st, err := streamIDs(t, files, ReadOptions{Interleave: tc.interleave, KeepPixels: true, Keep: keep})
			if err != nil || !slices.Equal(got, tc.want) || st.Files != 3 || st.Records != 10 {
				t.Fatalf("interleave %d, round %d: %v %v, stats %+v; want %v", tc.interleave, round, got, err, st, tc.want)
			}
		}
	}
}

// recordsWithBadCRC is steps as plain (uncompressed) records, the payload
// of step bad with its last byte changed: a payload CRC mismatch.
func recordsWithBadCRC(steps []Step, bad int) []byte {
	var plain []byte
	for i, s := range steps {
		rec := AppendRecord(nil, EncodeExample(StepExample(s)))
		if i == bad {
			rec[len(rec)-5] ^= 1 // the payload's last byte, before its CRC
		}
		plain = append(plain, rec...)
	}
	return plain
}

// badFiles writes record files of episodes of their own, each with a fault:
// a bad payload CRC in a plain file (the step is skipped, its episode left
// incomplete), a gzip stream lacking its trailer (a warning) and an empty
// file.
func badFiles(t *testing.T) []string {
	t.Helper()
	plain := recordsWithBadCRC(slices.Concat(stepsOf("q", 3), stepsOf("r", 1)), 1)
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.tfrecord.gz")
	gz := writeEpisodes(t, cut, slices.Concat(stepsOf("s", 2), stepsOf("u", 1)))
	return []string{
		writeFixture(t, "bad.tfrecord", plain),
		writeFixture(t, "cut.tfrecord.gz", gz[:len(gz)-4]),
		writeFixture(t, "empty.tfrecord.gz", nil),
	}
}

// Interleaved or not, the same episodes with the same steps are read, and
// the same records counted, skipped and warned about.
func TestInterleaveSameEpisodes(t *testing.T) {
	good, err := ExpandPaths([]string{"testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	bad := badFiles(t)
	// episode v's three steps in three files, with whole episodes around them
	v := stepsOf("v", 3)
	split := []string{filepath.Join(t.TempDir(), "v0.tfrecord.gz"), filepath.Join(t.TempDir(), "v1.tfrecord.gz"), filepath.Join(t.TempDir(), "v2.tfrecord.gz")}
	writeEpisodes(t, split[0], slices.Concat(stepsOf("w", 2), v[:1]))
	writeEpisodes(t, split[1], v[1:2])
	writeEpisodes(t, split[2], slices.Concat(v[2:], stepsOf("y", 1)))
	files := []string{good[0], split[0], bad[0], split[1], good[1], bad[1], good[2], split[2], bad[2], good[3], good[4]}
	keep := func(id string) bool { return !strings.HasSuffix(id, "5") && id != "u" }
	all := 0
	for _, opts := range []ReadOptions{
		{SkipCorrupt: true, KeepPixels: true, Subset: "general"},
		{SkipCorrupt: true, Subset: "general", Keep: keep},
	} {
		load := func(interleave int) ([]Episode, ReadStats) {
			o := opts
			o.Interleave = interleave
			eps, st, err := LoadEpisodes(files, o)
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(st.Problems)
			return eps, st
		}
		want, wantSt := load(0)
		if all == 0 {
			all = len(want)
		} else if len(want) >= all {
			t.Fatalf("Keep should leave episodes out: %d of %d read", len(want), all)
		}
		if !slices.ContainsFunc(want, func(ep Episode) bool { return ep.ID == "v" && len(ep.Steps) == 3 && !ep.Incomplete }) {
			t.Fatal("episode v, split across three files, was not read whole")
		}
		if wantSt.Skipped != 2 || wantSt.Warnings != 1 || wantSt.Incomplete != 1 || len(want) < 8 {
			t.Fatalf("the files should hold good episodes, a bad record, an incomplete episode, an empty file and a warning: %d episodes, %+v", len(want), wantSt)
		}
		for _, n := range []int{2, 3, 16} {
			got, st := load(n)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(st, wantSt) {
				t.Fatalf("interleave %d: %d episodes, stats %+v; want %d, %+v", n, len(got), st, len(want), wantSt)
			}
		}
	}
}

// A turn holds at most interleaveTurnBytes of pixels: a long episode comes
// in several turns, but the file keeps its turn until the episode ends, so
// no other file's records come between its steps and a duplicate after it
// is judged as one file after another judges it.
func TestInterleaveLongEpisode(t *testing.T) {
	defer func(n int) { interleaveTurnBytes = n }(interleaveTurnBytes)
	interleaveTurnBytes = 40 // a turn closes after 3 steps of 18 bytes
	dir := t.TempDir()
	x, yz := filepath.Join(dir, "x.tfrecord.gz"), filepath.Join(dir, "yz.tfrecord.gz")
	writeEpisodes(t, x, stepsOf("x", 5))
	writeEpisodes(t, yz, slices.Concat(stepsOf("y", 1), stepsOf("z", 1)))
	// turns: x[x0-x2, cut] x[x3, x4, ends] yz[y] yz[z, ends]
	got, _, err := streamIDs(t, []string{x, yz}, ReadOptions{Interleave: 2, KeepPixels: true})
	if want := []string{"x:5", "y:1", "z:1"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("%v %v, want %v", got, err, want)
	}
	// x complete, then its step 0 again: x is dropped either way
	writeEpisodes(t, x, append(stepsOf("x", 3), writerStep("x", 0, 3)))
	for _, n := range []int{1, 2} {
		got, st, err := streamIDs(t, []string{x, yz}, ReadOptions{Interleave: n, KeepPixels: true, SkipCorrupt: true})
		if want := []string{"y:1", "z:1"}; err != nil || !slices.Equal(got, want) || st.DroppedEpisodes != 1 {
			t.Fatalf("interleave %d: %v %v, %+v; want %v and x dropped", n, got, err, st, want)
		}
	}
}

// A bad record ends an interleaved read with the error one file after
// another gives, once the files before it are read to their end; an error
// from fn or Stop ends it at once. No reader is left running.
func TestInterleaveErrors(t *testing.T) {
	good, err := ExpandPaths([]string{"testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	files := []string{good[0], good[1], badFiles(t)[0], good[2], good[3], good[4]}
	var inside, after atomic.Int32 // readers in Keep; Keep calls after the read returned
	var returned atomic.Bool
	keep := func(string) bool {
		if returned.Load() {
			after.Add(1)
		}
		inside.Add(1)
		defer inside.Add(-1)
		time.Sleep(rand.N(200 * time.Microsecond))
		return true
	}
	read := func(opts ReadOptions, fn func(Episode) error) ([]string, error) {
		t.Helper()
		var ids []string
		returned.Store(false)
		opts.Keep = keep
		_, err := StreamEpisodes(files, opts, func(ep Episode) error {
			ids = append(ids, ep.ID)
			return fn(ep)
		})
		returned.Store(true)
		if n := inside.Load(); n != 0 {
			t.Fatalf("%d readers still running when the read returned", n)
		}
		sort.Strings(ids)
		return ids, err
	}
	handOver := func(Episode) error { return nil }
	// one file after another: the episodes of the two files before the bad one
	wantIDs, want := read(ReadOptions{}, handOver)
	var se *SkippableError
	if !errors.As(want, &se) || len(wantIDs) == 0 {
		t.Fatalf("one file after another: %v after %v", want, wantIDs)
	}
	for _, n := range []int{2, 3, 6} {
		ids, err := read(ReadOptions{Interleave: n}, handOver)
		if err == nil || err.Error() != want.Error() {
			t.Fatalf("interleave %d: %v, want %v", n, err, want)
		}
		for _, id := range wantIDs {
			if _, found := slices.BinarySearch(ids, id); !found {
				t.Fatalf("interleave %d: episode %s of a file before the bad one was not handed over (got %v)", n, id, ids)
			}
		}
	}
	// The failed file's complete episode is not handed over: it may be the
	// one its error names (x, then its step 0 again), or one its next,
	// bad, record would have let go (b1).
	dir := t.TempDir()
	dup, a, b, c := filepath.Join(dir, "dup.tfrecord.gz"), filepath.Join(dir, "a.tfrecord.gz"), filepath.Join(dir, "b.tfrecord"), filepath.Join(dir, "c.tfrecord.gz")
	writeEpisodes(t, dup, append(stepsOf("x", 3), writerStep("x", 0, 3)))
	writeEpisodes(t, a, slices.Concat(stepsOf("a1", 1), stepsOf("a2", 1)))
	if err := os.WriteFile(b, recordsWithBadCRC(slices.Concat(stepsOf("b1", 1), stepsOf("b2", 1)), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	writeEpisodes(t, c, stepsOf("c1", 1))
	for _, tc := range []struct {
		files []string
		not   string
	}{{[]string{dup, good[0]}, "x"}, {[]string{a, b, c}, "b1"}} {
		want, _, wantErr := streamIDs(t, tc.files, ReadOptions{})
		for _, n := range []int{2, 3} {
			got, _, err := streamIDs(t, tc.files, ReadOptions{Interleave: n})
			if err == nil || wantErr == nil || err.Error() != wantErr.Error() ||
				slices.ContainsFunc(got, func(id string) bool { return strings.HasPrefix(id, tc.not+":") }) {
				t.Fatalf("interleave %d: %v %v; one file after another %v %v", n, got, err, want, wantErr)
			}
			for _, id := range want {
				if !slices.Contains(got, id) {
					t.Fatalf("interleave %d: %v lacks %s (one file after another: %v)", n, got, id, want)
				}
			}
		}
	}
	stop := errors.New("stop")
	handed := 0
	_, err = read(ReadOptions{Interleave: 3, KeepPixels: true}, func(Episode) error {
		if handed++; handed == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || handed != 2 {
		t.Fatalf("fn's error: %v after %d episodes", err, handed)
	}
	_, err = read(ReadOptions{Interleave: 3, Stop: func() error { return stop }}, func(Episode) error {
		t.Fatal("an episode was handed over")
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Stop: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := after.Load(); n != 0 {
		t.Fatalf("Keep was called %d times after a read returned", n)
	}
}

func TestFilesAtOnce(t *testing.T) {
	recs := []string{"a.tfrecord.gz", "b.tfrecord.gz", "c.tfrecord"}
	for _, tc := range []struct {
		files []string
		n     int
		want  int
	}{
		{recs, 0, 1}, {recs, 1, 1}, {recs, 2, 2}, {recs, 8, 3}, {recs[:1], 4, 1},
		{append(recs, "general_blip_test.obj"), 4, 1}, // pickles: one file after another
	} {
		if got := FilesAtOnce(tc.files, tc.n); got != tc.want {
			t.Errorf("FilesAtOnce(%v, %d) = %d, want %d", tc.files, tc.n, got, tc.want)
		}
	}
}
