package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/report"
	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/aitw/runner"
	"github.com/autoui/autoui/aitw/score"
	"github.com/autoui/autoui/atomicfile"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/predict"
)

func init() {
	register(command{name: "eval", summary: "AITW evaluation: 'eval run' predicts a dataset, 'eval score' scores predictions", run: runEval})
}

func runEval(ctx context.Context, args []string) error {
	usage := "usage: autoui eval run|score [flags]  (autoui eval run -h, autoui eval score -h)"
	if len(args) == 0 {
		return usageErrorf("%s", usage)
	}
	switch args[0] {
	case "run":
		return runEvalRun(ctx, args[1:])
	case "score":
		return runEvalScore(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(os.Stderr, usage)
		return flag.ErrHelp
	}
	return usageErrorf("unknown eval command %q; %s", args[0], usage)
}

// listFlag collects repeated or comma-separated paths.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// dataFlags are the gold-data flags both subcommands share.
type dataFlags struct {
	paths       listFlag
	subset      string
	splits      string
	split       string
	skipCorrupt bool
	// defaultSubset is for files whose path and dataset.json name none
	// (eval score: the subset the predictions' run.json recorded).
	defaultSubset string
}

func (d *dataFlags) add(fs *flag.FlagSet, name, what string) {
	fs.Var(&d.paths, name, what+": AITW TFRecord files (gzip), directories or globs, or Auto-UI feature pickles (.obj/.pkl); repeatable or comma-separated")
	fs.StringVar(&d.subset, "subset", "", "AITW subset of all the data ("+strings.Join(aitw.Subsets, ", ")+"); default: from each file's path")
	fs.StringVar(&d.splits, "splits", "", "split file: AITW's standard split JSON (train/validation/test) or Auto-UI's *_texts_splits.json (train/val/test)")
	fs.StringVar(&d.split, "split", "", "split to use from --splits (train, val/validation, test); default: every episode in the data")
	fs.BoolVar(&d.skipCorrupt, "skip-corrupt", false, "skip (count and list) corrupt or truncated records, empty files and episodes with duplicate steps, inconsistent episode_length or out-of-range step_id, instead of failing")
}

// required checks that the data flag (flagName) was given, before any
// file is read.
func (d *dataFlags) required(flagName string) error {
	if len(d.paths) == 0 {
		return usageErrorf("--%s is required", flagName)
	}
	return nil
}

// open checks the flags and returns the files, read options and split ids.
func (d *dataFlags) open() ([]string, aitw.ReadOptions, map[string]bool, error) {
	var ro aitw.ReadOptions
	if d.subset != "" && !aitw.ValidSubset(d.subset) {
		return nil, ro, nil, usageErrorf("--subset %q: want one of %s", d.subset, strings.Join(aitw.Subsets, ", "))
	}
	files, err := aitw.ExpandPaths(d.paths)
	if err != nil {
		return nil, ro, nil, err
	}
	ro.Subset, ro.SkipCorrupt, ro.DefaultSubset = d.subset, d.skipCorrupt, d.defaultSubset
	if d.subset == "" && d.defaultSubset == "" {
		for _, f := range files {
			if aitw.SubsetOf(f) == "" {
				return nil, ro, nil, usageErrorf("cannot tell the AITW subset of %s from its path or a %s above it: pass --subset", f, aitw.DatasetFile)
			}
		}
	}
	var ids map[string]bool
	switch {
	case d.splits != "":
		if d.split == "" {
			return nil, ro, nil, usageErrorf("--splits needs --split (e.g. --split test)")
		}
		sp, err := aitw.ReadSplits(d.splits)
		if err != nil {
			return nil, ro, nil, err
		}
		if ids, err = sp.IDs(d.split); err != nil {
			return nil, ro, nil, usageErrorf("--split: %s: %w", d.splits, err)
		}
	case d.split != "":
		for _, f := range files {
			if !aitw.IsPickle(f) {
				return nil, ro, nil, usageErrorf("--split %s needs --splits FILE to select episodes from AITW records (Auto-UI pickles are already split)", d.split)
			}
		}
	}
	return files, ro, ids, nil
}

func (d *dataFlags) report(w io.Writer, st aitw.ReadStats) {
	if s := st.Summary(); s != "" {
		fmt.Fprintln(w, s)
		for _, p := range st.Problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
}

// scoreReadFiles is the record files eval score reads at once;
// maxReadFiles bounds eval run's --read-files (each file read at once holds
// a goroutine, an open file and about an episode of screens);
// maxConcurrentCalls its --concurrent-batches (each call holds a batch of
// screens, and on a GPU its states).
const (
	scoreReadFiles     = 4
	maxReadFiles       = 64
	maxConcurrentCalls = 4
)

func runEvalRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval run", flag.ContinueOnError)
	mf := addModelFlags(fs)
	var df dataFlags
	df.add(fs, "data", "gold data to predict")
	history := fs.String("history", "gold", "previous actions given to the model: gold (the paper's protocol) or predicted (its own)")
	limit := fs.Int("limit", 0, "stop after this many new predictions (0: all)")
	shard := fs.String("shard", "", "predict only shard I/N (0-based; episodes split by a hash of their id), or auto: from a Slurm array task (SLURM_ARRAY_TASK_*) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with --shards)")
	shards := fs.Int("shards", 0, "with --shard auto: the number of shards (needed for a Kubernetes Indexed Job; checked against a Slurm array's size)")
	batch := fs.Int("batch", 0, fmt.Sprintf("steps predicted per engine call (0: %d on CPU, %d on CUDA); predictions are the same as with 1", runner.DefaultBatch("cpu"), runner.DefaultBatch("cuda")))
	continuous := fs.Bool("continuous", false, "with --cuda-graph: decode on --batch rows of one continuous decode, a step joining as soon as a row is free and leaving when its answer ends, instead of batches that wait for their longest answer; predictions are the same (gold history: in the same order)")
	readFiles := fs.Int("read-files", 0, fmt.Sprintf("record files read at once, each inflated on a core of its own, their episodes taken in turns: a fixed order, the same predictions (but under --tf32, where the steps that share a call matter) (0: %d on CPU, %d on CUDA; at most %d)", runner.DefaultReadFiles("cpu"), runner.DefaultReadFiles("cuda"), maxReadFiles))
	concurrent := fs.Int("concurrent-batches", 1, fmt.Sprintf("engine calls in flight at once, each with a batch of its own (not with --continuous; at most %d): under --cuda-graph one batch's screens and prompts are seen while another decodes, each holding its own device memory; the same predictions (gold history: in the same order)", maxConcurrentCalls))
	mf.addOverlapFlag(fs)
	joinMin := fs.Int("join-min", 0, "with --continuous: the fewest free rows that steps join a busy decode in; each join pauses the decode for its prefill, or with --overlap-joins holds up the next join (0: 1 on the cpu, a quarter of --batch under cuda)")
	out := fs.String("out", "", "output directory: predictions.jsonl (appended to; re-running resumes) and run.json (what made them); required")
	cache := fs.String("feature-cache", "", "vision feature cache directory (default OUT/feature_cache); keyed by model and pixels")
	noCache := fs.Bool("no-feature-cache", false, "do not cache vision features")
	preset := fs.String("preset", "", "autoui: predict as Auto-GUI's main.py does, for the paper's number ("+presetFlags()+"); other values of these flags are refused")
	replay := fs.String("replay", "", "benchmarking only: every step decodes this action text ('typical' for a typical Auto-UI tap; 'mixed' for answers of several lengths in turn) instead of the model's choices, through real decoder calls, so that a random-weight bundle runs as a trained one would (serve --replay's rule); run.json records it and eval score refuses the predictions")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui eval run --model DIR --data PATHS [--splits FILE --split test] [--preset autoui] --out DIR [flags]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := applyPreset(fs, *preset); err != nil {
		return err
	}
	if *out == "" {
		return usageErrorf("--out is required")
	}
	if err := df.required("data"); err != nil {
		return err
	}
	hist, err := runner.ParseHistory(*history)
	if err != nil {
		return usageError{fmt.Errorf("--history: %w", err)}
	}
	sh, err := aitw.ResolveShard(*shard, *shards, os.Getenv)
	if err != nil {
		return usageError{err}
	}
	if *limit < 0 {
		return usageErrorf("--limit %d: must be >= 0", *limit)
	}
	if *batch < 0 || *batch > engine.StreamRowsLimit {
		// the read-ahead holds about a batch of full-size screens (10 MB each)
		return usageErrorf("--batch %d: want 0 to %d", *batch, engine.StreamRowsLimit)
	}
	if *readFiles < 0 || *readFiles > maxReadFiles {
		return usageErrorf("--read-files %d: want 1 to %d (or 0, the provider's default)", *readFiles, maxReadFiles)
	}
	if mf.overlap && !*continuous {
		return usageErrorf("--overlap-joins needs --continuous")
	}
	switch {
	case *concurrent < 1 || *concurrent > maxConcurrentCalls:
		return usageErrorf("--concurrent-batches %d: want 1 to %d", *concurrent, maxConcurrentCalls)
	case *concurrent > 1 && *continuous:
		// a continuous decode takes steps as rows free up
		return usageErrorf("--concurrent-batches %d: for batches, not --continuous", *concurrent)
	}
	if *continuous && !mf.cudaGraph {
		return usageErrorf("--continuous runs on the static decoder: add --cuda-graph")
	}
	if *joinMin < 0 {
		return usageErrorf("--join-min %d: must be >= 1 (or 0, the provider's default)", *joinMin)
	}
	files, ro, ids, err := df.open()
	if err != nil {
		return err
	}
	// Lock before loading the model, so a second run on the same --out
	// stops at once instead of after a long load.
	lock, err := outlock.Acquire(*out, "autoui eval run")
	if err != nil {
		return err
	}
	defer lock.Release()
	p, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer closeModel()
	set := p.Settings()
	var pred predict.Predictor = p
	if *replay != "" {
		r, err := bench.NewReplayer(p.Tokenizer(), *replay, set.MaxNewTokens)
		if err != nil {
			return usageErrorf("--replay: %w", err)
		}
		pred = r.Wrap(p)
		fmt.Fprintln(os.Stderr, "autoui eval run: --replay: every prediction is the replayed action, not the model's (benchmarking)")
	}
	if *batch == 0 {
		*batch = runner.DefaultBatch(string(set.Provider))
	}
	if *readFiles == 0 {
		*readFiles = runner.DefaultReadFiles(string(set.Provider))
	}
	// what applies, which alone sets the order (one file, or pickles: 1)
	ro.Interleave = aitw.FilesAtOnce(files, *readFiles)
	info, err := newRunInfo(mf.model, set, hist, *batch, files, df, sh)
	if err != nil {
		return err
	}
	info.Options.Preset = *preset
	info.Options.Continuous = *continuous
	info.Options.ReadFiles = ro.Interleave
	info.Options.ConcurrentBatches = *concurrent
	info.Options.Replay = *replay
	if err := runinfo.Start(*out, info); err != nil {
		return err
	}
	opts := runner.Options{
		Files: files, Read: ro, Split: ids, Shard: sh, History: hist, Limit: *limit, OutDir: *out, Batch: *batch, Continuous: *continuous, Concurrent: *concurrent,
		JoinMin:  defaultJoinMin(*joinMin, set.Provider, *batch),
		Progress: os.Stderr, TTY: term.IsTerminal(int(os.Stderr.Fd())), Shrink: p.Shrink,
	}
	if !*noCache {
		opts.CacheDir = *cache
		if opts.CacheDir == "" {
			opts.CacheDir = filepath.Join(*out, "feature_cache")
		}
		opts.CacheKey = modelFingerprint(mf.model)
	}
	sum, err := runner.Run(ctx, pred, opts)
	err = skipHint(err)
	ended := time.Now().UTC()
	info.Ended = &ended
	info.Complete = err == nil && !sum.Interrupted && !sum.LimitHit
	if werr := info.Write(*out); werr != nil && err == nil {
		err = werr
	}
	df.report(os.Stderr, sum.Read)
	if sum.TornTail {
		fmt.Fprintln(os.Stderr, "cut a torn last line from "+sum.Path+" (the previous run was killed mid-write)")
	}
	fmt.Fprintf(os.Stderr, "%d new predictions (%d already done) in %s; %d episodes; %d outputs did not parse; vision cache %d hits, %d misses%s\n",
		sum.Predicted, sum.AlreadyDone, sum.Path, sum.Episodes, sum.ParseErrors, sum.CacheHits, sum.CacheMisses, cacheNotes(sum))
	if a := sum.AfterFirst; a.Steps >= *batch && a.Time > 0 {
		// the first call carries the engine's warm-up; a short GPU run is mostly that
		fmt.Fprintf(os.Stderr, "after the first %d predictions: %d in %.1f s, %.2f steps/s%s\n", a.First, a.Steps, a.Time.Seconds(), float64(a.Steps)/a.Time.Seconds(), afterFirstParts(sum))
	}
	if d, n := sum.Decode, sum.Predicted; n > 0 && d.Calls > 0 {
		ms := func(t time.Duration) float64 { return float64(t.Microseconds()) / 1000 }
		// A batched call serves several steps: these are wall time and calls
		// per step, averaged over the batches.
		atOnce := ""
		if *concurrent > 1 {
			atOnce = fmt.Sprintf(", %d calls at once", *concurrent)
		}
		fmt.Fprintf(os.Stderr, "text path: %.1f ms per action (decoding %.1f ms); %.2f decoder calls and %.1f tokens per action, %.2f tokens per call (batch %d%s)%s\n",
			ms(d.TextPath)/float64(n), ms(d.Decode)/float64(n), float64(d.Calls)/float64(n), float64(d.Tokens)/float64(n),
			float64(d.Tokens)/float64(d.Calls), *batch, atOnce, perCall(d))
	} else if n > 0 && *continuous {
		// a stream's calls serve whichever steps are decoding: not per step
		fmt.Fprintf(os.Stderr, "continuous decode on %d rows: %.1f tokens per action; %s\n", *batch, float64(d.Tokens)/float64(n), streamLine(p))
	}
	if err != nil {
		return err
	}
	if sum.Interrupted {
		return interruptedError{"every prediction written so far is kept; re-run the same command to resume"}
	}
	if sum.LimitHit {
		fmt.Fprintf(os.Stderr, "stopped at --limit %d; re-run to continue\n", *limit)
	}
	return nil
}

// afterFirstParts says where a batched run's time after its first call
// went: the engine's calls, waiting for the reading, and the run's own work
// between calls (the engine idle then).
func afterFirstParts(sum runner.Summary) string {
	a := sum.AfterFirst
	if a.Engine <= 0 {
		return "" // a continuous decode: its calls run beside the run's goroutine
	}
	rest := max(a.Time-a.Engine-a.Reading, 0)
	return fmt.Sprintf(" (engine calls %.2f s, waiting for the reading %.2f s, writing and the rest %.2f s)",
		a.Engine.Seconds(), a.Reading.Seconds(), rest.Seconds())
}

// perCall says what a batched run's engine calls spent on average, by
// stage: where the screens and the prompts overlap, the call is shorter
// than their sum.
func perCall(d runner.DecodeStats) string {
	if d.Batches < 2 {
		return ""
	}
	per := func(t time.Duration) float64 { return t.Seconds() * 1000 / float64(d.Batches) }
	return fmt.Sprintf("; per engine call: screens %.1f ms, prompts %.1f ms, decoding %.1f ms in %.1f decoder calls",
		per(d.Screens), per(d.Prompts), per(d.Decode), float64(d.Calls)/float64(d.Batches))
}

// recordedSubset is the subset run.json records: --subset, else the one a
// dataset.json gives every file (`autoui dataset` output), so eval score
// can find it without the flag. A subset read from each file's path is not
// recorded: the path says it.
func recordedSubset(files []string, flag string) string {
	if flag != "" {
		return flag
	}
	subset := ""
	for i, f := range files {
		s := aitw.SubsetOf(f)
		if aitw.SubsetFromPath(f) != "" || (i > 0 && s != subset) {
			return ""
		}
		subset = s
	}
	return subset
}

// cacheNotes adds the feature cache's troubles to the summary line.
func cacheNotes(sum runner.Summary) string {
	var s string
	if sum.CacheDamaged > 0 {
		s += fmt.Sprintf(", %d damaged entries recomputed", sum.CacheDamaged)
	}
	if sum.CacheWriteFailed {
		s += " (new features not cached: see the warning above)"
	}
	return s
}

// newRunInfo records what a run predicts with: the bundle, the effective
// settings and the data.
func newRunInfo(modelDir string, set engine.Settings, hist runner.History, batch int, files []string, df dataFlags, sh aitw.Shard) (*runinfo.Info, error) {
	model, man, err := runinfo.ModelOf(modelDir)
	if err != nil {
		return nil, err
	}
	var named struct {
		Action struct {
			ScrollMap string `json:"scroll_map"`
		} `json:"action"`
	}
	json.Unmarshal(man, &named) // the bundle loaded, so the manifest parses
	scroll, _ := action.ParseScrollMap(named.Action.ScrollMap)
	data, err := runinfo.DataFiles(files)
	if err != nil {
		return nil, err
	}
	in := &runinfo.Info{
		Format: runinfo.FormatVersion, Version: runinfo.Version(),
		Model: model,
		Options: runinfo.Options{
			History: string(hist), HistoryWindow: set.HistoryWindow, Truncation: set.Truncation.String(),
			MaxNewTokens: set.MaxNewTokens, Decoding: set.Decoding.String(), Constrained: set.Constrained,
			Provider: string(set.Provider), GraphOpt: string(set.GraphOptimization), Batch: batch,
			ExactFP32: set.ExactFP32,
			ScrollMap: scroll.String(),
		},
		Data:    runinfo.Data{Files: data, Subset: recordedSubset(files, df.subset), Split: df.split},
		Started: time.Now().UTC(),
	}
	if df.splits != "" {
		in.Data.Splits, _ = filepath.Abs(df.splits)
	}
	if sh.N > 1 {
		in.Data.Shard = sh.String()
	}
	return in, nil
}

// modelFingerprint keys the feature cache: the vision graph's SHA-256 from
// the bundle manifest, or the manifest's own hash.
func modelFingerprint(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return dir
	}
	var m struct {
		Files struct {
			Vision struct {
				SHA256 string `json:"sha256"`
			} `json:"vision"`
		} `json:"files"`
		Preprocess json.RawMessage `json:"preprocess"`
	}
	if json.Unmarshal(b, &m) == nil && m.Files.Vision.SHA256 != "" {
		return "vision:" + m.Files.Vision.SHA256 + ":" + string(m.Preprocess)
	}
	h := sha256.Sum256(b)
	return "manifest:" + hex.EncodeToString(h[:])
}

