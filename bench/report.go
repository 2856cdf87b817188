package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/autoui/autoui/bench/probe"
)

// Report is one benchmark of one bundle: per-stage statistics, memory, and
// the physical limits when the probes ran.
type Report struct {
	Runner   string
	Model    string
	Bundle   string
	Runtime  string // ONNX Runtime version
	Decoding string // the engine's decoding strategy (greedy or speculative)
	// CUDAGraph: decoded through the static decoder graph (--cuda-graph);
	// CapturedGraphs the CUDA graphs captured then, decoder and vision;
	// CaptureRows the most rows a batch ran on them (0: every batch; -1
	// without CUDAGraph).
	CUDAGraph      bool
	CapturedGraphs [2]int
	CaptureRows    int
	Threads        int
	Provider       string
	Options        Options
	Cases          []Case
	Actions        []Action
	Stages         map[string]Summary
	// Batches are the measured PredictBatch calls of a --batch run (RunBatch).
	Batches []Batch
	Memory  Memory
	// Machine and Limits are set by AddLimits.
	Machine *MachineInfo
	Limits  []Limit
}

// MachineInfo is what the probes measured.
type MachineInfo struct {
	CPU           string
	Threads       int
	Bandwidth     probe.BandwidthResult
	GEMM          probe.GEMMResult
	GEMMInt8      probe.GEMMResult // int8 bundles only
	BandwidthTime time.Duration
	// Device, when set, is the device probe's result (through the session's
	// provider, named by DeviceProvider): the bounds come from it, and the
	// host fields above are not measured.
	Device         *probe.DeviceResult
	DeviceProvider string
}

// Limit is one stage's measured time beside its lower bound.
type Limit struct {
	Stage    string
	Measured time.Duration // median over actions
	Bound    time.Duration // median over actions (bounds depend on prompt length)
	Ratio    float64       // median over actions of measured / bound
	Basis    string        // "bytes" (bandwidth-bound), "flops" (compute-bound), "mixed" (depends on the prompt) or "sum"
}

// NewReport summarizes measured actions.
func NewReport(runner, model string, threads int, provider string, opts Options, cases []Case, actions []Action) *Report {
	r := &Report{Runner: runner, Model: model, Threads: threads, Provider: provider, Options: opts,
		Cases: cases, Actions: actions, Stages: map[string]Summary{}}
	for _, st := range Stages {
		var s []time.Duration
		for _, a := range actions {
			if d, ok := a.Stages[st]; ok {
				s = append(s, d)
			}
		}
		if len(s) > 0 {
			r.Stages[st] = Summarize(s)
		}
	}
	return r
}

// AddLimits computes each model stage's lower bound for every action (they
// depend on its prompt length) from the bundle's shapes and the machine's
// measured bandwidth and matmul throughput. Decoder calls are bounded as one
// token each; a speculative call verifying several tokens reads the same
// weights, so its bound is the same up to its small extra arithmetic.
func (r *Report) AddLimits(sh probe.Shapes, m probe.Machine, info *MachineInfo) {
	r.Machine = info
	type acc struct {
		measured, bound []time.Duration
		ratio           []float64
		basis           string
	}
	per := map[string]*acc{}
	add := func(stage string, measured time.Duration, cost probe.Cost, bound time.Duration) {
		if bound <= 0 || measured <= 0 {
			return
		}
		a := per[stage]
		if a == nil {
			a = &acc{}
			per[stage] = a
		}
		basis := "bytes"
		if m.ComputeBound(cost) {
			basis = "flops"
		}
		switch a.basis {
		case "":
			a.basis = basis
		case basis:
		default:
			a.basis = "mixed" // short prompts stream weights, long ones compute
		}
		a.measured = append(a.measured, measured)
		a.bound = append(a.bound, bound)
		a.ratio = append(a.ratio, float64(measured)/float64(bound))
	}
	for _, act := range r.Actions {
		n := act.SourceTokens
		var modelBound time.Duration
		if c := sh.Image(); c.FLOPs > 0 {
			b := m.Bound(c)
			add(StageVision, act.Stages[StageVision], c, b)
			modelBound += b
		}
		// the encoder and fusion calls' own shape where known: a batch's
		// prompts are encoded in groups of similar length
		enc, encN := sh, n
		if act.EncoderRows > 0 {
			enc.Batch, encN = act.EncoderRows, act.EncoderLength
		}
		for _, st := range []struct {
			name string
			cost probe.Cost
		}{{StageEncoder, enc.Encoder(encN)}, {StageFusion, enc.Fusion(encN)}, {StageFirstStep, sh.DecodeStep(0, n)}} {
			b := m.Bound(st.cost)
			add(st.name, act.Stages[st.name], st.cost, b)
			modelBound += b
		}
		if act.DecoderCalls > 1 {
			var later time.Duration
			var cost probe.Cost
			for past := 1; past < act.DecoderCalls; past++ {
				c := sh.DecodeStep(past, n)
				later += m.Bound(c)
				cost = cost.Plus(c)
			}
			steps := time.Duration(act.DecoderCalls - 1)
			add(StageDecodeStep, act.Stages[StageDecodeStep], cost, later/steps)
			modelBound += later
		}
		model := act.Stages[StageVision] + act.Stages[StageEncoder] + act.Stages[StageFusion] + act.Stages[StageFirstStep] + act.Stages[StageLaterSteps]
		add("model_stages", model, probe.Cost{}, modelBound)
	}
	r.Limits = nil
	for _, st := range []string{StageVision, StageEncoder, StageFusion, StageFirstStep, StageDecodeStep, "model_stages"} {
		a := per[st]
		if a == nil {
			continue
		}
		basis := a.basis
		if st == "model_stages" {
			basis = "sum"
		}
		r.Limits = append(r.Limits, Limit{Stage: st, Measured: Summarize(a.measured).Median,
			Bound: Summarize(a.bound).Median, Ratio: medianFloat(a.ratio), Basis: basis})
	}
}

