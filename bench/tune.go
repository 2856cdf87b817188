package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/predict"
)

// Setting is one combination of ONNX Runtime session settings the tuning
// sweep measures.
type Setting struct {
	Threads    int // intra-op threads
	Spin       engine.Spin
	Arena      bool
	MemPattern bool
	// Prepack lets kernels keep weights in their own layout (a copy).
	Prepack bool
	Opt     engine.GraphOptimization
}

// DefaultSetting is what a predictor uses when no session option is given.
func DefaultSetting() Setting {
	return Setting{Threads: engine.PhysicalCores(), Spin: engine.SpinOff, Arena: true, MemPattern: true, Prepack: true, Opt: engine.OptimizeAll}
}

// Name is the setting as benchmark-name keys, e.g.
// "threads=2/spin=on/arena=on/opt=all" (memory pattern and prepacking appear
// only when off),
// so benchstat can group by any of them (-col /opt).
func (s Setting) Name() string {
	name := fmt.Sprintf("threads=%d/spin=%s/arena=%s/opt=%s", s.Threads, s.Spin, onOff(s.Arena), s.Opt)
	if !s.MemPattern {
		name += "/mempattern=off"
	}
	if !s.Prepack {
		name += "/prepack=off"
	}
	return name
}

// Session returns base with this setting's fields.
func (s Setting) Session(base engine.SessionOptions) engine.SessionOptions {
	base.IntraOpThreads = s.Threads
	base.Spin = s.Spin
	base.DisableMemArena = !s.Arena
	base.DisableMemPattern = !s.MemPattern
	base.DisablePrepacking = !s.Prepack
	base.GraphOptimization = s.Opt
	return base
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Grid is the set of values per setting; the sweep runs every combination.
type Grid struct {
	Threads    []int
	Spin       []engine.Spin
	Arena      []bool
	MemPattern []bool
	Prepack    []bool
	Opt        []engine.GraphOptimization
}

// DefaultGrid is threads {1, 2} x spinning x arena x {basic, extended, all}
// (24 settings), memory pattern on.
func DefaultGrid() Grid {
	return Grid{
		Threads:    []int{1, 2},
		Spin:       []engine.Spin{engine.SpinOn, engine.SpinOff},
		Arena:      []bool{true, false},
		MemPattern: []bool{true},
		Prepack:    []bool{true},
		Opt:        []engine.GraphOptimization{engine.OptimizeBasic, engine.OptimizeExtended, engine.OptimizeAll},
	}
}

// Settings lists every combination, threads varying slowest. No Prepack
// values means prepacking on.
func (g Grid) Settings() []Setting {
	prepack := g.Prepack
	if len(prepack) == 0 {
		prepack = []bool{true}
	}
	var out []Setting
	for _, t := range g.Threads {
		for _, sp := range g.Spin {
			for _, a := range g.Arena {
				for _, mp := range g.MemPattern {
					for _, pp := range prepack {
						for _, o := range g.Opt {
							out = append(out, Setting{Threads: t, Spin: sp, Arena: a, MemPattern: mp, Prepack: pp, Opt: o})
						}
					}
				}
			}
		}
	}
	return out
}

// ParseThreads reads a comma-separated list of thread counts ("1,2").
func ParseThreads(s string) ([]int, error) { return ParseCounts(s, "thread count") }

// ParseCounts reads a comma-separated list of counts >= 1 ("1,4,8"); what
// names them in errors.
func ParseCounts(s, what string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s %q: want an integer >= 1", what, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %ss in %q", what, s)
	}
	return out, nil
}

