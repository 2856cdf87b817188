package aitw

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Episode is one demonstration: its steps ordered by step id.
type Episode struct {
	ID     string
	Subset string
	Goal   string
	Steps  []Step
	// Incomplete is set when fewer steps than episode_length were read
	// (only possible with ReadOptions.SkipCorrupt).
	Incomplete bool
}

// ReadOptions control reading gold data.
type ReadOptions struct {
	// Subset overrides the subset guessed from each file's path (SubsetOf).
	Subset string
	// DefaultSubset is the subset of files whose path and dataset say none
	// (eval score takes it from the predictions' run.json).
	DefaultSubset string
	// SkipCorrupt skips bad records and empty files, and drops episodes
	// whose records disagree (duplicate steps, episode_length differing or
	// exceeded, step_id out of range), counting and listing them in
	// ReadStats instead of failing; it emits episodes left incomplete by
	// skipped records.
	SkipCorrupt bool
	// KeepPixels keeps each step's raw screenshot (its record's own
	// buffer). Off, Pixels is nil (scoring does not need them, and AITW
	// screens are MBs each).
	KeepPixels bool
	// Keep, when set, selects episodes by id (e.g. a split); others are
	// dropped before their pixels are kept.
	Keep func(episodeID string) bool
	// Stop, when set, is asked before each record (each episode of a
	// pickle): a non-nil error ends the read with it. A reader that the
	// episodes' consumer has stopped so ends at once, even while it skips
	// records that Keep drops.
	Stop func() error
	// MaxRecordSize bounds one record; <= 0 means DefaultMaxRecordSize.
	MaxRecordSize int
	// Interleave, above 1, reads that many record files at once, each
	// inflated on a goroutine of its own: one gzip stream is read by one
	// core (~4 ms per full-size AITW step), too slow to feed a GPU. The
	// files take turns, in file order, each handing over its next records
	// up to a change of episode (or 64 MB of pixels); a file
	// that ends gives its place to the next one not yet begun. Episodes so
	// come in an order that depends only on the files and Interleave, not
	// on timing (FilesAtOnce says how many are read at once). Keep and
	// Stop are then called from several goroutines. Pickles are always
	// read one file after another. Each file being read holds up to a turn
	// and a record beyond what fn has been given, and the assembler up to
	// one unfinished episode of each.
	Interleave int
}

// ReadStats count what a read saw.
type ReadStats struct {
	Files      int
	Records    int // good records read (AITW) or steps (pickles)
	Skipped    int // bad records, empty files and records of episodes already emitted, skipped (SkipCorrupt)
	Incomplete int // episodes emitted with missing steps (SkipCorrupt)
	// DroppedEpisodes counts episodes left out whole because their records
	// disagree (SkipCorrupt).
	DroppedEpisodes int
	// Warnings counts faults that lose no data, read through with or
	// without SkipCorrupt: a gzip file lacking its trailer.
	Warnings int
	// Problems holds the first few skip and warning reasons, for reporting.
	Problems []string
}

// Summary is one line counting what was skipped, dropped or warned about,
// or "" when the read was clean; Problems has the details.
func (st ReadStats) Summary() string {
	var parts []string
	count := func(what string, n int) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", what, n))
		}
	}
	count("skipped (corrupt records or files)", st.Skipped)
	count("dropped episodes (inconsistent records)", st.DroppedEpisodes)
	count("incomplete episodes", st.Incomplete)
	count("warnings", st.Warnings)
	return strings.Join(parts, "; ")
}

const maxProblems = 20

func (st *ReadStats) problem(format string, args ...any) {
	if len(st.Problems) < maxProblems {
		st.Problems = append(st.Problems, fmt.Sprintf(format, args...))
	}
}

