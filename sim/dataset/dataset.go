// Package dataset records expert demonstrations of the simulated task suite
// in the Android in the Wild (AITW) record format: one tf.train.Example per
// step with the raw screen pixels, the simulator's UI annotations and the
// expert's gold action, gzip TFRecord files split by episode into
// train/validation/test, and an AITW-style split JSON. Anything that reads
// AITW (package aitw, `autoui eval`, the training script) reads it.
package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/progress"
	"github.com/autoui/autoui/atomicfile"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
)

// Device metadata written with every step (AITW records the phone model,
// API level and foreground activity).
const (
	DeviceType      = "autoui_sim"
	AndroidAPILevel = 34
)

// Splits are the AITW split names, in file order. tasks.SplitOf's "val" is
// written as AITW's "validation".
var Splits = []string{"train", "validation", "test"}

// SplitName maps a task split to its AITW name.
func SplitName(taskSplit string) string {
	if taskSplit == "val" {
		return "validation"
	}
	return taskSplit
}

// EpisodeID names a task's episode: family and seed, so a step's family is
// readable from its id.
func EpisodeID(family string, seed int64) string {
	return fmt.Sprintf("sim_%s_%d", family, seed)
}

// Subset is the AITW subset the records are read as (written in
// dataset.json, where `autoui eval` finds it): the tasks are everyday phone
// use, AITW's general.
const Subset = "general"

// Options describe a dataset. Episode i (0-based) is the task of family
// Families[i % len(Families)] with seed Seed+i, so every episode has its own
// phone and the seed alone decides its split.
type Options struct {
	Dir           string   // output directory
	Episodes      int      // episodes in all splits together
	Seed          int64    // seed of the first episode
	Width, Height int      // screen size; 0 means 360x800
	Families      []string // nil means tasks.Families
	// Progress shows episodes written and a line per family (W nil: none).
	Progress progress.Options
	// Overwrite clears an existing dataset in Dir first; without it a
	// non-empty Dir is refused (but an interrupted dataset of the same
	// options is finished), so stale files of an earlier dataset can never
	// be read as part of this one.
	Overwrite bool
}

func (o *Options) defaults() error {
	if o.Width == 0 && o.Height == 0 {
		o.Width, o.Height = 360, 800
	}
	if o.Width <= 0 || o.Height <= 0 {
		return fmt.Errorf("screen size %dx%d: both must be > 0", o.Width, o.Height)
	}
	if o.Episodes <= 0 {
		return fmt.Errorf("episodes %d: must be > 0", o.Episodes)
	}
	if o.Dir == "" {
		return fmt.Errorf("no output directory")
	}
	if len(o.Families) == 0 {
		o.Families = tasks.Families
	}
	for _, f := range o.Families {
		if !tasks.KnownFamily(f) {
			return fmt.Errorf("unknown task family %q (want one of %v)", f, tasks.Families)
		}
	}
	return nil
}

// Record runs the task's expert on a fresh phone and returns one step per
// screen it acted on, the final STATUS_TASK_COMPLETE included. It fails if
// the expert does not complete the task within its step budget.
func Record(t tasks.Task, width, height int) ([]aitw.Step, error) {
	p, err := t.NewPhone(tasks.Options{Width: width, Height: height})
	if err != nil {
		return nil, err
	}
	id := EpisodeID(t.Family, t.Seed)
	var steps []aitw.Step
	for {
		if len(steps) == t.MaxSteps {
			return nil, fmt.Errorf("episode %s: the expert did not finish %q in %d steps", id, t.Goal, t.MaxSteps)
		}
		a := t.Expert(p)
		steps = append(steps, capture(p, id, t.Goal, len(steps), a))
		if a.Type == action.StatusTaskComplete {
			break
		}
		tasks.Apply(p, a)
	}
	if !t.Success(p) {
		return nil, fmt.Errorf("episode %s: the expert finished %q but the task is not solved", id, t.Goal)
	}
	for i := range steps {
		steps[i].EpisodeLength = len(steps)
	}
	return steps, nil
}

func capture(p *sim.Phone, id, goal string, stepID int, a action.Action) aitw.Step {
	img := p.Image()
	s := aitw.Step{
		EpisodeID: id, StepID: stepID, Goal: goal,
		Height: img.Rect.Dy(), Width: img.Rect.Dx(), Channels: 3, Pixels: rgbPixels(img),
		Action:     a,
		DeviceType: DeviceType, AndroidAPILevel: AndroidAPILevel, CurrentActivity: activity(p.Screen()),
	}
	for _, e := range p.Annotations() {
		s.Boxes = append(s.Boxes, e.Box)
		s.UIText = append(s.UIText, e.Text)
		s.UITypes = append(s.UITypes, e.Type)
	}
	return s
}