func runEvalScore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval score", flag.ContinueOnError)
	var df dataFlags
	df.add(fs, "gold", "gold data")
	var preds listFlag
	fs.Var(&preds, "pred", "predictions: an eval run --out directory or a JSONL file ({\"episode_id\", \"step_id\", \"action_type\", \"touch_point\", \"lift_point\", \"typed_text\"} per line); repeat or comma-separate to merge shards (their run.json must agree, no step twice); required")
	protocol := fs.String("protocol", "aitw", "scoring rules: aitw (AITW's matcher on the raw gold) or autoui (the number Auto-GUI's main.py prints: gold rewritten as training targets; see docs/eval.md)")
	scrollMap := fs.String("scroll-map", "", "with --protocol autoui, how gold swipes are rewritten: fixed (current Auto-GUI) or legacy (pre-2024: left/right as up/down, what the released checkpoints learned); default: the map the run's prompts used (run.json), else fixed")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	perStep := fs.String("per-step", "", "write {\"episode_id\", \"step_id\", \"match\", \"type_match\"} per gold step to this JSONL file")
	htmlOut := fs.String("html", "", "write a self-contained HTML report (table, confusion matrix, annotated screens) to this file")
	samples := fs.Int("html-samples", 12, "right and wrong steps shown in the HTML report (each)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui eval score --gold PATHS --pred DIR|FILE [--pred ...] [--protocol aitw|autoui] [--json] [--per-step FILE] [--html FILE] [flags]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(splitList(preds)) == 0 {
		return usageErrorf("--pred is required (a run directory or a JSONL file)")
	}
	if *samples < 0 {
		return usageErrorf("--html-samples %d: want 0 or more", *samples)
	}
	if err := df.required("gold"); err != nil {
		return err
	}
	var so score.Options
	var err error
	if so.Protocol, err = score.ParseProtocol(*protocol); err != nil {
		return usageErrorf("--protocol: %w", err)
	}
	if so.ScrollMap, err = action.ParseScrollMap(*scrollMap); err != nil {
		return usageErrorf("--scroll-map: %w", err)
	}
	ps, err := runinfo.ReadPredictions(splitList(preds))
	if err != nil {
		return err
	}
	for _, src := range ps.Sources {
		if src.Info != nil && src.Info.Options.Replay != "" {
			return fmt.Errorf("%s was made with eval run --replay %q (benchmarking: every prediction is the replayed action, not the model's): not scored", src.Path, src.Info.Options.Replay)
		}
	}
	for _, n := range ps.Notes {
		fmt.Fprintln(os.Stderr, n)
	}
	info := ps.Sources[0].Info
	if info != nil {
		df.defaultSubset = info.Data.Subset
		if *scrollMap == "" && info.Options.ScrollMap != "" {
			// main.py scores with the map its prompts were written with.
			so.ScrollMap, _ = action.ParseScrollMap(info.Options.ScrollMap)
		}
	}
	files, ro, ids, err := df.open()
	if err != nil {
		return err
	}
	if ids != nil {
		ro.Keep = func(id string) bool { return ids[id] }
	}
	// The episodes are sorted and the report's screens looked up by step,
	// so reading files at once changes nothing but the time: a gzip stream
	// inflates on one core. A fixed count, so that the first problems
	// listed do not depend on the machine.
	ro.Interleave = scoreReadFiles
	eps, st, err := aitw.LoadEpisodes(files, ro)
	if err != nil {
		return skipHint(err)
	}
	df.report(os.Stderr, st)
	if len(eps) == 0 {
		return errors.New("no gold episodes selected")
	}
	rep, results := score.Score(eps, ps.ByStep, so)
	rep.About = about(df, ps)
	if so.Protocol == score.AutoUI && info != nil {
		if rep.PaperDifferences = score.PaperDifferences(info, so.ScrollMap); len(rep.PaperDifferences) > 0 {
			fmt.Fprintf(os.Stderr, "autoui eval score: warning: the run is not Auto-GUI's main.py setup, so this is not the paper's number: %s (docs/eval.md, \"Reproducing a paper number\")\n",
				strings.Join(rep.PaperDifferences, "; "))
		}
	}
	if *perStep != "" {
		if err := atomicfile.Write(*perStep, func(w io.Writer) error { return score.WritePerStep(w, results) }); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		right, wrong := report.Sample(results, *samples, 1)
		rs, ws, err := report.Screens(files, ro, right, wrong)
		if err != nil {
			return err
		}
		err = atomicfile.Write(*htmlOut, func(w io.Writer) error {
			return report.WriteHTML(w, rep, rs, ws, report.Options{Title: "AITW evaluation", Notes: rep.Describe()})
		})
		if err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, line := range rep.Describe() {
		fmt.Println(line)
	}
	fmt.Println()
	return rep.WriteTable(os.Stdout)
}

