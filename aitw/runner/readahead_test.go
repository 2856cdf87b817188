package runner

import (
	"context"
	"errors"
	"image"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/aitw"
)

func queued(id string, bytes int64) readEpisode {
	return readEpisode{Episode: aitw.Episode{ID: id}, bytes: bytes}
}

// putSoon runs put in a goroutine and reports whether it returned within
// a short wait (and what it returned).
func putSoon(q *episodeQueue, e readEpisode) (returned chan bool) {
	returned = make(chan bool, 1)
	go func() { returned <- q.put(e) }()
	return returned
}

func waitFor(t *testing.T, c chan bool, want bool) {
	t.Helper()
	select {
	case got := <-c:
		if got != want {
			t.Fatalf("put returned %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("put still blocked")
	}
}

func blocked(t *testing.T, c chan bool) {
	t.Helper()
	select {
	case got := <-c:
		t.Fatalf("put returned %v while the queue was over its budget", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// The queue holds at most its budget of screen bytes, but always one
// episode however large, and hands them over in order.
func TestEpisodeQueueBudget(t *testing.T) {
	q := newEpisodeQueue(100)
	waitFor(t, putSoon(q, queued("a", 500)), true) // alone over the budget: taken
	second := putSoon(q, queued("b", 60))
	blocked(t, second)
	if e, ok := q.take(); !ok || e.ID != "a" {
		t.Fatalf("take = %v %v, want a", e.ID, ok)
	}
	waitFor(t, second, true)
	third := putSoon(q, queued("c", 60)) // 120 > 100 with b queued
	blocked(t, third)
	if e, ok := q.take(); !ok || e.ID != "b" {
		t.Fatalf("take = %v %v, want b", e.ID, ok)
	}
	waitFor(t, third, true)
	waitFor(t, putSoon(q, queued("d", 40)), true) // 60 + 40 fits
	q.close()
	var got []string
	for {
		e, ok := q.take()
		if !ok {
			break
		}
		got = append(got, e.ID)
	}
	if !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("after close: %v, want [c d]", got)
	}
}

// Stopping the queue fails a put waiting for room and every later one.
func TestEpisodeQueueStop(t *testing.T) {
	q := newEpisodeQueue(10)
	waitFor(t, putSoon(q, queued("a", 10)), true)
	waiting := putSoon(q, queued("b", 10))
	blocked(t, waiting)
	q.stop()
	q.stop() // twice is fine
	waitFor(t, waiting, false)
	waitFor(t, putSoon(q, queued("c", 0)), false)
}

func testRun(t *testing.T, ctx context.Context) (*run, []string) {
	t.Helper()
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	return &run{ctx: ctx, done: &aitw.PredictionSet{ByStep: map[aitw.StepKey]aitw.Prediction{}}, written: map[aitw.StepKey]aitw.Prediction{}}, files
}

// Read ahead, the episodes arrive in reading order with their screens
// whatever the budget; an error from the taker stops the reading and is
// returned, with the reading goroutine gone.
func TestReadAheadOrderAndStop(t *testing.T) {
	r, files := testRun(t, context.Background())
	for _, interleave := range []int{0, 3} {
		var want []string
		if _, err := aitw.StreamEpisodes(files, aitw.ReadOptions{Interleave: interleave}, func(ep aitw.Episode) error {
			want = append(want, ep.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ro := aitw.ReadOptions{KeepPixels: true, Interleave: interleave}
		for _, budget := range []int64{1, readAheadBytes(64)} {
			var got []string
			st, err := r.readAhead(files, ro, budget, func(ep readEpisode) error {
				for _, s := range ep.Steps {
					if len(s.Pixels) == 0 {
						t.Fatalf("episode %s step %d: no screen", ep.ID, s.StepID)
					}
				}
				got = append(got, ep.ID)
				return nil
			})
			if err != nil || !slices.Equal(got, want) || st.Files != len(files) {
				t.Fatalf("interleave %d, budget %d: %v %v (%d files), want %v", interleave, budget, got, err, st.Files, want)
			}
			broke := errors.New("broke")
			n := 0
			_, err = r.readAhead(files, ro, budget, func(ep readEpisode) error {
				if n++; n == 2 {
					return broke
				}
				return nil
			})
			if !errors.Is(err, broke) || n != 2 {
				t.Fatalf("interleave %d, budget %d: stopped with %v after %d episodes, want broke after 2", interleave, budget, err, n)
			}
		}
	}
}

// Whether the read-ahead ends by itself or stops, nothing is left
// preparing when it returns: no Shrink runs then or later.
func TestReadAheadLeavesNothingRunning(t *testing.T) {
	r, files := testRun(t, context.Background())
	var inside, after atomic.Int32
	var returned atomic.Bool
	r.opts.Shrink = func(img image.Image) image.Image {
		if returned.Load() {
			after.Add(1)
		}
		inside.Add(1)
		defer inside.Add(-1)
		time.Sleep(time.Millisecond)
		return image.NewNRGBA(image.Rect(0, 0, 2, 2))
	}
	broke := errors.New("broke")
	for _, stopAt := range []int{0, 1, 3} {
		for _, interleave := range []int{0, 3} {
			returned.Store(false)
			n := 0
			_, err := r.readAhead(files, aitw.ReadOptions{KeepPixels: true, Interleave: interleave}, readAheadBytes(64), func(readEpisode) error {
				if n++; n == stopAt {
					return broke
				}
				return nil
			})
			returned.Store(true)
			if (stopAt > 0) != errors.Is(err, broke) {
				t.Fatalf("stop at %d, interleave %d: %v", stopAt, interleave, err)
			}
			if k := inside.Load(); k != 0 {
				t.Fatalf("stop at %d, interleave %d: %d screens still shrinking when the read-ahead returned", stopAt, interleave, k)
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	if k := after.Load(); k != 0 {
		t.Fatalf("%d screens shrunk after the read-ahead returned", k)
	}
}

// Screens that will not be used are dropped before they are queued: those
// of steps already predicted and those whose features are in the cache.
func TestReadAheadDropsUnusedScreens(t *testing.T) {
	r, files := testRun(t, context.Background())
	r.cache = &featureCache{dir: t.TempDir(), key: "k", sum: &Summary{}, warn: func(string) {}}
	var first aitw.Episode
	if _, err := aitw.StreamEpisodes(files, aitw.ReadOptions{KeepPixels: true}, func(ep aitw.Episode) error {
		if first.ID == "" {
			first = ep
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// step 0 done, step 1 cached, the rest neither
	r.done.ByStep[aitw.StepKey{EpisodeID: first.ID, StepID: first.Steps[0].StepID}] = aitw.Prediction{}
	if err := writeFeatures(cachePath(r.cache.dir, "k", first.Steps[1]), []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	e := r.prepare(first)
	var rest int64
	for i, s := range e.Steps {
		switch {
		case i < 2 && s.Pixels != nil:
			t.Errorf("step %d kept its screen", i)
		case i >= 2 && s.Pixels == nil:
			t.Errorf("step %d lost its screen", i)
		}
		rest += int64(len(s.Pixels))
	}
	if e.bytes != rest || rest == 0 {
		t.Errorf("%d bytes counted, %d held", e.bytes, rest)
	}
	if f := e.lookup(1).features; !slices.Equal(f, []float32{1, 2}) {
		t.Errorf("step 1 cached features %v", f)
	}
	if l := e.lookup(2); l.features != nil || l.path == "" {
		t.Errorf("step 2 lookup %+v, want a path to store at", l)
	}
}

// Ctrl-C seen by the reading ends the run as interrupted, predicting
// nothing more.
func TestReadAheadInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fp := &fakePredictor{}
	sum, err := Run(ctx, fp, testOptions(t, t.TempDir()))
	if err != nil || !sum.Interrupted || sum.Predicted != 0 || fp.predicts != 0 {
		t.Fatalf("%+v %v, %d predicted", sum, err, fp.predicts)
	}
}

// A source that holds an episode twice (the same pickle under two paths:
// pickles are not checked for repeats) has each step predicted once; the
// repeat counts as already done.
func TestRepeatedEpisodesPredictedOnce(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../testdata/autoui/general_blip_test.obj")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, name := range []string{"a_general_blip_test.obj", "b_general_blip_test.obj"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, src, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		opts := Options{Files: files, OutDir: t.TempDir(), History: mode, Batch: 4}
		fp := &fakePredictor{}
		sum, err := Run(context.Background(), fp, opts)
		if err != nil || sum.Predicted == 0 || sum.AlreadyDone != sum.Predicted || fp.predicts != sum.Predicted {
			t.Fatalf("%s: %+v %v, %d sent to the engine", mode, sum, err, fp.predicts)
		}
		checkLines(t, sum.Path, sum.Predicted)
	}
}

// A run stopped before it starts reads no record: the reader asks before
// each one, not only when it hands over an episode its split keeps.
func TestReadAheadStopsBetweenRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts := testOptions(t, t.TempDir())
	opts.Split = map[string]bool{"no such episode": true} // every record is read and dropped
	sum, err := Run(ctx, &fakePredictor{}, opts)
	if err != nil || !sum.Interrupted || sum.Read.Records != 0 {
		t.Fatalf("%+v %v: want interrupted with no record read", sum, err)
	}
}