// activity names the foreground page like an Android activity.
func activity(s sim.Screen) string {
	app := s.App
	if app == "" {
		app = "launcher"
	}
	return "com.autoui.sim." + app + "/." + s.View
}

// rgbPixels drops the alpha channel: AITW stores H x W x 3 uint8.
func rgbPixels(img *image.RGBA) []byte {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	out := make([]byte, 0, w*h*3)
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := 0; x < 4*w; x += 4 {
			out = append(out, row[x], row[x+1], row[x+2])
		}
	}
	return out
}

// Stats describe a written dataset (dataset.json).
type Stats struct {
	Subset   string                    `json:"subset"` // see Subset
	Options  Info                      `json:"options"`
	Episodes map[string]int            `json:"episodes"` // per split
	Steps    map[string]int            `json:"steps"`    // per split
	Families map[string]map[string]int `json:"families"` // split -> family -> episodes
	Bytes    int64                     `json:"bytes"`    // record files together
	Files    []string                  `json:"files"`    // relative to the directory
	// Interrupted is set when the run stopped before every episode was
	// written: the files hold the first Done[family] episodes of each
	// family's plan, all whole, and running the same command again
	// finishes the dataset.
	Interrupted bool           `json:"interrupted,omitempty"`
	Done        map[string]int `json:"done,omitempty"`
}

// Info is the part of Options that decides the data.
type Info struct {
	Episodes int      `json:"episodes"`
	Seed     int64    `json:"seed"`
	Width    int      `json:"width"`
	Height   int      `json:"height"`
	Families []string `json:"families"`
}

// FileName is the record file of a split and family, relative to the
// dataset directory.
func FileName(split, family string) string {
	return filepath.Join(split, family+".tfrecord.gz")
}

// Write generates the dataset into o.Dir: SPLIT/FAMILY.tfrecord.gz for every
// split and family, splits.json (AITW's standard split format: train,
// validation, test -> episode ids) and dataset.json (the options and
// counts). The output is byte-identical for identical options, whether or
// not a run was interrupted on the way. Families are recorded in parallel.
//
// When ctx is cancelled the episodes written so far are kept: every file is
// closed whole, splits.json lists their episodes, dataset.json says the
// dataset is interrupted, and Write returns the stats with an error wrapping
// ctx's. Called again with the same options, Write finishes the dataset.
func Write(ctx context.Context, o Options) (*Stats, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	info := Info{Episodes: o.Episodes, Seed: o.Seed, Width: o.Width, Height: o.Height, Families: o.Families}
	// Hold the directory from before it is checked or cleared to the end,
	// so that no other process writes or clears it meanwhile.
	lock, err := outlock.Acquire(o.Dir, "autoui dataset")
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer lock.Release()
	done, err := prepareDir(o.Dir, o.Overwrite, info)
	if err != nil {
		return nil, err
	}
	// Episode plan: family -> its seeds in order.
	plan := map[string][]int64{}
	for i := 0; i < o.Episodes; i++ {
		f := o.Families[i%len(o.Families)]
		plan[f] = append(plan[f], o.Seed+int64(i))
	}
	for _, sp := range Splits {
		if err := os.MkdirAll(filepath.Join(o.Dir, sp), 0o755); err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
	}
	resumed := 0
	for _, n := range done {
		resumed += n
	}
	var mu sync.Mutex // guards steps, which the bar's detail reads
	steps, written := 0, 0
	bar := progress.New(o.Progress, o.Episodes-resumed, "episodes", func(el time.Duration) string {
		mu.Lock()
		defer mu.Unlock()
		d := fmt.Sprintf("%d steps, %.1f episodes/s", steps, progress.Rate(written, el))
		if resumed > 0 {
			d += fmt.Sprintf(" (%d episodes written before)", resumed)
		}
		return d
	})
	results := make([]famResult, len(o.Families))
	errs := make([]error, len(o.Families))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // the phone renders on one core per family
	for fi, fam := range o.Families {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := writeFamily(ctx, o, fam, plan[fam], done[fam], func(n int) {
				mu.Lock()
				steps, written = steps+n, written+1
				mu.Unlock()
				bar.Add(1)
			})
			results[fi], errs[fi] = r, err
			if err == nil && r.done == len(plan[fam]) {
				bar.Println(fmt.Sprintf("%s: %d episodes, %d steps, %.1f MB", fam, r.done, r.steps["train"]+r.steps["validation"]+r.steps["test"], float64(r.bytes)/1e6))
			}
		}()
	}
	wg.Wait()
	bar.Finish()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	st, splitIDs := collect(info, plan, results)
	if err := writeJSON(filepath.Join(o.Dir, "splits.json"), splitIDs); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(o.Dir, aitw.DatasetFile), st); err != nil {
		return nil, err
	}
	if st.Interrupted {
		n := 0
		for _, d := range st.Done {
			n += d
		}
		return st, fmt.Errorf("dataset: interrupted with %d of %d episodes written, all whole (splits.json lists them); run the same command again to finish: %w", n, o.Episodes, ctx.Err())
	}
	return st, nil
}