// splitList splits comma-separated values of a repeatable flag.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// about is the report's provenance: the gold, the predictions and the run
// that made them.
func about(df dataFlags, ps *runinfo.Predictions) *score.About {
	a := &score.About{Date: time.Now().UTC().Format(time.RFC3339), Gold: df.paths, Split: df.split, Notes: ps.Notes}
	for _, s := range ps.Sources {
		a.Predictions = append(a.Predictions, s.Path)
	}
	if len(ps.Sources) > 0 && ps.Sources[0].Info != nil {
		run := *ps.Sources[0].Info
		if len(ps.Sources) > 1 {
			run.Data.Shard = fmt.Sprintf("%d shards merged", len(ps.Sources))
		}
		a.Run = &run
	}
	return a
}

// presetFlags describes what --preset autoui sets, in flag form.
func presetFlags() string {
	var parts []string
	for _, f := range autouiPreset() {
		parts = append(parts, f.String())
	}
	return strings.Join(parts, ", ")
}

type presetFlag struct{ name, value string }

// String is the flag as it is typed (a boolean needs its "=").
func (f presetFlag) String() string {
	if f.value == "true" || f.value == "false" {
		return "--" + f.name + "=" + f.value
	}
	return "--" + f.name + " " + f.value
}

// autouiPreset is runinfo.AutoUIPreset as the flags that set it.
func autouiPreset() []presetFlag {
	p := runinfo.AutoUIPreset
	return []presetFlag{
		{"history", p.History}, {"history-window", strconv.Itoa(p.HistoryWindow)}, {"truncation", p.Truncation},
		{"max-new-tokens", strconv.Itoa(p.MaxNewTokens)}, {"constrain", strconv.FormatBool(p.Constrained)},
	}
}

// applyPreset sets the flags a --preset sets. A flag given with another
// value is refused rather than silently overridden either way.
func applyPreset(fs *flag.FlagSet, name string) error {
	switch name {
	case "":
		return nil
	case runinfo.AutoUIPreset.Preset:
	default:
		return usageErrorf("--preset %q: want autoui", name)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, pf := range autouiPreset() {
		f := fs.Lookup(pf.name)
		if given[pf.name] && f.Value.String() != pf.value {
			yours := presetFlag{pf.name, f.Value.String()}
			return usageErrorf("--preset %s sets %s; drop %s", name, pf, yours)
		}
		if err := fs.Set(pf.name, pf.value); err != nil {
			return err
		}
	}
	return nil
}

// skipHint adds how to go on past bad gold data to an error that
// --skip-corrupt would have skipped.
func skipHint(err error) error {
	var se *aitw.SkippableError
	if errors.As(err, &se) {
		return fmt.Errorf("%w (--skip-corrupt skips it and goes on)", err)
	}
	return err
}