// EncoderCallsPerBatch is how many encoder calls a measured batch made on
// average (its prompts are encoded in groups: each action's group of
// EncoderRows shares one), or 0 when the runner does not say.
func (r *Report) EncoderCallsPerBatch() float64 {
	if len(r.Batches) == 0 {
		return 0
	}
	calls := 0.0
	for _, a := range r.Actions {
		if a.EncoderRows <= 0 {
			return 0
		}
		calls += 1 / float64(a.EncoderRows)
	}
	return calls / float64(len(r.Batches))
}

// RunThroughput is the measured batches' screens over the time from the
// first's start to the last's end: with Options.Concurrent batches at once,
// what the engine served (decoding included; each batch's own rate counts
// the others' time too).
func (r *Report) RunThroughput() float64 {
	if len(r.Batches) == 0 {
		return 0
	}
	first, last := r.Batches[0].Start, r.Batches[0].End
	screens := 0
	for _, b := range r.Batches {
		if b.Start.Before(first) {
			first = b.Start
		}
		if b.End.After(last) {
			last = b.End
		}
		screens += b.Screens
	}
	if !last.After(first) {
		return 0
	}
	return float64(screens) / last.Sub(first).Seconds()
}

// Throughput is the distribution of screens/s over the measured batches.
type Throughput struct{ Min, Median, Max float64 }

// Throughput summarizes the batches' screens/s (zero without batches).
func (r *Report) Throughput() Throughput { return r.throughput(Batch.ScreensPerSecond) }

// EngineThroughput summarizes the batches' screens/s without decoding.
func (r *Report) EngineThroughput() Throughput { return r.throughput(Batch.EngineScreensPerSecond) }

// AheadThroughput summarizes the batches' screens/s without decoding or
// resizing.
func (r *Report) AheadThroughput() Throughput { return r.throughput(Batch.AheadScreensPerSecond) }

