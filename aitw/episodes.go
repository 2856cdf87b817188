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
	// Subset overrides the subset guessed from each file's path.
	Subset string
	// SkipCorrupt skips bad records (counting them in ReadStats) instead of
	// failing, and emits episodes left incomplete by them.
	SkipCorrupt bool
	// KeepPixels keeps a copy of each step's raw screenshot. Off, Pixels is
	// nil (scoring does not need them, and AITW screens are MBs each).
	KeepPixels bool
	// Keep, when set, selects episodes by id (e.g. a split); others are
	// dropped before their pixels are copied.
	Keep func(episodeID string) bool
	// MaxRecordSize bounds one record; <= 0 means DefaultMaxRecordSize.
	MaxRecordSize int
}

// ReadStats count what a read saw.
type ReadStats struct {
	Files      int
	Records    int // good records read (AITW) or steps (pickles)
	Skipped    int // bad records skipped (SkipCorrupt)
	Incomplete int // episodes emitted with missing steps (SkipCorrupt)
	// Problems holds the first few skip reasons, for reporting.
	Problems []string
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
	case ".json", ".md", ".txt", ".jsonl", ".html":
		return true
	}
	return false
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

// StreamEpisodes reads gold files (TFRecords or Auto-UI pickles, after
// ExpandPaths) and calls fn with each episode once all its steps are read,
// so only unfinished episodes are held in memory. AITW files keep an
// episode's records together, so that is usually one episode.
func StreamEpisodes(files []string, opts ReadOptions, fn func(Episode) error) (ReadStats, error) {
	var st ReadStats
	asm := newAssembler(opts, &st)
	for _, f := range files {
		st.Files++
		subset := opts.Subset
		if subset == "" {
			subset = SubsetFromPath(f)
		}
		var err error
		if IsPickle(f) {
			err = readPickleFile(f, subset, opts, &st, fn)
		} else {
			err = readRecordFile(f, subset, opts, &st, asm, fn)
		}
		if err != nil {
			return st, err
		}
	}
	return st, asm.finish(fn)
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

func readRecordFile(path, subset string, opts ReadOptions, st *ReadStats, asm *assembler, fn func(Episode) error) error {
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
	for {
		payload, off, err := rr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var re *RecordError
			if opts.SkipCorrupt && errors.As(err, &re) {
				st.Skipped++
				st.problem("%v", err)
				if re.Resumable {
					continue
				}
				return nil
			}
			return err
		}
		ex, err := DecodeExample(payload)
		var s Step
		if err == nil {
			s, err = StepFromExample(ex)
		}
		if err != nil {
			err = fmt.Errorf("read record %s at byte %d: %w", path, off, err)
			if opts.SkipCorrupt {
				st.Skipped++
				st.problem("%v", err)
				continue
			}
			return err
		}
		st.Records++
		if opts.Keep != nil && !opts.Keep(s.EpisodeID) {
			continue
		}
		s.Subset = subset
		s.Source = fmt.Sprintf("%s@%d", path, off)
		if opts.KeepPixels {
			s.Pixels = append([]byte(nil), s.Pixels...)
		} else {
			s.Pixels = nil
		}
		if err := asm.add(s, fn); err != nil {
			return err
		}
	}
}

// assembler groups steps into episodes and emits each once complete.
type assembler struct {
	opts    ReadOptions
	st      *ReadStats
	pending map[string]*Episode
	order   []string // first-seen order of pending ids, for a stable finish
	done    map[string]bool
}

func newAssembler(opts ReadOptions, st *ReadStats) *assembler {
	return &assembler{opts: opts, st: st, pending: map[string]*Episode{}, done: map[string]bool{}}
}

func (a *assembler) add(s Step, fn func(Episode) error) error {
	if a.done[s.EpisodeID] {
		return fmt.Errorf("%s: episode %s step %d comes after the episode was complete (duplicate record?)", s.Source, s.EpisodeID, s.StepID)
	}
	ep := a.pending[s.EpisodeID]
	if ep == nil {
		ep = &Episode{ID: s.EpisodeID, Subset: s.Subset, Goal: s.Goal}
		a.pending[s.EpisodeID] = ep
		a.order = append(a.order, s.EpisodeID)
	}
	if n := len(ep.Steps); n > 0 && ep.Steps[0].EpisodeLength != s.EpisodeLength {
		return fmt.Errorf("%s: episode %s step %d says episode_length %d, step %d said %d",
			s.Source, s.EpisodeID, s.StepID, s.EpisodeLength, ep.Steps[0].StepID, ep.Steps[0].EpisodeLength)
	}
	for _, o := range ep.Steps {
		if o.StepID == s.StepID {
			return fmt.Errorf("%s: episode %s has step %d twice (also at %s)", s.Source, s.EpisodeID, s.StepID, o.Source)
		}
	}
	if s.StepID < 0 || s.StepID >= s.EpisodeLength {
		return fmt.Errorf("%s: episode %s step_id %d is outside episode_length %d", s.Source, s.EpisodeID, s.StepID, s.EpisodeLength)
	}
	ep.Steps = append(ep.Steps, s)
	if len(ep.Steps) == s.EpisodeLength {
		delete(a.pending, s.EpisodeID)
		a.done[s.EpisodeID] = true
		sortSteps(ep)
		return fn(*ep)
	}
	return nil
}

func (a *assembler) finish(fn func(Episode) error) error {
	for _, id := range a.order {
		ep := a.pending[id]
		if ep == nil {
			continue
		}
		want := ep.Steps[0].EpisodeLength
		if !a.opts.SkipCorrupt {
			sortSteps(ep)
			return fmt.Errorf("episode %s has %d of its %d steps (episode_length) in the given files; first seen at %s",
				id, len(ep.Steps), want, ep.Steps[0].Source)
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