// ExpandPaths turns files, directories (walked recursively) and glob
// patterns into a sorted, de-duplicated file list. Hidden files and .json,
// .md and .txt files inside directories are ignored (split files often sit
// next to the data).
func ExpandPaths(args []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, arg := range args {
		for _, a := range strings.Split(arg, ",") {
			if a == "" {
				continue
			}
			matches := []string{a}
			if strings.ContainsAny(a, "*?[") {
				m, err := filepath.Glob(a)
				if err != nil {
					return nil, fmt.Errorf("glob %q: %w", a, err)
				}
				if len(m) == 0 {
					return nil, fmt.Errorf("glob %q matches no files", a)
				}
				matches = m
			}
			for _, p := range matches {
				fi, err := os.Stat(p)
				if err != nil {
					return nil, fmt.Errorf("gold data: %w", err)
				}
				if !fi.IsDir() {
					add(p)
					continue
				}
				var files []string
				err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					name := d.Name()
					if path != p && strings.HasPrefix(name, ".") {
						if d.IsDir() {
							return filepath.SkipDir
						}
						return nil
					}
					if path != p && d.IsDir() && isRunDir(path) {
						return filepath.SkipDir // an eval run's --out kept beside its data
					}
					if d.Type().IsRegular() && !ignoredInDir(name) {
						files = append(files, path)
					}
					return nil
				})
				if err != nil {
					return nil, fmt.Errorf("walk %s: %w", p, err)
				}
				if len(files) == 0 {
					return nil, fmt.Errorf("directory %s holds no data files", p)
				}
				sort.Strings(files)
				for _, f := range files {
					add(f)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no gold data files given")
	}
	return out, nil
}

func ignoredInDir(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json", ".md", ".txt", ".jsonl", ".html", ".feat": // .feat: eval run's feature cache
		return true
	}
	return false
}

// isRunDir reports whether dir is an eval run's output (it holds run.json,
// runinfo.File): its predictions and feature cache are no gold data.
func isRunDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "run.json"))
	return err == nil
}

// IsPickle reports whether a path names an Auto-UI feature pickle (.obj,
// .pkl, .pickle) rather than TFRecords.
func IsPickle(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".obj", ".pkl", ".pickle":
		return true
	}
	return false
}

// SkippableError marks a read error that ReadOptions.SkipCorrupt would
// have skipped (a bad record, an empty file, an inconsistent or incomplete
// episode), so a caller can say how to go on past it.
type SkippableError struct{ Err error }

func (e *SkippableError) Error() string { return e.Err.Error() }
func (e *SkippableError) Unwrap() error { return e.Err }

// skippable wraps err as a *SkippableError.
func skippable(err error) error { return &SkippableError{Err: err} }

// StreamEpisodes reads gold files (TFRecords or Auto-UI pickles, after
// ExpandPaths) and calls fn with each episode once all its steps are read,
// so only unfinished episodes are held in memory. AITW files keep an
// episode's records together, so that is usually one episode. With
// opts.Interleave above 1 several record files are read at once (see
// ReadOptions.Interleave).
func StreamEpisodes(files []string, opts ReadOptions, fn func(Episode) error) (ReadStats, error) {
	var st ReadStats
	asm := newAssembler(opts, &st)
	if FilesAtOnce(files, opts.Interleave) > 1 {
		if err := asm.interleave(files, fn); err != nil {
			return st, err
		}
		return st, asm.finish(fn)
	}
	for _, f := range files {
		st.Files++
		var err error
		if IsPickle(f) {
			err = readPickleFile(f, opts.subsetOf(f), opts, &st, fn)
		} else {
			err = readRecordFile(f, opts.subsetOf(f), opts, func(r fileRecord) error { return asm.take(r, fn) })
		}
		if err := asm.fileDone(err); err != nil {
			return st, err
		}
	}
	return st, asm.finish(fn)
}

// subsetOf is the subset of path's episodes.
func (opts ReadOptions) subsetOf(path string) string {
	switch {
	case opts.Subset != "":
		return opts.Subset
	case SubsetOf(path) != "":
		return SubsetOf(path)
	}
	return opts.DefaultSubset
}

