package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/autoui/autoui/atomicfile"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/bench/probe"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

func init() {
	register(command{name: "bench", summary: "measure latency and memory per pipeline stage, beside this machine's limits ('bench tune': sweep session settings)", run: runBench})
}

func runBench(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "tune" {
		return runBenchTune(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "serve" {
		return runBenchServe(ctx, args[1:])
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	mf := addModelFlags(fs)
	runs := fs.Int("runs", 3, "measured passes over the fixed cases (3 cases per pass)")
	warmup := fs.Int("warmup", 1, "discarded passes before measuring")
	tokens := fs.Int("tokens", 80, "generated tokens per action: </s> is suppressed until then, so every runner decodes the same length")
	screens := fs.String("screens", "models/testdata/screens", "directory of PNG/JPEG screenshots for the cases (a synthetic screen if none)")
	name := fs.String("name", "", "model label in reports (default: the manifest's size)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout (the table goes to stderr)")
	benchstatOut := fs.String("benchstat", "", "write benchstat-compatible lines to this file (- for stdout)")
	peerInputs := fs.String("peer-inputs", "", "write the cases and prompts for scripts/peers to this JSON file")
	doProbe := fs.Bool("probe", true, "measure memory bandwidth and matmul throughput and print measured/bound per stage")
	probeMB := fs.Int("probe-mb", 512, "buffer size of the bandwidth probe, in MiB (far above the last-level cache; the device probe streams a weight of this size)")
	batch := fs.Int("batch", 0, "screens per PredictBatch call (copies of the cases, decoded in parallel), reporting screens/s; 0: one Predict per case")
	concurrent := fs.Int("concurrent-batches", 1, "with --batch: measured batches in the engine at once, as serve --concurrent-batches runs them; adds the screens/s over the run")
	pipeline := fs.Bool("pipeline", false, "with --batch: decode and resize the next batch's screens on the host's cores while the engine predicts this one, as eval run reads ahead; adds the screens/s over the run")
	probeOn := fs.String("probe-on", "", "where the bounds' probes run: host (memory bandwidth, ORT's CPU matmul) or device (through the session's execution provider: run overhead, weight streaming, matmul); default device under --provider cuda, else host")
	fs.StringVar(&mf.profile, "ort-profile", "", "write ONNX Runtime's per-node profile of every graph to PREFIX-<graph>_<time>.json (every run, warm-up included; for chrome://tracing or Perfetto)")
	replay := fs.String("replay", "", "decode this action text in every case instead of --tokens forced tokens: real decoder calls, the model's choices replaced, "+
		"so speculative decoding takes the calls a trained model would ('typical' for a typical Auto-UI tap; sets --tokens to its length + </s>)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui bench --model DIR [--runs N] [--warmup N] [--threads N] [--provider cpu|cuda] [--tokens 80 | --replay typical] [--batch N] [--json]")
		fmt.Fprintln(fs.Output(), "       autoui bench tune --model DIR [flags]   (sweep ONNX Runtime session settings; -h for its flags)")
		fmt.Fprintln(fs.Output(), "       autoui bench serve --server URL [flags] (load a running autoui serve; -h for its flags)")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *asJSON && *benchstatOut == "-" {
		return usageErrorf("--json and --benchstat - both print on stdout: give --benchstat a file")
	}
	if err := checkPasses(*runs, *warmup, *tokens); err != nil {
		return err
	}
	if *batch < 0 || *batch > maxBenchBatch {
		return usageErrorf("--batch %d: want 0 (one Predict per case) to %d", *batch, maxBenchBatch)
	}
	if *probeMB < 1 || *probeMB > maxProbeMB {
		return usageErrorf("--probe-mb %d: want 1 to %d", *probeMB, maxProbeMB)
	}
	if err := checkOutputs(map[string]string{"--benchstat": *benchstatOut, "--peer-inputs": *peerInputs}); err != nil {
		return err
	}
	if *concurrent < 1 || (*concurrent > 1 && *batch == 0) {
		return usageErrorf("--concurrent-batches %d: want 1, or more with --batch", *concurrent)
	}
	if *pipeline && (*batch == 0 || *concurrent > 1) {
		return usageErrorf("--pipeline: needs --batch, and one batch at a time (no --concurrent-batches)")
	}
	if mf.profile != "" {
		if st, err := os.Stat(filepath.Dir(mf.profile)); err != nil || !st.IsDir() {
			return usageErrorf("--ort-profile %s: no directory %s to write the profiles in", mf.profile, filepath.Dir(mf.profile))
		}
		// ORT writes a profile when its session closes, after the report
		defer func() {
			files, _ := filepath.Glob(mf.profile + "-*.json")
			fmt.Fprintf(os.Stderr, "bench: %d ORT profiles in %s-*.json (python -m scripts.ort_profile summarizes them)\n", len(files), mf.profile)
		}()
	}
	provider, _ := engine.ParseProvider(mf.provider) // a bad value is refused with the model options below
	onDevice := provider == engine.ProviderCUDA
	switch *probeOn {
	case "":
	case "host", "device":
		onDevice = *probeOn == "device"
	default:
		return usageErrorf("--probe-on %q: want host or device", *probeOn)
	}
	cases, err := bench.DefaultCases(*screens)
	if err != nil {
		return err
	}
	// Every bench request sets its own length (--tokens or the replay's).
	mf.maxTokens = engine.MaxNewTokensLimit
	p, closeFn, err := mf.open()
	if err != nil {
		return err
	}
	defer closeFn()
	threads := mf.threads
	if threads == 0 {
		threads = engine.PhysicalCores()
	}
	label := *name
	if label == "" {
		label = p.Bundle().Manifest.Model.Size
	}
	opts := bench.Options{Runs: *runs, Warmup: *warmup, Tokens: *tokens, Batch: *batch, Concurrent: *concurrent, Pipeline: *pipeline}
	if *pipeline {
		opts.Shrink = p.Shrink
	}
	if *replay != "" {
		if opts.ReplayText, opts.Replay, err = bench.ReplayTokens(p.Tokenizer(), *replay); err != nil {
			return fmt.Errorf("--replay: %w", err)
		}
		opts.Tokens = len(opts.Replay) + 1
		*tokens = opts.Tokens
	}
	var actions []bench.Action
	var batches []bench.Batch
	if *batch > 0 {
		fmt.Fprintf(os.Stderr, "bench: %s, batches of %d screens (%d cases round-robin) x (%d warm-up + %d runs), %d tokens each...\n", label, *batch, len(cases), *warmup, *runs, *tokens)
		actions, batches, err = bench.RunBatch(ctx, p, cases, opts)
	} else {
		fmt.Fprintf(os.Stderr, "bench: %s, %d cases x (%d warm-up + %d runs), %d tokens each...\n", label, len(cases), *warmup, *runs, *tokens)
		actions, err = bench.Run(ctx, p, cases, opts)
	}
	interrupted, err := keepMeasured(ctx, err, len(actions), "actions")
	if err != nil {
		return err
	}
	rep := bench.NewReport("autoui-go", label, threads, mf.provider, opts, cases, actions)
	rep.Batches = batches
	rep.Bundle = mf.model
	rep.Runtime = engine.RuntimeVersion()
	rep.Decoding = mf.decoding
	rep.CUDAGraph, rep.CaptureRows = mf.cudaGraph, p.CaptureRows()
	rep.CapturedGraphs[0], rep.CapturedGraphs[1] = p.CapturedGraphs()
	if rep.Decoding == "" {
		rep.Decoding = engine.DecodeSpeculative.String()
	}
	rep.Memory = bench.ReadMemory() // before the probe's buffer inflates RSS
	if *doProbe && interrupted == nil {
		shapes := probe.ShapesOf(p.Bundle())
		shapes.Batch = *batch
		var m probe.Machine
		var info *bench.MachineInfo
		where := "host"
		if onDevice {
			where = "device"
			m, info, err = probeDevice(mf, threads, *probeMB, shapes)
		} else {
			m, info, err = probeHost(threads, *probeMB, shapes)
		}
		if err != nil {
			// the measured actions are worth more than their bounds: report them without
			fmt.Fprintf(os.Stderr, "autoui bench: warning: the %s probe failed, so the report has no bounds: %v\n", where, err)
		} else {
			rep.AddLimits(shapes, m, info)
		}
	}
	table := io.Writer(os.Stdout)
	if *asJSON {
		table = os.Stderr // stdout holds the JSON alone
	}
	if err := rep.WriteTable(table); err != nil {
		return err
	}
	if *benchstatOut != "" {
		if err := writeBenchOutput(*benchstatOut, rep.WriteBenchstat); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := printJSON(rep.JSON); err != nil {
			return err
		}
	}
	if *peerInputs != "" && interrupted == nil {
		if err := bench.WritePeerInputs(*peerInputs, cases, actions, *tokens); err != nil {
			return err
		}
	}
	return interrupted
}

// Bounds of bench's flags: a batch as large as eval run's and serve's, and a
// probe buffer far past any cache that still fits a small machine.
const (
	maxBenchBatch = engine.StreamRowsLimit
	maxProbeMB    = 16 << 10
)

// checkPasses refuses pass counts that measure nothing or less than asked.
func checkPasses(runs, warmup, tokens int) error {
	switch {
	case runs < 1:
		return usageErrorf("--runs %d: want 1 or more", runs)
	case warmup < 0:
		return usageErrorf("--warmup %d: want 0 or more", warmup)
	case tokens < 1:
		return usageErrorf("--tokens %d: want 1 or more", tokens)
	}
	return nil
}

// checkOutputs refuses, before anything is measured, output files that
// could not be written at the end ("" is none, "-" stdout).
func checkOutputs(paths map[string]string) error {
	for flag, path := range paths {
		if path == "" || path == "-" {
			continue
		}
		if err := atomicfile.Check(path); err != nil {
			return usageErrorf("%s: %w", flag, err)
		}
	}
	return nil
}

// keepMeasured turns an interruption with n results measured into
// (interrupted, nil): the caller reports what was measured, then returns
// interrupted. Any other error, or none measured, is returned as it is.
func keepMeasured(ctx context.Context, err error, n int, what string) (interrupted, _ error) {
	if err == nil || ctx.Err() == nil || n == 0 {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "autoui bench: interrupted: reporting the %d %s measured before it (%v)\n", n, what, err)
	return interruptedError{"the report holds what was measured before the interruption"}, nil
}

// probeHost measures this machine's memory bandwidth and ORT's CPU matmul
// rates (int8 too for an int8 bundle).
func probeHost(threads, probeMB int, shapes probe.Shapes) (probe.Machine, *bench.MachineInfo, error) {
	fmt.Fprintln(os.Stderr, "bench: probing memory bandwidth and matmul throughput...")
	t := time.Now()
	bw := probe.MeasureBandwidth(int64(probeMB)<<20, threads, 5)
	bwTime := time.Since(t)
	gemm, err := probe.MeasureGEMM(probe.DefaultGEMM, threads, 10)
	if err != nil {
		return probe.Machine{}, nil, err
	}
	info := &bench.MachineInfo{CPU: probe.CPUName(), Threads: threads, Bandwidth: bw, GEMM: gemm, BandwidthTime: bwTime}
	if shapes.Int8() {
		if info.GEMMInt8, err = probe.MeasureGEMMInt8(probe.DefaultGEMM, threads, 10); err != nil {
			return probe.Machine{}, nil, err
		}
	}
	return probe.Machine{Bandwidth: bw.Best, GEMM: gemm.Best, GEMMInt8: info.GEMMInt8.Best}, info, nil
}

// probeDevice measures the device of the session's execution provider (the
// GPU under cuda) through ORT with the engine's session options: the bounds
// of GPU stages must come from the GPU, not the host.
func probeDevice(mf *modelFlags, threads, probeMB int, shapes probe.Shapes) (probe.Machine, *bench.MachineInfo, error) {
	o, err := mf.options()
	if err != nil {
		return probe.Machine{}, nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: probing the %s device through ONNX Runtime (run overhead, weight streaming, matmul)...\n", o.Session.Provider)
	dp := probe.DefaultDeviceProbe
	if o.Session.Provider != engine.ProviderCUDA {
		dp.GEMM = probe.DefaultGEMM // a GPU-sized product takes seconds on a CPU
	}
	dp.StreamMiB = probeMB
	dp.Half = shapes.HalfVision || shapes.HalfText
	dev, err := probe.MeasureDevice(o.Session.ORT, dp)
	if err != nil {
		return probe.Machine{}, nil, err
	}
	info := &bench.MachineInfo{CPU: probe.CPUName(), Threads: threads, Device: &dev, DeviceProvider: string(o.Session.Provider)}
	return dev.Machine(), info, nil
}

// printJSON prints a report's JSON on stdout (--json, as in every command).
func printJSON(report func() ([]byte, error)) error {
	b, err := report()
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}

// writeBenchOutput writes with fn to path, or to stdout for "-".
func writeBenchOutput(path string, fn func(io.Writer) error) error {
	if path == "-" {
		return fn(os.Stdout)
	}
	return atomicfile.Write(path, fn)
}

// runBenchTune sweeps ONNX Runtime session settings on the text path of one
// bundle: every combination of the --try-* lists, each checked for the
// default setting's tokens; the summary names the fastest.
func runBenchTune(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench tune", flag.ContinueOnError)
	mf := addModelFlags(fs)
	runs := fs.Int("runs", 5, "measured passes over the cases per setting")
	warmup := fs.Int("warmup", 1, "discarded passes per setting after opening it")
	tokens := fs.Int("tokens", 80, "generated tokens per action (</s> suppressed until then)")
	ncases := fs.Int("cases", 3, "prompts per pass: the first N of the fixed cases (0, 4 and 8 previous actions)")
	quick := fs.Bool("quick", false, "smoke test: 2 cases, 8 tokens, 1 run, no warm-up (overrides --runs, --warmup, --tokens, --cases)")
	tryThreads := fs.String("try-threads", "1,2", "intra-op thread counts to try")
	trySpin := fs.String("try-spin", "on,off", "intra-op spin-waiting values to try (off, decoder, on)")
	tryArena := fs.String("try-arena", "on,off", "CPU memory arena values to try")
	tryMemPattern := fs.String("try-mempattern", "on", "memory pattern values to try")
	tryPrepack := fs.String("try-prepack", "on", "weight prepacking values to try (off: kernels use the initializers as stored)")
	tryOpt := fs.String("try-opt", "basic,extended,all", "graph optimisation levels to try")
	benchstatOut := fs.String("benchstat", "", "write benchstat lines to this file (- for stdout)")
	asJSON := fs.Bool("json", false, "print the sweep as JSON on stdout (the summary goes to stderr)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui bench tune --model DIR [--runs N] [--quick] [--try-threads 1,2] [--try-spin on,off] [--try-arena on,off] [--try-opt basic,extended,all] [--benchstat FILE|-] [--json]")
		fmt.Fprintln(fs.Output(), "The reference is the default setting (threads = physical cores, spin off, arena and memory pattern on, opt=all); --threads, --graph-opt and --spin are not used here.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var conflict error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "threads", "graph-opt", "spin":
			conflict = usageErrorf("--%s: bench tune sweeps it; use --try-threads / --try-opt / --try-spin", f.Name)
		}
	})
	if conflict != nil {
		return conflict
	}
	if *asJSON && *benchstatOut == "-" {
		return usageErrorf("--json and --benchstat - both print on stdout: give --benchstat a file")
	}
	var grid bench.Grid
	var err error
	if grid.Threads, err = bench.ParseThreads(*tryThreads); err != nil {
		return usageErrorf("--try-threads: %w", err)
	}
	if grid.Spin, err = bench.ParseSpins(*trySpin); err != nil {
		return usageErrorf("--try-spin: %w", err)
	}
	if grid.Arena, err = bench.ParseOnOff(*tryArena); err != nil {
		return usageErrorf("--try-arena: %w", err)
	}
	if grid.Prepack, err = bench.ParseOnOff(*tryPrepack); err != nil {
		return usageErrorf("--try-prepack: %w", err)
	}
	if grid.MemPattern, err = bench.ParseOnOff(*tryMemPattern); err != nil {
		return usageErrorf("--try-mempattern: %w", err)
	}
	if grid.Opt, err = bench.ParseOpts(*tryOpt); err != nil {
		return usageErrorf("--try-opt: %w", err)
	}
	if err := checkPasses(*runs, *warmup, *tokens); err != nil {
		return err
	}
	if err := checkOutputs(map[string]string{"--benchstat": *benchstatOut}); err != nil {
		return err
	}
	opts := bench.TuneOptions{Options: bench.Options{Runs: *runs, Warmup: *warmup, Tokens: *tokens}, Reference: bench.DefaultSetting(), Progress: os.Stderr}
	if *quick {
		opts.Options = bench.Options{Runs: 1, Warmup: 0, Tokens: 8}
		*ncases = 2
	}
	cases, err := bench.DefaultCases("") // the text path ignores the screen
	if err != nil {
		return err
	}
	if *ncases < 1 || *ncases > len(cases) {
		return usageErrorf("--cases %d: want 1..%d", *ncases, len(cases))
	}
	cases = cases[:*ncases]

	if mf.model == "" {
		return usageErrorf("--model is required (a bundle directory, e.g. bench-models/base-vtiny)")
	}
	mf.maxTokens = engine.MaxNewTokensLimit // the requests set --tokens
	base, err := mf.options()
	if err != nil {
		return err
	}
	lo := models.LoadOptions{}
	if mf.noVerify {
		lo.Verify = models.VerifySizes
	}
	b, err := models.Load(mf.model, lo) // once: checksums are not recomputed per setting
	if err != nil {
		return err
	}
	opts.Features = bench.SyntheticFeatures(b.Manifest.Model.ImageDim)
	open := func(so engine.SessionOptions) (predict.Predictor, func(), error) {
		o := base
		o.Session = so
		p, err := engine.NewPredictor(b, o)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { p.Close() }, nil
	}
	settings := grid.Settings()
	fmt.Fprintf(os.Stderr, "bench tune: %s, %d settings + reference, %d cases x (%d warm-up + %d runs), %d tokens each...\n",
		mf.model, len(settings), len(cases), opts.Warmup, opts.Runs, opts.Tokens)
	rep, err := bench.Tune(ctx, open, base.Session, cases, settings, opts)
	n := 0
	if rep != nil {
		n = len(rep.Results)
	}
	interrupted, err := keepMeasured(ctx, err, n, "settings")
	if err != nil {
		return err
	}
	rep.Model = b.Manifest.Model.Size
	if b.Manifest.Name != "" {
		rep.Model = b.Manifest.Name
	}
	if *benchstatOut != "" {
		if err := writeBenchOutput(*benchstatOut, rep.WriteBenchstat); err != nil {
			return err
		}
	}
	if *asJSON {
		if err := printJSON(rep.JSON); err != nil {
			return err
		}
	}
	w := io.Writer(os.Stdout)
	if *benchstatOut == "-" || *asJSON {
		w = os.Stderr // keep stdout to the benchstat lines or the JSON
	}
	if err := rep.WriteSummary(w); err != nil {
		return err
	}
	if n := rep.Mismatches(); n > 0 {
		return fmt.Errorf("%d setting(s) gave tokens different from the reference", n)
	}
	return interrupted
}