// ParseOnOff reads a comma-separated list of on/off values ("on,off").
func ParseOnOff(s string) ([]bool, error) {
	var out []bool
	for _, f := range splitList(s) {
		switch f {
		case "on", "true", "1":
			out = append(out, true)
		case "off", "false", "0":
			out = append(out, false)
		default:
			return nil, fmt.Errorf("%q: want on or off", f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no on/off values in %q", s)
	}
	return out, nil
}

// ParseSpins reads a comma-separated list of --spin values ("on,off"); on
// and off are also read as ParseOnOff reads them.
func ParseSpins(s string) ([]engine.Spin, error) {
	var out []engine.Spin
	for _, f := range splitList(s) {
		sp, err := engine.ParseSpin(f)
		if err != nil {
			on, err2 := ParseOnOff(f)
			if err2 != nil {
				return nil, err
			}
			sp = engine.SpinOff
			if on[0] {
				sp = engine.SpinOn
			}
		}
		out = append(out, sp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no spin values in %q", s)
	}
	return out, nil
}

// ParseOpts reads a comma-separated list of graph optimisation levels.
func ParseOpts(s string) ([]engine.GraphOptimization, error) {
	var out []engine.GraphOptimization
	for _, f := range splitList(s) {
		switch o := engine.GraphOptimization(f); o {
		case engine.OptimizeDisabled, engine.OptimizeBasic, engine.OptimizeExtended, engine.OptimizeAll:
			out = append(out, o)
		default:
			return nil, fmt.Errorf("graph optimisation %q: want disabled, basic, extended or all", f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no graph optimisation levels in %q", s)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.ToLower(strings.TrimSpace(f)); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Opener starts a predictor with the given session options; the returned
// func releases it.
type Opener func(engine.SessionOptions) (predict.Predictor, func(), error)

// TuneOptions say what the sweep measures.
type TuneOptions struct {
	Options // runs, warm-up passes and the fixed generated length
	// Features are the image features of every request: the sweep measures
	// the text path (tokenize, encoder, fusion, decoder, parse), which every
	// action pays; the vision tower is left out.
	Features []float32
	// Reference is measured first; every setting's tokens must equal its
	// tokens, and speeds are compared with it. Usually DefaultSetting().
	Reference Setting
	// Progress receives one line per setting; nil for none.
	Progress io.Writer
}

// TuneResult is one setting's measurements.
type TuneResult struct {
	Setting Setting
	Actions []Action
	// Passes are the text-path times of each measured pass over the cases.
	Passes []time.Duration
	// PeakRSS is the process's resident high-water mark while this setting
	// ran (reset before it opened; 0 when the kernel cannot reset it).
	PeakRSS int64
	// Mismatch says how the tokens differ from the reference's; "" when
	// they are identical.
	Mismatch string
}

// Median is the median pass time.
func (r TuneResult) Median() time.Duration { return Summarize(r.Passes).Median }

// stageMedian is the median over actions of one stage.
func (r TuneResult) stageMedian(stage string) time.Duration {
	var s []time.Duration
	for _, a := range r.Actions {
		if d, ok := a.Stages[stage]; ok {
			s = append(s, d)
		}
	}
	return Summarize(s).Median
}

// TuneReport is a whole sweep: the reference first, then the other settings.
type TuneReport struct {
	Model   string
	Options TuneOptions
	Cases   []Case
	Results []TuneResult
}

// Tune measures the text path on every case under the reference and then
// under each setting (the reference is not measured twice), one predictor at
// a time, and checks that each gives the reference's tokens. On an error
// (Ctrl-C) it returns the settings measured before it too (nil when none).
func Tune(ctx context.Context, open Opener, base engine.SessionOptions, cases []Case, settings []Setting, opts TuneOptions) (*TuneReport, error) {
	if len(cases) == 0 {
		return nil, fmt.Errorf("no benchmark cases")
	}
	if opts.Runs < 1 || opts.Tokens < 1 || opts.Warmup < 0 {
		return nil, fmt.Errorf("runs = %d, tokens = %d, warm-up = %d: need at least 1 run and token, and no negative warm-up", opts.Runs, opts.Tokens, opts.Warmup)
	}
	if len(opts.Features) == 0 {
		return nil, fmt.Errorf("no image features for the text path")
	}
	all := []Setting{opts.Reference}
	for _, s := range settings {
		if s != opts.Reference {
			all = append(all, s)
		}
	}
	rep := &TuneReport{Options: opts, Cases: cases}
	partial := func(err error) (*TuneReport, error) {
		if len(rep.Results) == 0 {
			return nil, err
		}
		return rep, err
	}
	for i, s := range all {
		if err := ctx.Err(); err != nil {
			return partial(err)
		}
		res, err := tuneOne(ctx, open, s.Session(base), cases, opts)
		if err != nil {
			return partial(fmt.Errorf("setting %s: %w", s.Name(), err))
		}
		res.Setting = s
		if i > 0 {
			res.Mismatch = compareTokens(rep.Results[0].Actions, res.Actions)
		}
		rep.Results = append(rep.Results, res)
		if opts.Progress != nil {
			parity := "tokens identical"
			if res.Mismatch != "" {
				parity = "TOKENS DIFFER: " + res.Mismatch
			}
			fmt.Fprintf(opts.Progress, "tune: %2d/%d %s: median pass %.2f ms, %s\n", i+1, len(all), s.Name(), ms(res.Median()), parity)
		}
	}
	return rep, nil
}

func tuneOne(ctx context.Context, open Opener, so engine.SessionOptions, cases []Case, opts TuneOptions) (TuneResult, error) {
	// The peak is per setting: release what the previous one left, then
	// restart the high-water mark.
	runtime.GC()
	debug.FreeOSMemory()
	resetErr := ResetPeakRSS()
	p, closeFn, err := open(so)
	if err != nil {
		return TuneResult{}, err
	}
	defer closeFn()
	var res TuneResult
	for r := -opts.Warmup; r < opts.Runs; r++ {
		var pass time.Duration
		for _, c := range cases {
			a, err := runText(ctx, p, c, opts.Features, opts.Tokens)
			if err != nil {
				return TuneResult{}, fmt.Errorf("case %s run %d: %w", c.ID, r, err)
			}
			pass += a.Stages[StageTextPath]
			if r >= 0 {
				a.Run = r
				res.Actions = append(res.Actions, a)
			}
		}
		if r >= 0 {
			res.Passes = append(res.Passes, pass)
		}
	}
	if resetErr == nil {
		res.PeakRSS = ReadMemory().PeakRSS
	}
	return res, nil
}

// runText predicts one case from the given image features.
func runText(ctx context.Context, p predict.Predictor, c Case, features []float32, tokens int) (Action, error) {
	res, err := p.Predict(ctx, predict.Request{
		Features: features, Goal: c.Goal, History: c.History,
		MaxNewTokens: tokens, MinNewTokens: tokens,
	})
	if err != nil {
		return Action{}, err
	}
	if len(res.TokenIDs) != tokens {
		return Action{}, fmt.Errorf("generated %d tokens, want exactly %d (is </s> suppression working?)", len(res.TokenIDs), tokens)
	}
	return textAction(c, res), nil
}

// compareTokens checks every action's tokens against the reference's
// actions for the same case (the reference's tokens of one case are the same
// on every run, or the first mismatch says so).
func compareTokens(ref, got []Action) string {
	want := map[string][]int64{}
	for _, a := range ref {
		if prev, ok := want[a.Case]; ok && !slices.Equal(prev, a.IDs) {
			return fmt.Sprintf("the reference itself varies between runs on case %s", a.Case)
		}
		want[a.Case] = a.IDs
	}
	for _, a := range got {
		w, ok := want[a.Case]
		if !ok {
			return fmt.Sprintf("case %s has no reference", a.Case)
		}
		if !slices.Equal(w, a.IDs) {
			at := 0
			for at < len(w) && at < len(a.IDs) && w[at] == a.IDs[at] {
				at++
			}
			return fmt.Sprintf("case %s run %d: token %d is %s, reference %s", a.Case, a.Run, at, idAt(a.IDs, at), idAt(w, at))
		}
	}
	return ""
}

func idAt(ids []int64, i int) string {
	if i < len(ids) {
		return strconv.FormatInt(ids[i], 10)
	}
	return "(end)"
}

// Fastest returns the setting with the lowest median pass among those whose
// tokens match the reference (the reference included).
func (r *TuneReport) Fastest() (TuneResult, bool) {
	best, found := TuneResult{}, false
	for _, res := range r.Results {
		if res.Mismatch != "" || len(res.Passes) == 0 {
			continue
		}
		if !found || res.Median() < best.Median() {
			best, found = res, true
		}
	}
	return best, found
}

// Mismatches counts the settings whose tokens differ from the reference.
func (r *TuneReport) Mismatches() int {
	n := 0
	for _, res := range r.Results {
		if res.Mismatch != "" {
			n++
		}
	}
	return n
}

// WriteBenchstat prints one line per setting and measured pass (op = one
// pass over the cases' text paths), with per-stage metrics summed over the
// pass, so benchstat compares settings (benchstat -col /threads tune.txt).
func (r *TuneReport) WriteBenchstat(w io.Writer) error {
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/autoui/autoui/bench\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "model: %s\ncases: %d\ntokens: %d\n", r.Model, len(r.Cases), r.Options.Tokens)
	for _, res := range r.Results {
		for run := range res.Passes {
			var enc, fus, first, later time.Duration
			calls, later1 := 0, 0
			for _, a := range res.Actions {
				if a.Run != run {
					continue
				}
				enc += a.Stages[StageEncoder]
				fus += a.Stages[StageFusion]
				first += a.Stages[StageFirstStep]
				later += a.Stages[StageLaterSteps]
				calls += a.DecoderCalls
				later1 += a.DecoderCalls - 1
			}
			line := fmt.Sprintf("BenchmarkTextPath/%s \t 1 \t %d ns/op \t %.3f encoder-ms \t %.3f fusion-ms \t %.3f first-step-ms",
				res.Setting.Name(), res.Passes[run].Nanoseconds(), ms(enc), ms(fus), ms(first))
			if later1 > 0 {
				line += fmt.Sprintf(" \t %.3f decode-call-ms", ms(later)/float64(later1))
			}
			line += fmt.Sprintf(" \t %d decoder-calls", calls)
			if res.PeakRSS > 0 {
				line += fmt.Sprintf(" \t %.1f peak-RSS-MB", mb(res.PeakRSS))
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteSummary prints the settings fastest first, each beside the reference,
// then names the fastest setting whose tokens match.
func (r *TuneReport) WriteSummary(w io.Writer) error {
	if len(r.Results) == 0 {
		return fmt.Errorf("empty tuning report")
	}
	ref := r.Results[0]
	fmt.Fprintf(w, "autoui bench tune: model=%s cases=%d runs=%d warmup=%d tokens=%d (text path: tokenize..parse, fixed image features)\n",
		r.Model, len(r.Cases), r.Options.Runs, r.Options.Warmup, r.Options.Tokens)
	fmt.Fprintf(w, "reference: %s\n\n", ref.Setting.Name())
	order := append([]TuneResult(nil), r.Results...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Median() < order[j].Median() })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "setting\tpass ms (median)\tvs reference\tencoder ms\tdecode call ms\tpeak RSS MB\ttokens")
	for _, res := range order {
		parity := "identical"
		if res.Mismatch != "" {
			parity = "DIFFER"
		}
		rss := "-"
		if res.PeakRSS > 0 {
			rss = fmt.Sprintf("%.0f", mb(res.PeakRSS))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%.2f\t%.3f\t%s\t%s\n", res.Setting.Name(), ms(res.Median()),
			relative(res.Median(), ref.Median()), ms(res.stageMedian(StageEncoder)), ms(res.stageMedian(StageDecodeStep)), rss, parity)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Mismatch != "" {
			fmt.Fprintf(w, "tokens differ under %s: %s\n", res.Setting.Name(), res.Mismatch)
		}
	}
	best, ok := r.Fastest()
	if !ok {
		_, err := fmt.Fprintln(w, "\nfastest: none (no setting reproduced the reference's tokens)")
		return err
	}
	_, err := fmt.Fprintf(w, "\nfastest with identical tokens: %s  %.2f ms per pass (%s vs reference %s)\n",
		best.Setting.Name(), ms(best.Median()), relative(best.Median(), ref.Median()), ref.Setting.Name())
	return err
}

func relative(d, ref time.Duration) string {
	if ref <= 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(float64(d)/float64(ref)-1))
}

// JSON is the --json document of a sweep.
func (r *TuneReport) JSON() ([]byte, error) {
	type result struct {
		Setting      string             `json:"setting"`
		Threads      int                `json:"threads"`
		Spin         string             `json:"spin"`
		Arena        bool               `json:"arena"`
		MemPattern   bool               `json:"mem_pattern"`
		Prepack      bool               `json:"prepack"`
		Opt          string             `json:"graph_optimization"`
		PassesMS     []float64          `json:"passes_ms"`
		MedianPassMS float64            `json:"median_pass_ms"`
		StagesMS     map[string]float64 `json:"stage_medians_ms"`
		PeakRSSMB    float64            `json:"peak_rss_mb"`
		Identical    bool               `json:"tokens_identical"`
		Mismatch     string             `json:"mismatch,omitempty"`
	}
	doc := struct {
		Model     string   `json:"model"`
		Runs      int      `json:"runs"`
		Warmup    int      `json:"warmup"`
		Tokens    int      `json:"tokens"`
		Cases     []string `json:"cases"`
		Reference string   `json:"reference"`
		Fastest   string   `json:"fastest"`
		Results   []result `json:"results"`
		Go        string   `json:"go"`
	}{Model: r.Model, Runs: r.Options.Runs, Warmup: r.Options.Warmup, Tokens: r.Options.Tokens, Go: runtime.Version()}
	for _, c := range r.Cases {
		doc.Cases = append(doc.Cases, c.ID)
	}
	if len(r.Results) > 0 {
		doc.Reference = r.Results[0].Setting.Name()
	}
	if best, ok := r.Fastest(); ok {
		doc.Fastest = best.Setting.Name()
	}
	for _, res := range r.Results {
		s := res.Setting
		out := result{Setting: s.Name(), Threads: s.Threads, Spin: s.Spin.String(), Arena: s.Arena, MemPattern: s.MemPattern, Prepack: s.Prepack, Opt: string(s.Opt),
			MedianPassMS: round3(ms(res.Median())), StagesMS: map[string]float64{}, PeakRSSMB: round3(mb(res.PeakRSS)),
			Identical: res.Mismatch == "", Mismatch: res.Mismatch}
		for _, p := range res.Passes {
			out.PassesMS = append(out.PassesMS, round3(ms(p)))
		}
		for _, st := range []string{StageEncoder, StageFusion, StageFirstStep, StageDecodeStep, StageTextPath} {
			if d := res.stageMedian(st); d > 0 {
				out.StagesMS[st] = round3(ms(d))
			}
		}
		doc.Results = append(doc.Results, out)
	}
	return json.MarshalIndent(doc, "", "  ")
}

// SyntheticFeatures is a fixed, deterministic image-feature vector of n
// values in [-1, 1] for the text-path sweep (the tokens only need to be the
// same under every setting, not meaningful).
func SyntheticFeatures(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(math.Sin(float64(i)*0.37 + 0.1))
	}
	return f
}
