// Package runinfo is the provenance of an evaluation run: run.json in an
// `eval run --out` directory records the model, every option that changes
// predictions and the data, so that a resumed run cannot append another
// model's predictions to the file, shards of one evaluation can be checked
// to belong together, and a report can say what it scores.
package runinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/atomicfile"
)

// File is the provenance file's name in an output directory.
const File = "run.json"

// FormatVersion is the newest run.json layout this code writes and reads.
// Format 2 is a run made with --replay (Options.Replay), which a reader of
// format 1 would take for the model's predictions and resume; every other
// run is written as format 1.
const FormatVersion = 2

// Info is run.json.
type Info struct {
	Format  int     `json:"format"`
	Version string  `json:"autoui_version"`
	Model   Model   `json:"model"`
	Options Options `json:"options"`
	Data    Data    `json:"data"`
	// Started is when the first run into this directory began; Ended when the
	// latest one stopped (zero while one is running or after a crash).
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Complete is set when the latest run predicted every selected step.
	Complete bool `json:"complete"`
}

// Model identifies the bundle: its manifest's SHA-256 covers every file's
// checksum, so equal hashes mean the same graphs, tokenizer and settings.
type Model struct {
	Name           string `json:"name"`
	Dir            string `json:"dir"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// ModelOf identifies the bundle in dir, a loaded one: its manifest's name,
// the directory's absolute path and the manifest's SHA-256. It returns the
// manifest too, for what else the caller reads from it.
func ModelOf(dir string) (Model, []byte, error) {
	man, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return Model{}, nil, err
	}
	var named struct {
		Name string `json:"name"`
	}
	json.Unmarshal(man, &named) // the bundle loaded, so the manifest parses
	sum := sha256.Sum256(man)
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return Model{Name: named.Name, Dir: abs, ManifestSHA256: hex.EncodeToString(sum[:])}, man, nil
}

// Options are the settings that change predictions (and the batch size,
// which does not), as in effect: the bundle's defaults filled in.
type Options struct {
	History string `json:"history"`
	// HistoryWindow is the previous actions the prompt showed: 0 is none
	// (--history-window -1), never "the bundle's".
	HistoryWindow int    `json:"history_window"`
	Truncation    string `json:"truncation"`
	MaxNewTokens  int    `json:"max_new_tokens"`
	Decoding      string `json:"decoding"`
	Constrained   bool   `json:"constrained"`
	Provider      string `json:"provider"`
	GraphOpt      string `json:"graph_opt"`
	// ExactFP32 is cuda without TF32 (the default since --tf32 exists);
	// absent, TF32 was on (cuda runs before --tf32) or the provider has none.
	ExactFP32 bool `json:"exact_fp32,omitempty"`
	// Batch is the latest run's --batch. It is recorded, not compared:
	// predictions are the same at every batch size, so a run may resume or
	// merge at another. Except under cuda with TF32 (--tf32), where it is
	// compared.
	Batch int `json:"batch"`
	// Continuous is the latest run's --continuous (one continuous decode on
	// Batch rows), recorded, not compared, as Batch is.
	Continuous bool `json:"continuous,omitempty"`
	// ReadFiles is the record files the latest run read at once (its
	// --read-files, or fewer where fewer apply: aitw.FilesAtOnce), which
	// sets the predictions' line order and the steps that share a call;
	// recorded, not compared, as Batch is (0 in runs before it: one file
	// at a time).
	ReadFiles int `json:"read_files,omitempty"`
	// ConcurrentBatches is the latest run's --concurrent-batches (0 in runs
	// before it: one call at a time). With predicted history it chooses the
	// steps that share a call; recorded, not compared, as Batch is.
	ConcurrentBatches int `json:"concurrent_batches,omitempty"`
	// Preset is the --preset that set the options above ("autoui": Auto-GUI's
	// main.py), "" for none. ScrollMap is the map the prompts' gold swipes
	// were written with (the bundle's). Neither is compared: the options
	// are, and the manifest hash covers the bundle.
	Preset    string `json:"preset,omitempty"`
	ScrollMap string `json:"scroll_map,omitempty"`
	// Replay is eval run's --replay (benchmarking: every prediction is the
	// replayed action, not the model's), "" for none; compared.
	Replay string `json:"replay,omitempty"`
}

// AutoUIPreset is what Auto-GUI's main.py predicts with (its README's
// --use_history 8, --output_len 128 with the start token counted, the
// tokenizer's right truncation at --input_len 512, gold previous actions,
// plain generate()). Decoding is not part of it: speculative decoding gives
// greedy's tokens.
var AutoUIPreset = Options{Preset: "autoui", History: "gold", HistoryWindow: 8, Truncation: "right", MaxNewTokens: 127}

// Data is what was predicted.
type Data struct {
	Files  []DataFile `json:"files"`
	Subset string     `json:"subset,omitempty"`
	Splits string     `json:"splits,omitempty"`
	Split  string     `json:"split,omitempty"`
	// Shard is "I/N" when the run predicted one shard of the data.
	Shard string `json:"shard,omitempty"`
}

// DataFile is one gold file. Files are compared by name and size, not by
// path, so shards run on machines that mount the data elsewhere agree.
type DataFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// DataFiles describes files by absolute path and size.
func DataFiles(paths []string) ([]DataFile, error) {
	out := make([]DataFile, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("data file: %w", err)
		}
		out = append(out, DataFile{Path: abs, Size: st.Size()})
	}
	return out, nil
}

// Read reads DIR/run.json; a missing file gives (nil, nil).
func Read(dir string) (*Info, error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: not a run.json: %w", path, err)
	}
	if in.Format < 1 || in.Format > FormatVersion {
		return nil, fmt.Errorf("%s: format %d, this autoui reads 1..%d", path, in.Format, FormatVersion)
	}
	return &in, nil
}

// Write replaces DIR/run.json atomically.
func (in *Info) Write(dir string) error {
	in.Format = 1
	if in.Options.Replay != "" {
		in.Format = 2
	}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, File), append(b, '\n'))
}

// Diff lists, one "what: old vs new" string each, how b differs from a in
// what changes predictions: the model, the options and the data. With
// sameShard false the shard is not compared (shards of one evaluation).
func Diff(a, b *Info, sameShard bool) []string {
	var d []string
	add := func(what string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s: %v vs %v", what, x, y))
		}
	}
	add("model (manifest sha256)", short(a.Model.ManifestSHA256), short(b.Model.ManifestSHA256))
	ao, bo := a.Options, b.Options
	add("history", ao.History, bo.History)
	add("history_window", ao.HistoryWindow, bo.HistoryWindow)
	add("truncation", ao.Truncation, bo.Truncation)
	add("max_new_tokens", ao.MaxNewTokens, bo.MaxNewTokens)
	add("decoding", ao.Decoding, bo.Decoding)
	add("constrained", ao.Constrained, bo.Constrained)
	add("provider", ao.Provider, bo.Provider)
	add("graph_opt", ao.GraphOpt, bo.GraphOpt)
	add("exact_fp32", ao.ExactFP32, bo.ExactFP32)
	add("replay", orNone(ao.Replay), orNone(bo.Replay))
	if ao.Provider == "cuda" && bo.Provider == "cuda" && !ao.ExactFP32 && !bo.ExactFP32 {
		// TF32's products depend on the matrix shapes: on an H200, 2 of
		// 1483 outputs differed between batches of 8 and 64
		add("batch (under TF32 the outputs depend on it)", ao.Batch, bo.Batch)
		add("continuous (under TF32 the outputs depend on the rows a call has)", ao.Continuous, bo.Continuous)
		add("read_files (--read-files; under TF32 the outputs depend on the steps a call has)", max(ao.ReadFiles, 1), max(bo.ReadFiles, 1))
		if ao.History == "predicted" || bo.History == "predicted" {
			add("concurrent_batches (--concurrent-batches; with predicted history under TF32 the outputs depend on the steps a call has)",
				max(ao.ConcurrentBatches, 1), max(bo.ConcurrentBatches, 1))
		}
	}
	if !SameData(a.Data.Files, b.Data.Files) {
		add("data files", fileList(a.Data.Files), fileList(b.Data.Files))
	}
	add("subset", orNone(a.Data.Subset), orNone(b.Data.Subset))
	add("splits", orNone(base(a.Data.Splits)), orNone(base(b.Data.Splits)))
	add("split", orNone(a.Data.Split), orNone(b.Data.Split))
	if sameShard {
		add("shard", orAll(a.Data.Shard), orAll(b.Data.Shard))
	}
	return d
}

// base is a path's last element, "" for none (filepath.Base says ".").
func base(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orAll(shard string) string {
	if shard == "" {
		return "all"
	}
	return shard
}

// fileList is the comparable form of a file list: base names and sizes, in
// order.
func fileList(fs []DataFile) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = fmt.Sprintf("%s (%d bytes)", filepath.Base(f.Path), f.Size)
	}
	if len(s) > 3 {
		return fmt.Sprintf("%d files [%s, ...]", len(s), s[0])
	}
	return fmt.Sprint(s)
}

// SameData reports whether two file lists name the same files (by name and
// size, in order).
func SameData(a, b []DataFile) bool {
	return slices.EqualFunc(a, b, func(x, y DataFile) bool {
		return filepath.Base(x.Path) == filepath.Base(y.Path) && x.Size == y.Size
	})
}

// Version is this build's version: the module version, or the VCS revision
// for a development build ("devel+1a2b3c4d5e6f", "+dirty" with uncommitted
// changes), or "devel" when the build carries neither (go test, go run).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + short(rev) + dirty
}

// Start checks that predictions already in dir were made the same way as in
// (else it refuses, touching nothing) and records in as this run's start.
// A directory holding no prediction yet (a run stopped before its first) is
// taken over whatever made it: there is nothing to mix.
func Start(dir string, in *Info) error {
	old, err := Read(dir)
	if err != nil {
		return fmt.Errorf("%w (fix or remove it, or use another --out)", err)
	}
	var diff []string
	if old != nil {
		diff = Diff(old, in, true)
	}
	if st, err := os.Stat(filepath.Join(dir, PredictionsFile)); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: use another --out", filepath.Join(dir, PredictionsFile))
	}
	switch {
	case old != nil && len(diff) == 0:
		in.Started = old.Started
	case !holdsPredictions(filepath.Join(dir, PredictionsFile)):
	case old == nil:
		return fmt.Errorf("%s holds predictions without a %s (from an older autoui or another tool): their model and options are unknown, so nothing is appended; use another --out",
			dir, File)
	default:
		return fmt.Errorf("%s holds predictions made differently; resuming would mix them (%s): use the same model and options to resume, or another --out",
			dir, strings.Join(diff, "; "))
	}
	return in.Write(dir)
}

// holdsPredictions reports whether a predictions file holds a prediction: a
// missing or empty file, or a torn first line, holds none. A file that
// cannot be read counts as holding some, so it is never taken over.
func holdsPredictions(path string) bool {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Size() == 0) {
		return false
	}
	ps, err := aitw.ReadPredictions(path)
	return err != nil || len(ps.ByStep) > 0
}