func (r *Report) throughput(rate func(Batch) float64) Throughput {
	var v []float64
	for _, b := range r.Batches {
		v = append(v, rate(b))
	}
	if len(v) == 0 {
		return Throughput{}
	}
	t := Throughput{Min: v[0], Max: v[0], Median: medianFloat(v)}
	for _, x := range v {
		t.Min, t.Max = min(t.Min, x), max(t.Max, x)
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// JSON is the --json document; scripts/peers/compare.py reads it beside the
// peers' documents, which carry the same top-level fields.
func (r *Report) JSON() ([]byte, error) {
	type stageJSON struct {
		N        int     `json:"n"`
		MinMS    float64 `json:"min_ms"`
		MedianMS float64 `json:"median_ms"`
		P90MS    float64 `json:"p90_ms"`
	}
	stages := map[string]stageJSON{}
	for name, s := range r.Stages {
		stages[name] = stageJSON{s.N, round3(ms(s.Min)), round3(ms(s.Median)), round3(ms(s.P90))}
	}
	var tokens, calls []float64
	for _, a := range r.Actions {
		tokens = append(tokens, float64(a.Tokens))
		calls = append(calls, float64(a.DecoderCalls))
	}
	type actionJSON struct {
		Action
		StagesMS map[string]float64 `json:"stages_ms"`
	}
	actions := make([]actionJSON, len(r.Actions))
	for i, a := range r.Actions {
		m := map[string]float64{}
		for k, v := range a.Stages {
			m[k] = round3(ms(v))
		}
		actions[i] = actionJSON{a, m}
	}
	type caseJSON struct {
		ID           string `json:"id"`
		Screen       string `json:"screen"`
		Goal         string `json:"goal"`
		History      int    `json:"history_actions"`
		SourceTokens int    `json:"source_tokens"`
	}
	var cases []caseJSON
	for _, c := range r.Cases {
		cj := caseJSON{ID: c.ID, Screen: c.Screen, Goal: c.Goal, History: len(c.History)}
		for _, a := range r.Actions {
			if a.Case == c.ID {
				cj.SourceTokens = a.SourceTokens
				break
			}
		}
		cases = append(cases, cj)
	}
	doc := map[string]any{
		"runner":              r.Runner,
		"model":               r.Model,
		"bundle":              r.Bundle,
		"threads":             r.Threads,
		"provider":            r.Provider,
		"decoding":            r.Decoding,
		"cuda_graph":          r.CUDAGraph,
		"cuda_graphs":         map[string]int{"decoder": r.CapturedGraphs[0], "vision": r.CapturedGraphs[1]},
		"capture_rows":        r.CaptureRows,
		"runs":                r.Options.Runs,
		"warmup":              r.Options.Warmup,
		"fixed_length":        fixedLength(r.Options),
		"replay":              r.Options.ReplayText,
		"stages":              stages,
		"total_median_ms":     round3(ms(r.Stages[StageTotal].Median)),
		"text_path_median_ms": round3(ms(r.Stages[StageTextPath].Median)),
		"tokens":              medianFloat(tokens),
		"decoder_calls":       medianFloat(calls),
		"peak_rss_mb":         round3(mb(r.Memory.PeakRSS)),
		"go_heap_mb":          round3(mb(r.Memory.GoHeap)),
		"go_sys_mb":           round3(mb(r.Memory.GoSys)),
		"native_mb":           round3(mb(r.Memory.Native)),
		"ort_arena_mb":        nil, // not exposed by onnxruntime_go; native_mb includes it
		"cases":               cases,
		"actions":             actions,
		"go":                  runtime.Version(),
		"onnxruntime":         r.Runtime,
	}
	if len(r.Actions) > 0 {
		doc["generated_ids"] = r.Actions[0].IDs // peers report theirs: compare.py checks they agree
	}
	if len(r.Batches) > 0 {
		tp := r.Throughput()
		var batches []map[string]any
		for _, b := range r.Batches {
			batches = append(batches, map[string]any{"run": b.Run, "screens": b.Screens,
				"decode_ms": round3(ms(b.Decode)), "resize_ms": round3(ms(b.Resize)), "wall_ms": round3(ms(b.Wall)), "screens_per_s": round3(b.ScreensPerSecond())})
		}
		doc["batch"] = r.Batches[0].Screens
		doc["screens_per_s"] = map[string]any{"min": round3(tp.Min), "median": round3(tp.Median), "max": round3(tp.Max)}
		et := r.EngineThroughput()
		doc["engine_screens_per_s"] = map[string]any{"min": round3(et.Min), "median": round3(et.Median), "max": round3(et.Max)}
		at := r.AheadThroughput()
		doc["ahead_screens_per_s"] = map[string]any{"min": round3(at.Min), "median": round3(at.Median), "max": round3(at.Max)}
		doc["batches"] = batches
		if c := r.EncoderCallsPerBatch(); c > 0 {
			doc["encoder_calls_per_batch"] = round3(c)
		}
		doc["concurrent_batches"] = max(r.Options.Concurrent, 1)
		doc["pipelined"] = r.Options.Pipeline
		doc["run_screens_per_s"] = round3(r.RunThroughput())
	}
	if r.Machine != nil && r.Machine.Device != nil {
		d := r.Machine.Device
		doc["machine"] = map[string]any{
			"probe":            "device",
			"provider":         r.Machine.DeviceProvider,
			"cpu":              r.Machine.CPU,
			"overhead_us":      round3(float64(d.Overhead.Nanoseconds()) / 1e3),
			"bandwidth_gbps":   round3(d.Stream.Best / 1e9),
			"bandwidth_bytes":  d.Stream.Bytes,
			"gemm_gflops":      round3(d.GEMM.Best / 1e9),
			"gemm_half_gflops": round3(d.GEMMHalf.Best / 1e9),
			"gemm_shape":       []int{d.GEMM.Shape.M, d.GEMM.Shape.K, d.GEMM.Shape.N},
			"bandwidth_source": "ONNX Runtime one-row MatMul streaming a constant weight, less the run overhead, best of runs",
			"gemm_source":      "ONNX Runtime MatMul, input made on the device, summed to one number, less the run overhead, best of runs",
		}
	} else if r.Machine != nil {
		doc["machine"] = map[string]any{
			"probe":            "host",
			"cpu":              r.Machine.CPU,
			"threads":          r.Machine.Threads,
			"bandwidth_gbps":   round3(r.Machine.Bandwidth.Best / 1e9),
			"bandwidth_bytes":  r.Machine.Bandwidth.Bytes,
			"gemm_gflops":      round3(r.Machine.GEMM.Best / 1e9),
			"gemm_int8_gflops": round3(r.Machine.GEMMInt8.Best / 1e9),
			"gemm_shape":       []int{r.Machine.GEMM.Shape.M, r.Machine.GEMM.Shape.K, r.Machine.GEMM.Shape.N},
			"gemm_source":      "ONNX Runtime MatMul (generated graph, constant weight), best of runs",
		}
	}
	if r.Machine != nil {
		var lim []map[string]any
		for _, l := range r.Limits {
			lim = append(lim, map[string]any{"stage": l.Stage, "measured_ms": round3(ms(l.Measured)),
				"bound_ms": round3(ms(l.Bound)), "ratio": round3(l.Ratio), "basis": l.Basis})
		}
		doc["limits"] = lim
	}
	return json.MarshalIndent(doc, "", "  ")
}

// WriteTable prints the human-readable report.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "autoui bench: model=%s threads=%d provider=%s decoding=%s cuda_graph=%v runs=%d warmup=%d actions=%d\n",
		r.Model, r.Threads, r.Provider, r.Decoding, r.CUDAGraph, r.Options.Runs, r.Options.Warmup, len(r.Actions))
	fmt.Fprintf(w, "fixed length: %s\n", fixedLength(r.Options))
	if r.CUDAGraph {
		rows := "every batch"
		if r.CaptureRows > 0 {
			rows = fmt.Sprintf("batches of up to %d rows", r.CaptureRows)
		}
		fmt.Fprintf(w, "cuda graphs captured: decoder %d, vision %d (fixed buffers: %s)\n", r.CapturedGraphs[0], r.CapturedGraphs[1], rows)
	}
	var lens []string
	seen := map[string]bool{}
	for _, a := range r.Actions {
		if !seen[a.Case] {
			seen[a.Case] = true
			lens = append(lens, fmt.Sprintf("%s=%d", a.Case, a.SourceTokens))
		}
	}
	fmt.Fprintf(w, "prompt tokens: %s\n\n", strings.Join(lens, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tmin ms\tmedian ms\tp90 ms\t")
	for _, st := range Stages {
		s, ok := r.Stages[st]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t\n", st, ms(s.Min), ms(s.Median), ms(s.P90))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var calls []float64
	for _, a := range r.Actions {
		calls = append(calls, float64(a.DecoderCalls))
	}
	fmt.Fprintf(w, "\ntokens per action: %d   sequential decoder calls: %.0f\n", r.Options.Tokens, medianFloat(calls))
	if len(r.Batches) > 0 {
		tp := r.Throughput()
		var walls, decodes []time.Duration
		for _, b := range r.Batches {
			walls, decodes = append(walls, b.Wall), append(decodes, b.Decode)
		}
		fmt.Fprintf(w, "batch: %d screens per PredictBatch: %.2f screens/s median (%.2f-%.2f over %d batches); per batch %.1f ms, of which decoding the screens %.1f ms (%d cores)\n",
			r.Batches[0].Screens, tp.Median, tp.Min, tp.Max, len(r.Batches), ms(Summarize(walls).Median), ms(Summarize(decodes).Median), runtime.GOMAXPROCS(0))
		fmt.Fprintf(w, "engine alone (screens already decoded): %.2f screens/s median; with them resized ahead too, as eval run's read-ahead and serve's handlers give them: %.2f\n",
			r.EngineThroughput().Median, r.AheadThroughput().Median)
		if c := r.EncoderCallsPerBatch(); c > 0 {
			fmt.Fprintf(w, "prompts encoded in %.1f encoder calls per batch (groups of similar length; --prompt-groups)\n", c)
		}
		if n := min(r.Options.Concurrent, len(r.Batches)); n > 1 { // no more at once than there were
			fmt.Fprintf(w, "%d batches at once: %.2f screens/s over the run (decoding included; the per-batch rates above each count the others' time)\n",
				n, r.RunThroughput())
		}
		if r.Options.Pipeline {
			fmt.Fprintf(w, "pipelined (each batch's screens decoded and resized on the host while the engine predicts the one before, as eval run reads ahead): %.2f screens/s over the run (the per-batch rates above count each batch's decoding as if it ran before the batch)\n",
				r.RunThroughput())
		}
	}
	fmt.Fprintf(w, "peak RSS: %.0f MB   Go heap: %.1f MB   Go runtime total: %.1f MB   outside Go (ORT weights+arena, approx.): %.0f MB\n",
		mb(r.Memory.PeakRSS), mb(r.Memory.GoHeap), mb(r.Memory.GoSys), mb(r.Memory.Native))
	if r.Machine != nil {
		if d := r.Machine.Device; d != nil {
			fmt.Fprintf(w, "\ndevice probe, through ONNX Runtime's %s provider (the bounds below use it, not the host): run overhead %.1f us, weight streaming %.1f GB/s (%d MiB), fp32 matmul %.1f GFLOP/s (%dx%dx%d)",
				r.Machine.DeviceProvider, float64(d.Overhead.Nanoseconds())/1e3, d.Stream.Best/1e9, d.Stream.Bytes>>20,
				d.GEMM.Best/1e9, d.GEMM.Shape.M, d.GEMM.Shape.K, d.GEMM.Shape.N)
			if d.GEMMHalf.Best > 0 {
				fmt.Fprintf(w, ", fp16 matmul %.1f GFLOP/s", d.GEMMHalf.Best/1e9)
			}
			fmt.Fprintln(w)
		} else {
			fmt.Fprintf(w, "\nmachine: %s, %d threads: read bandwidth %.1f GB/s, ORT fp32 matmul %.1f GFLOP/s (%dx%dx%d)\n",
				r.Machine.CPU, r.Machine.Threads, r.Machine.Bandwidth.Best/1e9, r.Machine.GEMM.Best/1e9,
				r.Machine.GEMM.Shape.M, r.Machine.GEMM.Shape.K, r.Machine.GEMM.Shape.N)
		}
		if r.Machine.GEMMInt8.Best > 0 {
			fmt.Fprintf(w, "int8 weights: ORT DynamicQuantizeMatMul %.1f GFLOP/s (same shape); the bounds of int8 products use it\n",
				r.Machine.GEMMInt8.Best/1e9)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stage\tmeasured ms\tbound ms\tmeasured/bound\tbound by\t")
		for _, l := range r.Limits {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2fx\t%s\t\n", l.Stage, ms(l.Measured), ms(l.Bound), l.Ratio, l.Basis)
		}
		return tw.Flush()
	}
	return nil
}

// WriteBenchstat prints one line per measured action and stage in the Go
// benchmark format, so benchstat can compare two runs
// (BenchmarkAutoUI/model=base/stage=encoder 1 12345678 ns/op).
func (r *Report) WriteBenchstat(w io.Writer) error {
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/autoui/autoui/bench\n", runtime.GOOS, runtime.GOARCH)
	if r.Machine != nil && r.Machine.CPU != "" {
		fmt.Fprintf(w, "cpu: %s\n", r.Machine.CPU)
	}
	fmt.Fprintf(w, "threads: %d\nprovider: %s\ntokens: %d\n", r.Threads, r.Provider, r.Options.Tokens)
	model := benchName(r.Model)
	for _, st := range Stages {
		for _, a := range r.Actions {
			d, ok := a.Stages[st]
			if !ok {
				continue
			}
			if _, err := fmt.Fprintf(w, "BenchmarkAutoUI/model=%s/stage=%s \t 1 \t %d ns/op\n", model, st, d.Nanoseconds()); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchName keeps a name usable inside a benchmark name (no spaces or slashes).
func benchName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '/' || r == '\t' {
			return '_'
		}
		return r
	}, s)
}

func fixedLength(o Options) string {
	if o.Replay != nil {
		return fmt.Sprintf("%d tokens per action: a replayed action and </s> (real decoder calls, choices replaced)", o.Tokens)
	}
	return fmt.Sprintf("%d tokens per action (</s> suppressed until then)", o.Tokens)
}
