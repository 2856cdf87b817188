package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/progress"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/sim/tasks"
)

// Small screens keep the tests fast; the layout is resolution independent.
const testW, testH = 180, 400

func TestRecordEpisode(t *testing.T) {
	for _, fam := range tasks.Families {
		task := tasks.Generate(fam, 3)
		steps, err := Record(task, testW, testH)
		if err != nil {
			t.Fatal(err)
		}
		last := steps[len(steps)-1]
		if last.Action.Type != action.StatusTaskComplete {
			t.Errorf("%s: last action %v, want STATUS_TASK_COMPLETE", fam, last.Action)
		}
		for i, s := range steps {
			if s.StepID != i || s.EpisodeLength != len(steps) || s.EpisodeID != EpisodeID(fam, 3) || s.Goal != task.Goal {
				t.Fatalf("%s step %d: ids %+v", fam, i, s)
			}
			if s.Width != testW || s.Height != testH || s.Channels != 3 || len(s.Pixels) != testW*testH*3 {
				t.Fatalf("%s step %d: image %dx%dx%d with %d bytes", fam, i, s.Width, s.Height, s.Channels, len(s.Pixels))
			}
			if len(s.Boxes) == 0 || len(s.Boxes) != len(s.UIText) || len(s.Boxes) != len(s.UITypes) {
				t.Fatalf("%s step %d: %d boxes, %d texts, %d types", fam, i, len(s.Boxes), len(s.UIText), len(s.UITypes))
			}
			if s.Action.Type == action.DualPoint && action.IsTap(s.Action) && !inSomeBox(s.Action.Touch, s.Boxes) {
				t.Errorf("%s step %d: tap %v outside every annotation box", fam, i, s.Action.Touch)
			}
		}
	}
}

func inSomeBox(p action.Point, boxes []action.Box) bool {
	for _, b := range boxes {
		y, x := float32(p.Y), float32(p.X)
		if y >= b.Y && y <= b.Y+b.H && x >= b.X && x <= b.X+b.W {
			return true
		}
	}
	return false
}