// famResult is what one family's files hold.
type famResult struct {
	family string
	ids    map[string][]string // split -> episode ids
	steps  map[string]int      // split -> steps
	bytes  int64
	done   int // episodes, the first of the family's plan
}

// collect sums the families' results into the dataset's stats and split
// lists.
func collect(info Info, plan map[string][]int64, results []famResult) (*Stats, map[string][]string) {
	st := &Stats{
		Subset: Subset, Options: info,
		Episodes: map[string]int{}, Steps: map[string]int{}, Families: map[string]map[string]int{},
		Done: map[string]int{},
	}
	splitIDs := map[string][]string{}
	for _, sp := range Splits {
		splitIDs[sp] = []string{}
		st.Families[sp] = map[string]int{}
	}
	for _, r := range results {
		for _, sp := range Splits {
			splitIDs[sp] = append(splitIDs[sp], r.ids[sp]...)
			st.Episodes[sp] += len(r.ids[sp])
			st.Steps[sp] += r.steps[sp]
			st.Families[sp][r.family] = len(r.ids[sp])
			st.Files = append(st.Files, FileName(sp, r.family))
		}
		st.Bytes += r.bytes
		st.Done[r.family] = r.done
		st.Interrupted = st.Interrupted || r.done < len(plan[r.family])
	}
	if !st.Interrupted {
		st.Done = nil
	}
	sort.Strings(st.Files)
	for _, sp := range Splits {
		sort.Strings(splitIDs[sp])
	}
	return st, splitIDs
}

// writeFamily records one family's episodes into its three split files,
// after the first done ones, which an interrupted run wrote and whose
// records are copied over. It stops between episodes when ctx is
// cancelled, keeping what it wrote; onEpisode is told each episode's steps.
func writeFamily(ctx context.Context, o Options, fam string, seeds []int64, done int, onEpisode func(steps int)) (famResult, error) {
	r := famResult{family: fam, ids: map[string][]string{}, steps: map[string]int{}}
	// Each file is written under a temporary name and renamed when whole,
	// so no run leaves a torn file for eval to read.
	files := map[string]*atomicfile.File{}
	writers := map[string]*aitw.RecordWriter{}
	abort := func(err error) (famResult, error) {
		for _, f := range files {
			f.Abort()
		}
		return famResult{}, err
	}
	for _, sp := range Splits {
		path := filepath.Join(o.Dir, FileName(sp, fam))
		f, err := atomicfile.Create(path)
		if err != nil {
			return abort(fmt.Errorf("dataset: %w", err))
		}
		files[sp] = f
		writers[sp] = aitw.NewRecordWriter(f, path) // gzip buffers its output
		if done > 0 {
			if r.steps[sp], err = copyRecords(path, writers[sp]); err != nil {
				return abort(err)
			}
		}
	}
	for i, seed := range seeds {
		if i < done {
			sp := SplitName(tasks.SplitOf(seed))
			r.ids[sp] = append(r.ids[sp], EpisodeID(fam, seed))
			r.done++
			continue
		}
		if ctx.Err() != nil {
			break
		}
		t := tasks.Generate(fam, seed)
		rec, err := Record(t, o.Width, o.Height)
		if err != nil {
			return abort(fmt.Errorf("dataset: %w", err))
		}
		sp := SplitName(t.Split)
		for _, s := range rec {
			if err := writers[sp].WriteExample(aitw.StepExample(s)); err != nil {
				return abort(err)
			}
		}
		r.ids[sp] = append(r.ids[sp], EpisodeID(fam, seed))
		r.steps[sp] += len(rec)
		r.done++
		onEpisode(len(rec))
	}
	for _, sp := range Splits {
		if err := writers[sp].Close(); err != nil {
			return abort(err)
		}
		if fi, err := files[sp].Stat(); err == nil {
			r.bytes += fi.Size()
		}
	}
	for _, sp := range Splits {
		if err := files[sp].Commit(); err != nil {
			return abort(fmt.Errorf("dataset: %w", err))
		}
	}
	return r, nil
}

