package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/models"
)

// modelFlags are the flags every model-running command shares.
type modelFlags struct {
	model      string
	threads    int
	provider   string
	ortLib     string
	truncation string
	history    int
	maxTokens  int
	maxPixels  int
	optimize   string
	noVerify   bool
	decoding   string
	constrain  bool
	spin       string
	verify     int
	maxDraft   int
	align      int
	groups     int
	tf32       bool
	cudaGraph  bool
	capRows    int
	priority   bool   // --decode-priority
	profile    string // bench's --ort-profile
	overlap    bool   // serve's and eval run's --overlap-joins (addOverlapFlag)
	capWarned  bool   // the --threads cap warning was printed
}

func addModelFlags(fs *flag.FlagSet) *modelFlags {
	m := &modelFlags{}
	fs.StringVar(&m.model, "model", "", "model bundle directory (manifest.json + ONNX graphs); required")
	fs.IntVar(&m.threads, "threads", 0, "intra-op threads (0: one per physical core; more than the machine's CPUs is capped)")
	fs.StringVar(&m.spin, "spin", defaultSpin, "ONNX Runtime worker threads spin-wait between operators: off, decoder (only the decoder's, whose calls come back to back: ~12% faster decoding on cores of its own) or on (off: 2-4x faster when the cores are shared; docs/eval.md)")
	fs.StringVar(&m.provider, "provider", "cpu", "execution provider: cpu or cuda")
	fs.StringVar(&m.ortLib, "ort-lib", "", "path to libonnxruntime.so 1.29 (default: $"+engine.LibraryEnv+", then third_party/onnxruntime)")
	fs.StringVar(&m.truncation, "truncation", "keep-goal", "prompt over the token limit: keep-goal (drop oldest history first) or right (Auto-UI's)")
	fs.IntVar(&m.history, "history-window", 0, "previous actions in the prompt (0: the bundle's, 8 for Auto-UI; -1: none)")
	fs.IntVar(&m.maxTokens, "max-new-tokens", 0, "generated token limit (0: the bundle's, 127 for Auto-UI, as its generate(max_length=128) counts the start token)")
	fs.IntVar(&m.maxPixels, "max-pixels", 0, fmt.Sprintf("refuse screenshots (predict --screen, run's captures) over this many pixels, width*height, read from the header before decoding (0: %d)", preprocess.DefaultMaxPixels))
	fs.StringVar(&m.optimize, "graph-opt", "all", "ONNX Runtime graph optimisation: disabled, basic, extended, all")
	fs.StringVar(&m.decoding, "decoding", "speculative", "speculative (drafts the output format's fixed tokens, verified in one call) or greedy (one call per token); same tokens")
	fs.BoolVar(&m.constrain, "constrain", false, "grammar-constrained decoding: mask tokens that would make the output unparseable")
	fs.IntVar(&m.verify, "verify-positions", 0, fmt.Sprintf("positions one speculative decoder call of a batch may verify, shared by its rows; fewer calls, same tokens (0: %d on cpu, %d on cuda)", engine.DefaultVerifyPositions(engine.ProviderCPU), engine.DefaultVerifyPositions(engine.ProviderCUDA)))
	fs.IntVar(&m.maxDraft, "max-draft", 0, fmt.Sprintf("most tokens a row drafts for one speculative decoder call, the format's fixed text mostly; more: fewer calls where a call costs about the same for more positions (a GPU), same tokens (0: %d)", sample.MaxDraft))
	fs.IntVar(&m.align, "align-positions", 0, "round every decoder call's positions per row up to a multiple of this, padded, so aligned-length attention kernels apply (cuda: 8 for fp16 attention, 16 for fp32, which also wants 256 keys: docs/cuda.md); same tokens (0: none)")
	fs.IntVar(&m.groups, "prompt-groups", 0, fmt.Sprintf("a batch's prompts are encoded in at most this many groups of similar length, each padded to its own longest; same tokens (0: the most, %d; 1: all padded to the batch's longest)", engine.PromptGroupsLimit))
	fs.BoolVar(&m.tf32, "tf32", false, "cuda: float32 matmuls and convolutions in TF32 (ORT's own default): up to 4x faster in large batches, but a few outputs in a thousand differ from the CPU's and between batch sizes (off: the CPU's outputs)")
	fs.BoolVar(&m.cudaGraph, "cuda-graph", false, "decode through the bundle's static decoder graph on fixed buffers, each call shape captured once as a CUDA graph and replayed (cuda; on cpu the same decode without capture); same tokens; needs a bundle with decoder_static (python -m scripts.upgrade_bundle DIR)")
	fs.IntVar(&m.capRows, "capture-rows", 0, "with --cuda-graph: the most rows a batch decodes on the fixed buffers, captured under cuda; larger batches run the device-resident decode (0: 8 on cuda, every batch on cpu); same tokens")
	fs.BoolVar(&m.priority, "decode-priority", false, "cuda, with --cuda-graph: the decoder's kernels on a CUDA stream of the highest priority, ahead of a vision tower's running beside them (--concurrent-batches, --overlap-joins); same tokens")
	fs.BoolVar(&m.noVerify, "no-verify", false, "check bundle file sizes only, not SHA-256 (for large bundles already verified)")
	return m
}

// options turns the flags into predictor options; a bad value is a usage
// error.
func (m *modelFlags) options() (engine.Options, error) {
	o, err := m.parseOptions()
	if err != nil {
		var u usageError
		if !errors.As(err, &u) {
			err = usageError{err}
		}
	}
	return o, err
}