// The first pixels are the status bar: the screen really is the phone's.
func TestRecordPixelsAreTheScreen(t *testing.T) {
	task := tasks.Generate(tasks.Navigate, 1)
	steps, err := Record(task, testW, testH)
	if err != nil {
		t.Fatal(err)
	}
	p, err := task.NewPhone(tasks.Options{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	img := p.Image()
	for i, px := 0, steps[0].Pixels; i < testW*testH; i++ {
		if px[3*i] != img.Pix[4*i] || px[3*i+1] != img.Pix[4*i+1] || px[3*i+2] != img.Pix[4*i+2] {
			t.Fatalf("pixel %d differs from the phone's screen", i)
		}
	}
}

func writeSmall(t *testing.T, dir string) *Stats {
	t.Helper()
	// Tiny screens: compressing raw pixels dominates, and is slow under -race.
	st, err := Write(context.Background(), Options{Dir: dir, Episodes: 12, Seed: 6, Width: 90, Height: 200})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestWriteReadsBackThroughAITW(t *testing.T) {
	dir := t.TempDir()
	st := writeSmall(t, dir)
	total := 0
	for split, r := range readSplits(t, dir) {
		ids, eps, rs := r.ids, r.eps, r.stats
		if len(eps) != len(ids) || len(eps) != st.Episodes[split] || rs.Records != st.Steps[split] {
			t.Fatalf("%s: read %d episodes / %d records; splits.json has %d, stats %d / %d",
				split, len(eps), rs.Records, len(ids), st.Episodes[split], st.Steps[split])
		}
		for _, ep := range eps {
			if ep.Subset != Subset {
				t.Errorf("%s: subset %q", ep.ID, ep.Subset)
			}
			if !ids[ep.ID] {
				t.Errorf("%s: episode %s not in splits.json", split, ep.ID)
			}
			seed, ok := seedOf(ep.ID)
			if !ok || SplitName(tasks.SplitOf(seed)) != split {
				t.Errorf("episode %s in split %s", ep.ID, split)
			}
			if s := ep.Steps[0]; s.DeviceType != DeviceType || s.AndroidAPILevel != AndroidAPILevel || s.CurrentActivity == "" {
				t.Errorf("%s: metadata %q %d %q", ep.ID, s.DeviceType, s.AndroidAPILevel, s.CurrentActivity)
			}
		}
		if len(eps) == 0 {
			t.Errorf("split %s is empty: pick seeds that cover every split", split)
		}
		total += len(eps)
	}
	if total != 12 {
		t.Fatalf("%d episodes in all, want 12", total)
	}
}

// splitRead is one split as read back: its ids in splits.json and the
// episodes in its files.
type splitRead struct {
	ids   map[string]bool
	eps   []aitw.Episode
	stats aitw.ReadStats
}

// readSplits reads every split of a written dataset through package aitw
// (the subset from dataset.json, as eval reads it).
func readSplits(t *testing.T, dir string) map[string]splitRead {
	t.Helper()
	sp, err := aitw.ReadSplits(filepath.Join(dir, "splits.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]splitRead{}
	for _, split := range Splits {
		var r splitRead
		if r.ids, err = sp.IDs(split); err != nil {
			t.Fatal(err)
		}
		files, err := aitw.ExpandPaths([]string{filepath.Join(dir, split)})
		if err != nil {
			t.Fatal(err)
		}
		if r.eps, r.stats, err = aitw.LoadEpisodes(files, aitw.ReadOptions{KeepPixels: true}); err != nil {
			t.Fatalf("%s: %v", split, err)
		}
		out[split] = r
	}
	return out
}

// seedOf reads the seed back from an episode id of any family.
func seedOf(id string) (int64, bool) {
	for _, f := range tasks.Families {
		if rest, ok := strings.CutPrefix(id, "sim_"+f+"_"); ok {
			n, err := strconv.ParseInt(rest, 10, 64)
			return n, err == nil && EpisodeID(f, n) == id
		}
	}
	return 0, false
}

func TestWriteIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa, sb := writeSmall(t, a), writeSmall(t, b)
	ja, _ := json.Marshal(sa)
	jb, _ := json.Marshal(sb)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("stats differ:\n%s\n%s", ja, jb)
	}
	for _, f := range append(sa.Files, "splits.json", "dataset.json") {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs", f)
		}
	}
}

func TestOptionsChecked(t *testing.T) {
	for _, o := range []Options{
		{Dir: t.TempDir(), Episodes: 0},
		{Dir: t.TempDir(), Episodes: 3, Families: []string{"fly"}},
		{Dir: t.TempDir(), Episodes: 3, Width: -1, Height: 5},
		{Episodes: 3},
	} {
		if _, err := Write(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// A used --out is refused; --overwrite replaces the earlier dataset whole
// (no stale family file survives), but never clears a directory holding
// other files; no temporary file is left behind.
func TestWriteIntoUsedDirectory(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := Write(ctx, Options{Dir: dir, Episodes: 6, Seed: 6, Width: 90, Height: 200, Families: []string{"open_app", "navigate"}}); err != nil {
		t.Fatal(err)
	}
	small := Options{Dir: dir, Episodes: 3, Seed: 6, Width: 90, Height: 200, Families: []string{"open_app"}}
	if _, err := Write(ctx, small); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("non-empty --out: %v", err)
	}
	small.Overwrite = true
	st, err := Write(ctx, small)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel)
		}
		return nil
	})
	want := append(append([]string{}, st.Files...), "dataset.json", "splits.json", outlock.File)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after --overwrite the directory holds %v, want %v", got, want)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Write(ctx, small); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("clearing a directory with foreign files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Error("a foreign file was removed")
	}
}