// LoadEpisodes reads all episodes into memory, sorted by subset (in Subsets
// order) and then by id.
func LoadEpisodes(files []string, opts ReadOptions) ([]Episode, ReadStats, error) {
	var eps []Episode
	st, err := StreamEpisodes(files, opts, func(e Episode) error {
		eps = append(eps, e)
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	SortEpisodes(eps)
	return eps, st, nil
}

// SortEpisodes orders episodes by subset (in Subsets order, unknown last)
// and then by id.
func SortEpisodes(eps []Episode) {
	rank := func(s string) int {
		for i, n := range Subsets {
			if n == s {
				return i
			}
		}
		return len(Subsets)
	}
	sort.SliceStable(eps, func(i, j int) bool {
		ri, rj := rank(eps[i].Subset), rank(eps[j].Subset)
		if ri != rj {
			return ri < rj
		}
		if eps[i].Subset != eps[j].Subset {
			return eps[i].Subset < eps[j].Subset
		}
		return eps[i].ID < eps[j].ID
	})
}

// fileRecord is what reading a record file found at one record, handed to
// the assembler in reading order: a good record's step, or a reason.
type fileRecord struct {
	step    Step   // a good record's step (Pixels nil unless kept)
	dropped bool   // opts.Keep left step's episode out; step holds only its id
	skip    string // a bad record skipped (SkipCorrupt): why
	warn    string // a fault that loses no data
}

// readRecordFile reads one TFRecord file and calls emit with each record
// in order. It returns the error that ended the file early: a record that
// is bad without SkipCorrupt, a failed read, or emit's or opts.Stop's error.
func readRecordFile(path, subset string, opts ReadOptions, emit func(fileRecord) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("gold data: %w", err)
	}
	defer f.Close()
	rr, err := NewRecordReader(f, path, opts.MaxRecordSize)
	if err != nil {
		return err
	}
	defer rr.Close()
	intact := 0 // records read whole from this file, for the missing-trailer warning
	for {
		if opts.Stop != nil {
			if err := opts.Stop(); err != nil {
				return err
			}
		}
		payload, off, err := rr.Next()
		if err == io.EOF {
			if rr.TrailerMissing() {
				return emit(fileRecord{warn: fmt.Sprintf("%s: gzip stream truncated (no trailer); %d intact records read", path, intact)})
			}
			return nil
		}
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				return err
			}
			if !opts.SkipCorrupt {
				return skippable(err)
			}
			if err := emit(fileRecord{skip: err.Error()}); err != nil {
				return err
			}
			if !re.Resumable {
				return nil // the rest of the file cannot be read; skipped with it
			}
			continue
		}
		ex, err := DecodeExample(payload)
		var s Step
		if err == nil {
			s, err = StepFromExample(ex)
		}
		if err != nil {
			err = fmt.Errorf("read record %s at byte %d: %w", path, off, err)
			if !opts.SkipCorrupt {
				return skippable(err)
			}
			if err := emit(fileRecord{skip: err.Error()}); err != nil {
				return err
			}
			continue
		}
		intact++
		if opts.Keep != nil && !opts.Keep(s.EpisodeID) {
			if err := emit(fileRecord{step: Step{EpisodeID: s.EpisodeID}, dropped: true}); err != nil {
				return err
			}
			continue
		}
		s.Subset = subset
		s.Source = fmt.Sprintf("%s@%d", path, off)
		if opts.KeepPixels {
			rr.Keep() // the pixels are a slice of the payload
		} else {
			s.Pixels = nil
		}
		if err := emit(fileRecord{step: s}); err != nil {
			return err
		}
	}
}

// EpisodeError says why the records of one episode cannot be assembled.
type EpisodeError struct {
	Source    string // the offending record, "file@offset"
	EpisodeID string
	Problem   string
}

func (e *EpisodeError) Error() string {
	return fmt.Sprintf("%s: episode %s: %s", e.Source, e.EpisodeID, e.Problem)
}

// assembler groups steps into episodes and emits each once complete.
//
// A complete episode is held until a record of another episode arrives (or
// the read ends), so a duplicate or extra record right after its last step
// still counts against it. AITW files keep an episode's records together,
// so that is where such records sit; holding one episode keeps memory
// bounded.
type assembler struct {
	opts    ReadOptions
	st      *ReadStats
	pending map[string]*Episode // incomplete, and the held one
	order   []string            // first-seen order of pending ids, for a stable finish
	held    *Episode            // complete, not yet emitted
	emitted map[string]bool
	dropped map[string]bool // episodes left out for inconsistent records (SkipCorrupt)
}

func newAssembler(opts ReadOptions, st *ReadStats) *assembler {
	return &assembler{opts: opts, st: st, pending: map[string]*Episode{},
		emitted: map[string]bool{}, dropped: map[string]bool{}}
}

// take adds what one record held, in reading order.
func (a *assembler) take(r fileRecord, fn func(Episode) error) error {
	switch {
	case r.skip != "":
		a.st.Skipped++
		a.st.problem("%s", r.skip)
		return nil
	case r.warn != "":
		a.st.Warnings++
		a.st.problem("%s", r.warn)
		return nil
	}
	a.st.Records++
	if r.dropped {
		return a.emitHeldUnless(r.step.EpisodeID, fn)
	}
	return a.add(r.step, fn)
}

// fileDone takes how reading a file ended: an empty file is skipped with
// SkipCorrupt, any other error ends the read.
func (a *assembler) fileDone(err error) error {
	switch {
	case !errors.Is(err, ErrEmptyFile):
		return err
	case !a.opts.SkipCorrupt:
		return skippable(err)
	}
	a.st.Skipped++
	a.st.problem("%v; skipped", err)
	return nil
}