// copyRecords copies an interrupted run's records of one file into w and
// counts them. The gzip stream is rewritten from the same records, so the
// finished file is the one an uninterrupted run writes.
func copyRecords(path string, w *aitw.RecordWriter) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("dataset: resume: %w (pass --overwrite to start again)", err)
	}
	defer f.Close()
	rr, err := aitw.NewRecordReader(f, path, 0)
	if err != nil {
		return 0, fmt.Errorf("dataset: resume: %w (pass --overwrite to start again)", err)
	}
	defer rr.Close()
	for n := 0; ; n++ {
		rec, _, err := rr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("dataset: resume: %w (pass --overwrite to start again)", err)
		}
		if err := w.Write(rec); err != nil {
			return n, err
		}
	}
}

func writeJSON(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("dataset: encode %s: %w", path, err)
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	return nil
}

// prepareDir makes dir, which exists and is locked, ready for a dataset of
// info and returns how many episodes of each family an interrupted run of
// the same options wrote there (nil for a new dataset). If dir holds
// anything but the lock, it is refused unless overwrite, which removes an
// earlier dataset's files first. A directory with other files is never
// cleared, and the lock file never counts nor is removed.
func prepareDir(dir string, overwrite bool, info Info) (map[string]int, error) {
	ents, err := outlock.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	if len(ents) == 0 {
		return nil, nil
	}
	var foreign []string
	for _, e := range ents {
		if !isDatasetEntry(e) {
			foreign = append(foreign, e.Name())
		}
	}
	if !overwrite {
		var old Stats
		b, err := os.ReadFile(filepath.Join(dir, aitw.DatasetFile))
		switch {
		case err != nil || json.Unmarshal(b, &old) != nil:
			// A run killed (not interrupted) before it wrote dataset.json
			// leaves only its temporary files: it cannot be resumed.
			if tmp := tempFiles(dir); len(foreign) == 0 && len(tmp) > 0 {
				return nil, fmt.Errorf("dataset: %s looks like an interrupted dataset: it holds temporary files (%s) but no %s, so the run was killed before it saved any progress and cannot be resumed (a dataset stopped with Ctrl-C can); pass --overwrite to start over, or use another --out", dir, strings.Join(firstN(tmp, 3), ", "), aitw.DatasetFile)
			}
		case old.Interrupted && reflect.DeepEqual(old.Options, info):
			return old.Done, nil
		case old.Interrupted:
			return nil, fmt.Errorf("dataset: %s holds an interrupted dataset of other options (%s): run its own command again to finish it, or pass --overwrite to replace it", dir, old.Options)
		}
		return nil, fmt.Errorf("dataset: %s is not empty (%d entries): pass --overwrite to replace the dataset in it, or use another --out", dir, len(ents))
	}
	if len(foreign) > 0 {
		return nil, fmt.Errorf("dataset: %s holds files that are not a dataset's (%s): refusing to clear it", dir, strings.Join(foreign, ", "))
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("dataset: clear %s: %w", dir, err)
		}
	}
	return nil, nil
}

// tempFiles lists the temporary files (atomicfile's) in dir and its split
// directories, relative to dir.
func tempFiles(dir string) []string {
	var tmp []string
	for _, sub := range append([]string{"."}, Splits...) {
		ents, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range ents {
			if !e.IsDir() && strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".tmp-") {
				tmp = append(tmp, filepath.Join(sub, e.Name()))
			}
		}
	}
	return tmp
}

func firstN(names []string, n int) []string {
	if len(names) > n {
		return append(names[:n:n], "...")
	}
	return names
}

// String is the options as `autoui dataset` flags.
func (i Info) String() string {
	return fmt.Sprintf("--episodes %d --seed %d --size %dx%d --families %s", i.Episodes, i.Seed, i.Width, i.Height, strings.Join(i.Families, ","))
}

// isDatasetEntry reports whether a directory entry is something Write
// makes and --overwrite may remove: a split directory, splits.json,
// dataset.json or a temporary file left by an interrupted run (never the
// lock file).
func isDatasetEntry(e fs.DirEntry) bool {
	name := e.Name()
	if e.IsDir() {
		return slices.Contains(Splits, name)
	}
	return name == "splits.json" || name == aitw.DatasetFile || (strings.HasPrefix(name, ".") && name != outlock.File)
}
