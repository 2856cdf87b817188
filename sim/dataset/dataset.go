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
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/atomicfile"
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

// Options describe a dataset. Episode i (0-based) is the task of family
// Families[i % len(Families)] with seed Seed+i, so every episode has its own
// phone and the seed alone decides its split.
type Options struct {
	Dir           string   // output directory
	Episodes      int      // episodes in all splits together
	Seed          int64    // seed of the first episode
	Width, Height int      // screen size; 0 means 360x800
	Families      []string // nil means tasks.Families
	// Log receives a progress line per file; nil discards them.
	Log io.Writer
	// Overwrite clears an existing dataset in Dir first; without it a
	// non-empty Dir is refused, so stale files of an earlier dataset can
	// never be read as part of this one.
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
	if o.Log == nil {
		o.Log = io.Discard
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

// Stats describe a written dataset.
type Stats struct {
	Options  Info                      `json:"options"`
	Episodes map[string]int            `json:"episodes"` // per split
	Steps    map[string]int            `json:"steps"`    // per split
	Families map[string]map[string]int `json:"families"` // split -> family -> episodes
	Bytes    int64                     `json:"bytes"`    // record files together
	Files    []string                  `json:"files"`    // relative to the directory
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
// counts). The output is byte-identical for identical options. Families are
// recorded in parallel.
func Write(ctx context.Context, o Options) (*Stats, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := prepareDir(o.Dir, o.Overwrite); err != nil {
		return nil, err
	}
	// Episode plan: family -> its seeds in order.
	plan := map[string][]int64{}
	for i := 0; i < o.Episodes; i++ {
		f := o.Families[i%len(o.Families)]
		plan[f] = append(plan[f], o.Seed+int64(i))
	}
	st := &Stats{
		Options:  Info{Episodes: o.Episodes, Seed: o.Seed, Width: o.Width, Height: o.Height, Families: o.Families},
		Episodes: map[string]int{}, Steps: map[string]int{}, Families: map[string]map[string]int{},
	}
	splitIDs := map[string][]string{}
	for _, sp := range Splits {
		splitIDs[sp] = []string{}
		st.Families[sp] = map[string]int{}
		if err := os.MkdirAll(filepath.Join(o.Dir, sp), 0o755); err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
	}
	type result struct {
		family string
		ids    map[string][]string
		steps  map[string]int
		bytes  int64
		err    error
	}
	results := make([]result, len(o.Families))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // the phone renders on one core per family
	var logMu sync.Mutex
	for fi, fam := range o.Families {
		wg.Add(1)
		go func(fi int, fam string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := result{family: fam}
			r.ids, r.steps, r.bytes, r.err = writeFamily(ctx, o, fam, plan[fam])
			results[fi] = r
			logMu.Lock()
			if r.err == nil {
				fmt.Fprintf(o.Log, "%s: %d episodes, %d steps, %.1f MB\n", fam, len(plan[fam]), r.steps["train"]+r.steps["validation"]+r.steps["test"], float64(r.bytes)/1e6)
			}
			logMu.Unlock()
		}(fi, fam)
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		for _, sp := range Splits {
			splitIDs[sp] = append(splitIDs[sp], r.ids[sp]...)
			st.Episodes[sp] += len(r.ids[sp])
			st.Steps[sp] += r.steps[sp]
			st.Families[sp][r.family] = len(r.ids[sp])
			st.Files = append(st.Files, FileName(sp, r.family))
		}
		st.Bytes += r.bytes
	}
	sort.Strings(st.Files)
	for _, sp := range Splits {
		sort.Strings(splitIDs[sp])
	}
	if err := writeJSON(filepath.Join(o.Dir, "splits.json"), splitIDs); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(o.Dir, "dataset.json"), st); err != nil {
		return nil, err
	}
	return st, nil
}

// writeFamily records one family's episodes into its three split files.
func writeFamily(ctx context.Context, o Options, fam string, seeds []int64) (map[string][]string, map[string]int, int64, error) {
	ids := map[string][]string{}
	steps := map[string]int{}
	// Each file is written under a temporary name and renamed when whole,
	// so an interrupted run leaves no torn file for eval to read.
	files := map[string]*atomicfile.File{}
	writers := map[string]*aitw.RecordWriter{}
	closeAll := func() {
		for _, f := range files {
			f.Abort()
		}
	}
	for _, sp := range Splits {
		path := filepath.Join(o.Dir, FileName(sp, fam))
		f, err := atomicfile.Create(path)
		if err != nil {
			closeAll()
			return nil, nil, 0, fmt.Errorf("dataset: %w", err)
		}
		files[sp] = f
		writers[sp] = aitw.NewRecordWriter(f, path) // gzip buffers its output
	}
	for _, seed := range seeds {
		if err := ctx.Err(); err != nil {
			closeAll()
			return nil, nil, 0, err
		}
		t := tasks.Generate(fam, seed)
		rec, err := Record(t, o.Width, o.Height)
		if err != nil {
			closeAll()
			return nil, nil, 0, fmt.Errorf("dataset: %w", err)
		}
		sp := SplitName(t.Split)
		for _, s := range rec {
			if err := writers[sp].WriteExample(aitw.StepExample(s)); err != nil {
				closeAll()
				return nil, nil, 0, err
			}
		}
		ids[sp] = append(ids[sp], EpisodeID(fam, seed))
		steps[sp] += len(rec)
	}
	var total int64
	for _, sp := range Splits {
		if err := writers[sp].Close(); err != nil {
			closeAll()
			return nil, nil, 0, err
		}
		fi, err := files[sp].Stat()
		if err == nil {
			total += fi.Size()
		}
	}
	for _, sp := range Splits {
		if err := files[sp].Commit(); err != nil {
			closeAll()
			return nil, nil, 0, fmt.Errorf("dataset: %w", err)
		}
	}
	return ids, steps, total, nil
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

// prepareDir makes dir ready for a new dataset: created if missing; if it
// holds anything, refused unless overwrite, which removes an earlier
// dataset's files first. A directory with other files is never cleared.
func prepareDir(dir string, overwrite bool) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	if len(ents) == 0 {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("dataset: %s is not empty (%d entries): pass --overwrite to replace the dataset in it, or use another --out", dir, len(ents))
	}
	var foreign []string
	for _, e := range ents {
		if !isDatasetEntry(e) {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("dataset: %s holds files that are not a dataset's (%s): refusing to clear it", dir, strings.Join(foreign, ", "))
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("dataset: clear %s: %w", dir, err)
		}
	}
	return nil
}

// isDatasetEntry reports whether a directory entry is something Write
// makes: a split directory, splits.json, dataset.json or a temporary file
// left by an interrupted run.
func isDatasetEntry(e fs.DirEntry) bool {
	name := e.Name()
	if e.IsDir() {
		return slices.Contains(Splits, name)
	}
	return name == "splits.json" || name == "dataset.json" || strings.HasPrefix(name, ".")
}