func (m *modelFlags) parseOptions() (engine.Options, error) {
	prov, err := engine.ParseProvider(m.provider)
	if err != nil {
		return engine.Options{}, err
	}
	trunc, err := engine.ParseTruncation(m.truncation)
	if err != nil {
		return engine.Options{}, err
	}
	dec, err := engine.ParseDecoding(m.decoding)
	if err != nil {
		return engine.Options{}, err
	}
	if m.maxTokens < 0 || m.maxTokens > engine.MaxNewTokensLimit {
		return engine.Options{}, usageErrorf("--max-new-tokens %d: want 0 (the bundle's limit) to %d", m.maxTokens, engine.MaxNewTokensLimit)
	}
	if m.verify < 0 || m.verify > engine.VerifyPositionsLimit {
		return engine.Options{}, usageErrorf("--verify-positions %d: want 0 (the provider's default) to %d", m.verify, engine.VerifyPositionsLimit)
	}
	if m.maxDraft < 0 || m.maxDraft > engine.MaxDraftLimit {
		return engine.Options{}, usageErrorf("--max-draft %d: want 0 (%d) to %d", m.maxDraft, sample.MaxDraft, engine.MaxDraftLimit)
	}
	if m.align < 0 || m.align > engine.AlignPositionsLimit {
		return engine.Options{}, usageErrorf("--align-positions %d: want 0 (none) to %d", m.align, engine.AlignPositionsLimit)
	}
	if m.capRows < 0 || m.capRows > engine.CaptureRowsLimit {
		return engine.Options{}, usageErrorf("--capture-rows %d: want 0 (the provider's default) to %d", m.capRows, engine.CaptureRowsLimit)
	}
	if m.capRows > 0 && !m.cudaGraph {
		return engine.Options{}, usageErrorf("--capture-rows needs --cuda-graph")
	}
	if m.priority && (!m.cudaGraph || prov != engine.ProviderCUDA) {
		return engine.Options{}, usageErrorf("--decode-priority needs --provider cuda and --cuda-graph")
	}
	if m.groups < 0 || m.groups > engine.PromptGroupsLimit {
		return engine.Options{}, usageErrorf("--prompt-groups %d: want 0 (the most) to %d", m.groups, engine.PromptGroupsLimit)
	}
	if m.history < engine.NoHistory {
		return engine.Options{}, fmt.Errorf("--history-window %d: want -1 (none), 0 (the bundle's) or more", m.history)
	}
	if m.threads < 0 {
		return engine.Options{}, fmt.Errorf("--threads %d: must be >= 0", m.threads)
	}
	if max := runtime.NumCPU(); m.threads > max {
		if !m.capWarned {
			fmt.Fprintf(os.Stderr, "autoui: --threads %d is more than the %d CPUs here; using %d\n", m.threads, max, max)
			m.capWarned = true
		}
		m.threads = max
	}
	spin, err := engine.ParseSpin(m.spin)
	if err != nil {
		return engine.Options{}, fmt.Errorf("--spin: %w", err)
	}
	return engine.Options{
		Session: engine.SessionOptions{
			IntraOpThreads:    m.threads,
			Provider:          prov,
			GraphOptimization: engine.GraphOptimization(m.optimize),
			Spin:              spin,
			Profile:           m.profile,
			TF32:              m.tf32,
		},
		Truncation:      trunc,
		HistoryWindow:   m.history,
		MaxNewTokens:    m.maxTokens,
		LibraryPath:     m.ortLib,
		Decoding:        dec,
		Constrained:     m.constrain,
		VerifyPositions: m.verify,
		MaxDraft:        m.maxDraft,
		AlignPositions:  m.align,
		PromptGroups:    m.groups,
		CUDAGraph:       m.cudaGraph,
		CaptureRows:     m.capRows,
		OverlapJoins:    m.overlap,
		DecodePriority:  m.priority,
	}, nil
}

// addOverlapFlag adds --overlap-joins (engine.Options.OverlapJoins), for the
// commands with --continuous.
func (m *modelFlags) addOverlapFlag(fs *flag.FlagSet) {
	fs.BoolVar(&m.overlap, "overlap-joins", false, "with --continuous: prefill the requests that join a busy decode (screens, prompts) beside its decoder calls, one join at a time, instead of pausing them; on a GPU the two run side by side; same tokens")
}

// decodeOptions is how screenshots are decoded: the --max-pixels cap.
func (m *modelFlags) decodeOptions() (preprocess.DecodeOptions, error) {
	if m.maxPixels < 0 {
		return preprocess.DecodeOptions{}, usageErrorf("--max-pixels %d: must be >= 0", m.maxPixels)
	}
	return preprocess.DecodeOptions{MaxPixels: m.maxPixels}, nil
}

// open loads and validates the bundle and starts a predictor. The returned
// func releases it.
func (m *modelFlags) open() (*engine.Predictor, func(), error) {
	if m.model == "" {
		return nil, nil, usageErrorf("--model is required (a bundle directory, e.g. models/testdata/tiny)")
	}
	opts, err := m.options()
	if err != nil {
		return nil, nil, err
	}
	lo := models.LoadOptions{}
	if m.noVerify {
		lo.Verify = models.VerifySizes
	}
	b, err := models.Load(m.model, lo)
	if err != nil {
		return nil, nil, err
	}
	p, err := engine.NewPredictor(b, opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.CUDAGraph && opts.Session.Provider == engine.ProviderCUDA && !p.VisionCaptureSafe() {
		fmt.Fprintf(os.Stderr, "autoui: --cuda-graph: the vision tower runs uncaptured: this bundle's vision graph is not "+
			"marked capture-safe (python -m scripts.upgrade_bundle %s)\n", m.model)
	}
	return p, func() { p.Close() }, nil
}

// defaultSpin is --spin's default, chosen by measurement (docs/eval.md,
// "Spin-waiting").
const defaultSpin = "off"