func (a *assembler) add(s Step, fn func(Episode) error) error {
	if err := a.emitHeldUnless(s.EpisodeID, fn); err != nil {
		return err
	}
	switch {
	case a.dropped[s.EpisodeID]:
		return nil // the rest of an episode already left out
	case a.emitted[s.EpisodeID]:
		return a.lateRecord(s)
	}
	ep := a.pending[s.EpisodeID]
	if ep == nil {
		ep = &Episode{ID: s.EpisodeID, Subset: s.Subset, Goal: s.Goal}
		a.pending[s.EpisodeID] = ep
		a.order = append(a.order, s.EpisodeID)
	}
	if problem := stepConflict(ep, s); problem != "" {
		return a.drop(&EpisodeError{Source: s.Source, EpisodeID: s.EpisodeID, Problem: problem})
	}
	ep.Steps = append(ep.Steps, s)
	if len(ep.Steps) == s.EpisodeLength {
		a.held = ep
	}
	return nil
}

// stepConflict says why s cannot join ep's steps, or "" when it can.
func stepConflict(ep *Episode, s Step) string {
	if len(ep.Steps) > 0 && ep.Steps[0].EpisodeLength != s.EpisodeLength {
		first := ep.Steps[0]
		return fmt.Sprintf("step %d says episode_length %d, step %d (%s) said %d",
			s.StepID, s.EpisodeLength, first.StepID, first.Source, first.EpisodeLength)
	}
	if s.StepID < 0 || s.StepID >= s.EpisodeLength {
		return fmt.Sprintf("step_id %d is out of range for episode_length %d", s.StepID, s.EpisodeLength)
	}
	for _, o := range ep.Steps {
		if o.StepID == s.StepID {
			return fmt.Sprintf("has step %d twice (also at %s)", s.StepID, o.Source)
		}
	}
	return ""
}

// drop leaves out the episode e names (SkipCorrupt) or returns e.
func (a *assembler) drop(e *EpisodeError) error {
	if !a.opts.SkipCorrupt {
		return skippable(e)
	}
	if a.held != nil && a.held.ID == e.EpisodeID {
		a.held = nil
	}
	delete(a.pending, e.EpisodeID)
	a.dropped[e.EpisodeID] = true
	a.st.DroppedEpisodes++
	a.st.problem("%v; episode dropped", e)
	return nil
}

// lateRecord handles a record of an episode already emitted: it can no
// longer be recalled, so with SkipCorrupt only the record is skipped.
func (a *assembler) lateRecord(s Step) error {
	e := &EpisodeError{Source: s.Source, EpisodeID: s.EpisodeID,
		Problem: fmt.Sprintf("step %d comes after the episode was read complete (a duplicate record, or more records than episode_length?)", s.StepID)}
	if !a.opts.SkipCorrupt {
		return skippable(e)
	}
	a.st.Skipped++
	a.st.problem("%v; record skipped", e)
	return nil
}

// emitHeldUnless emits the held complete episode unless it is episodeID's.
func (a *assembler) emitHeldUnless(episodeID string, fn func(Episode) error) error {
	if a.held == nil || a.held.ID == episodeID {
		return nil
	}
	return a.emitHeld(fn)
}

func (a *assembler) emitHeld(fn func(Episode) error) error {
	ep := a.held
	if ep == nil {
		return nil
	}
	a.held = nil
	delete(a.pending, ep.ID)
	a.emitted[ep.ID] = true
	sortSteps(ep)
	return fn(*ep)
}

func (a *assembler) finish(fn func(Episode) error) error {
	if err := a.emitHeld(fn); err != nil {
		return err
	}
	for _, id := range a.order {
		ep := a.pending[id]
		if ep == nil {
			continue
		}
		want := ep.Steps[0].EpisodeLength
		if !a.opts.SkipCorrupt {
			sortSteps(ep)
			return skippable(fmt.Errorf("episode %s has %d of its %d steps (episode_length) in the given files; first seen at %s",
				id, len(ep.Steps), want, ep.Steps[0].Source))
		}
		a.st.Incomplete++
		a.st.problem("episode %s has %d of its %d steps", id, len(ep.Steps), want)
		ep.Incomplete = true
		sortSteps(ep)
		if err := fn(*ep); err != nil {
			return err
		}
	}
	a.pending = map[string]*Episode{}
	a.order = nil
	return nil
}

func sortSteps(ep *Episode) {
	sort.Slice(ep.Steps, func(i, j int) bool { return ep.Steps[i].StepID < ep.Steps[j].StepID })
}