// While another process holds --out, Write refuses at once, naming it,
// and touches nothing there, --overwrite or not; the lock file is not
// content: a directory holding only it is empty, and --overwrite keeps it.
func TestWriteRefusedWhileLocked(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	o := Options{Dir: dir, Episodes: 2, Seed: 6, Width: 90, Height: 200, Families: []string{"open_app"}}
	lock, err := outlock.Acquire(dir, "autoui dataset")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, ow := range []bool{false, true} {
		o.Overwrite = ow
		_, err := Write(ctx, o)
		if !errors.Is(err, outlock.ErrLocked) || !strings.Contains(err.Error(), "in use by pid "+strconv.Itoa(os.Getpid())+" on "+host+" (another autoui dataset)") {
			t.Fatalf("Write (overwrite %v) on a held --out: %v", ow, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused Write left %d entries", len(ents))
	}
	lock.Release()
	o.Overwrite = false
	if _, err := Write(ctx, o); err != nil { // only the lock file: empty
		t.Fatalf("a directory holding only the lock file: %v", err)
	}
	lock, err = outlock.Acquire(dir, "autoui dataset")
	if err != nil {
		t.Fatal(err)
	}
	o.Overwrite = true
	if _, err := Write(ctx, o); !errors.Is(err, outlock.ErrLocked) {
		t.Fatalf("--overwrite of a held dataset: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, aitw.DatasetFile)); err != nil {
		t.Fatal("a refused --overwrite removed the dataset")
	}
	lock.Release()
	if _, err := Write(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, outlock.File)); err != nil {
		t.Errorf("--overwrite removed the lock file: %v", err)
	}
	// The lock is released when Write returns.
	l, err := outlock.Acquire(dir, "test")
	if err != nil {
		t.Fatalf("after Write: %v", err)
	}
	l.Release()
}

// A run killed (SIGKILL) before its dataset.json leaves temporary files
// only: the next run says so and that --overwrite starts over.
func TestWriteAfterKilledRun(t *testing.T) {
	dir := t.TempDir()
	for _, sp := range Splits {
		os.MkdirAll(filepath.Join(dir, sp), 0o755)
		os.WriteFile(filepath.Join(dir, sp, ".open_app.tfrecord.gz.tmp-123"), []byte("torn"), 0o644)
	}
	o := Options{Dir: dir, Episodes: 2, Seed: 6, Width: 90, Height: 200, Families: []string{"open_app"}}
	_, err := Write(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "looks like an interrupted dataset") || !strings.Contains(err.Error(), "train/.open_app.tfrecord.gz.tmp-123") || !strings.Contains(err.Error(), "--overwrite to start over") {
		t.Fatalf("rerun after a killed run: %v", err)
	}
	o.Overwrite = true
	if _, err := Write(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, sp := range Splits {
		if m, _ := filepath.Glob(filepath.Join(dir, sp, ".*.tmp-*")); len(m) > 0 {
			t.Errorf("--overwrite kept %v", m)
		}
	}
}

// cancelAfter cancels its context once n progress lines were written: an
// interrupt after some episodes.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
	log    bytes.Buffer
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return c.log.Write(p)
}

// An interrupted write keeps every episode written: each file whole,
// splits.json listing exactly the episodes in the files, dataset.json
// marked interrupted. The same options finish it into the dataset an
// uninterrupted run writes, byte for byte; other options are told what to
// do.
func TestWriteInterruptedKeepsEpisodesAndResumes(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Episodes: 12, Seed: 6, Width: 90, Height: 200}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &cancelAfter{n: 4, cancel: cancel}
	o.Progress = progress.Options{W: c, Every: time.Nanosecond}
	st, err := Write(ctx, o)
	if !errors.Is(err, context.Canceled) || st == nil || !st.Interrupted {
		t.Fatalf("interrupted write: %v, %+v", err, st)
	}
	written := 0
	for split, r := range readSplits(t, dir) {
		if len(r.eps) != len(r.ids) {
			t.Errorf("%s: %d episodes in the files, %d in splits.json", split, len(r.eps), len(r.ids))
		}
		written += len(r.eps)
	}
	if written == 0 || written == 12 {
		t.Fatalf("%d episodes written before the interrupt: want some, not all", written)
	}
	other := o
	other.Seed = 7
	if _, err := Write(context.Background(), other); err == nil || !strings.Contains(err.Error(), "interrupted dataset") || !strings.Contains(err.Error(), "--seed 6") {
		t.Errorf("other options on an interrupted dataset: %v", err)
	}
	o.Progress = progress.Options{}
	st, err = Write(context.Background(), o)
	if err != nil || st.Interrupted || st.Done != nil {
		t.Fatalf("resume: %v %+v", err, st)
	}
	want := t.TempDir()
	writeSmall(t, want)
	for _, f := range append(st.Files, "splits.json", "dataset.json") {
		x, _ := os.ReadFile(filepath.Join(dir, f))
		y, _ := os.ReadFile(filepath.Join(want, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs from an uninterrupted run's", f)
		}
	}
	if !strings.Contains(c.log.String(), "episodes") {
		t.Errorf("no progress lines: %q", c.log.String())
	}
}

// Progress: a line per finished family and the episodes written.
func TestWriteProgress(t *testing.T) {
	var log bytes.Buffer
	o := Options{Dir: t.TempDir(), Episodes: 4, Seed: 6, Width: 90, Height: 200, Families: []string{"open_app", "navigate"},
		Progress: progress.Options{W: &log}}
	if _, err := Write(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"open_app: 2 episodes", "navigate: 2 episodes", "4/4 episodes"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, log.String())
		}
	}
}

// eval reads the dataset as AITW's general subset without --subset: the
// subset is in dataset.json.
func TestSubsetRecorded(t *testing.T) {
	dir := t.TempDir()
	writeSmall(t, dir)
	if got := aitw.SubsetOf(filepath.Join(dir, FileName("test", "open_app"))); got != Subset {
		t.Errorf("subset %q, want %q", got, Subset)
	}
}
