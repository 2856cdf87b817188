package engine

import (
	"cmp"
	"errors"
	"fmt"
	"image"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/internal/cudart"
	"github.com/autoui/autoui/engine/internal/ortval"
	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/tokenizer"
)

// Options configure a Predictor. The zero value uses the bundle's settings:
// a numeric field's 0 means its default, a negative value is refused, and
// the one "none" is HistoryWindow's NoHistory. The CLI's flags read the
// same way.
type Options struct {
	Session SessionOptions
	// Truncation is the prompt truncation policy (default KeepGoal).
	Truncation Truncation
	// HistoryWindow is how many previous actions the prompt shows: 0 the
	// bundle's (8 for Auto-UI), NoHistory none (the "Goal: ..." prompt).
	HistoryWindow int
	// MaxNewTokens overrides the bundle's max_target_tokens when > 0.
	MaxNewTokens int
	// LibraryPath is the ONNX Runtime shared library (see InitRuntime).
	LibraryPath string
	// Decoding is speculative (default) or greedy; both give the same tokens.
	Decoding Decoding
	// Constrained masks tokens that would leave the Auto-UI output grammar,
	// so every output parses. Opt-in: it can change what the model says.
	Constrained bool
	// VerifyPositions is how many positions one speculative decoder call of
	// a batch may verify, shared among its rows (0: DefaultVerifyPositions
	// of the provider). Only the number of calls changes, never the tokens.
	VerifyPositions int
	// MaxDraft is the most tokens a row drafts for one speculative call
	// (0: sample.MaxDraft). More puts more of the format's fixed text in one
	// call, for a few percent of a call a position on a GPU; only the number
	// of calls changes, never the tokens.
	MaxDraft int
	// AlignPositions rounds the positions per row of every decoder call up
	// to a multiple of it (0 or 1: none), and a batch's width with it: the
	// positions gained are padding, as when rows' drafts differ in length
	// (drafts stay within MaxDraft). Attention kernels that want an aligned
	// query length then apply (ORT's CUDA MultiHeadAttention with a bias
	// takes its memory-efficient kernel only at a multiple of 8 in fp16, 16
	// in fp32, and in fp32 only with 256 keys or more unless
	// ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32 says fewer; otherwise its
	// unfused one). Only the time changes, never the tokens.
	AlignPositions int
	// PromptGroups is the most groups of similar length a batch's prompts
	// are encoded in, each padded to its own longest (0: PromptGroupsLimit;
	// 1: all at the batch's longest). Only the time changes, never the
	// tokens.
	PromptGroups int
	// CUDAGraph decodes through the bundle's static decoder graph
	// (decoder_static: a fixed-length self-attention cache written at a
	// position input) over buffers that never move, and under cuda has ORT
	// capture each call shape once as a CUDA graph that later calls replay:
	// a call then costs the GPU's time instead of the host's launching of
	// its ~300 kernels. On the cpu provider the same fixed-buffer decode
	// runs without capture (how CI tests it). The tokens are those of any
	// other decode.
	CUDAGraph bool
	// CaptureRows is, with CUDAGraph, the most rows a batch may have to
	// decode on the fixed buffers (captured under cuda); a larger batch runs
	// the device-resident decode (0: captureRows under cuda, every batch on
	// the cpu provider). Streams run on fixed buffers at every row count.
	// Only the time changes, never the tokens.
	CaptureRows int
	// OverlapJoins has a continuous decode (Stream) prefill the requests
	// that join it (screens, prompts, fusion) beside its decoder calls,
	// one join at a time, instead of pausing the busy rows for it: only
	// the cross projection and the move onto the rows then come between
	// two calls. On a GPU the prefill's kernels can run beside the calls'
	// (each session has its own stream); on a CPU both share the cores.
	// Only the time changes, never the tokens.
	OverlapJoins bool
	// DecodePriority runs, under cuda with CUDAGraph, the static decoder's
	// kernels on a CUDA stream of the highest priority (cudart): where a
	// batch's screens are seen beside another's decoding (concurrent
	// batches, OverlapJoins), the decoder's many small kernels are
	// dispatched ahead of the vision tower's waiting blocks instead of
	// after them. Only the time changes, never the tokens.
	DecodePriority bool
}

// CaptureRowsLimit bounds Options.CaptureRows: a batch's rows are padded to
// a power of two up to 64, then to 128 (staticRows), so 8 row counts x 8
// prompt lengths fit maxCapturedGraphs; past it every multiple of 64 rows,
// each at its own verify width, would be another shape.
const CaptureRowsLimit = 128

// PromptGroupsLimit bounds Options.PromptGroups.
const PromptGroupsLimit = kv.MergeParts

// VerifyPositionsLimit bounds Options.VerifyPositions: a call under
// --constrain brings back the logits of every position (4096 x 32128
// floats is 526 MB).
const VerifyPositionsLimit = 4096

// MaxDraftLimit bounds Options.MaxDraft.
const MaxDraftLimit = 64

// AlignPositionsLimit bounds Options.AlignPositions.
const AlignPositionsLimit = 64

// DefaultVerifyPositions is Options.VerifyPositions when it is 0 (with the
// default MaxDraft; each row's share is MaxDraft+1 positions). On a CPU
// a decoder call costs about the same for a few positions as for one only
// while reading the weights dominates, so a batch shares one call's worth of
// drafts (MaxDraft+1 positions: batches of 7 or more do not draft). On a
// GPU a call costs little more for many positions than for one (the weights
// are read once, the launches are the same), so every row of a batch of up
// to 64 drafts in full: on an H200, base size, 32 rows x 13 positions took
// 8.1 ms a call against 5.6 for 32 x 1, in 21 calls a batch instead of 104.
func DefaultVerifyPositions(p Provider) int { return defaultVerify(p, sample.MaxDraft) }

func defaultVerify(p Provider, maxDraft int) int {
	if p == ProviderCUDA {
		return min(64*(maxDraft+1), VerifyPositionsLimit)
	}
	return maxDraft + 1
}

// NoHistory is Options.HistoryWindow for a prompt without previous actions
// (--history-window -1).
const NoHistory = -1

// Predictor runs a bundle. It is safe for concurrent use: sessions are
// shared, every request has its own buffers (under CUDA-graph capture the
// calls take turns on one OS thread: captureThread).
type Predictor struct {
	bundle    *models.Bundle
	cfg       models.ModelConfig
	tok       *tokenizer.Tokenizer
	prep      preprocess.Config
	scrollMap action.ScrollMap
	opts      Options
	window    int
	maxNew    int
	verify    int // Options.VerifyPositions or its default
	maxDraft  int // Options.MaxDraft or its default
	align     int // Options.AlignPositions, at least 1
	so        *ort.SessionOptions
	decoderSO *ort.SessionOptions // the decoder's own, when only its workers spin (nil: so)
	opsSO     *ort.SessionOptions // the cache ops' own under cuda (opsSessionOptions; nil: the decoder's)

	encoder, fusion, decoder *graph
	decoderCross             *graph // the fused states' cross-attention K/V, once per request
	// decoderMu guards opening the decoder's session when decodes run the
	// static decoder (dynamicDecoder).
	decoderMu sync.Mutex

	// The vision tower loads on first use: evaluation from precomputed
	// features (Auto-UI's pickles, a feature cache) never pays for it.
	visionOnce sync.Once
	vision     *graph
	visionErr  error

	drafts   *sample.NGram
	grammars *sample.Grammars

	// decoderStatic is the bundle's static decoder (Options.CUDAGraph),
	// statics its buffers; captureSO its session options and the vision
	// tower's then (capture on under cuda), visionFixed the tower's buffers.
	decoderStatic *graph
	captureSO     *ort.SessionOptions
	// decoderStaticSO and decodeStream are the static decoder's own
	// session options and stream under Options.DecodePriority (else nil).
	decoderStaticSO *ort.SessionOptions
	decodeStream    *cudart.Stream
	statics         statics
	visionFixed     *fixedGraph
	// promptBucket, when > 0, pads a batch's prompts to a multiple of it
	// (at most the bundle's prompt limit): under capture, so that a few
	// encoder lengths, not every one, each capture their CUDA graphs.
	promptBucket int
	// bucketRows decodes a batch on staticRows(B) rows (under capture).
	bucketRows bool
	// graphRows, when > 0, is the most rows a batch may have to run on
	// fixed buffers (fixedRows); a larger one runs the device-resident
	// path: Options.CaptureRows, under capture captureRows by default.
	graphRows int
	// groupCost is a group's fixed cost in prompt tokens when a batch's
	// prompts are encoded in at most promptGroups groups of similar length
	// (lengthGroups).
	groupCost, promptGroups int
	// overlapPrefill encodes a batch's prompts while its screens are resized
	// and seen (under cuda: the host and the GPU work side by side; on a
	// CPU the two would only share its cores).
	overlapPrefill bool

	decoderNames kv.Names
	decoderSlots *kv.Slots
	// cachePlace is where a decode keeps its state: where ORT computes it
	// under cuda and for a float16 cache, else in Go memory (tests also run
	// the device placement on the cpu provider, and benchmarks compare the
	// two there).
	cachePlace placement
	kvOps      *kv.Ops         // trims and compacts a device-resident cache
	cacheElem  kv.Elem         // the decoder graphs' K/V element type
	deviceMem  *ort.MemoryInfo // where device-resident outputs stay
	// newCallHook, when set (tests), sees each decode's stepper, and
	// stepHook each call's positions per row; prefillHook runs when a
	// batch's prompts are encoded, adoptHook when a stream moves its rows.
	newCallHook func(stepper)
	stepHook    func(k int)
	prefillHook func()
	adoptHook   func(from, to staticKey) // a stream moved its busy rows

	streamMu    sync.Mutex
	streamStats StreamStats // what every Stream of the predictor did
}

// placement is where a decode's cache lives.
type placement int

const (
	// placeHost keeps it in Go memory: each call's past goes in and its
	// present comes out through Go buffers, with the logits.
	placeHost placement = iota
	// placeDevice keeps it in ORT-owned values on the decoder's device
	// (kv.Device); only ids, and logits where needed, cross.
	placeDevice
	// placeStatic keeps it in fixed ORT-owned buffers for the static
	// decoder graph (kv.Static, Options.CUDAGraph).
	placeStatic
)

// NewPredictor opens the bundle's graphs and tokenizer.
func NewPredictor(b *models.Bundle, opts Options) (*Predictor, error) {
	if err := opts.check(); err != nil {
		return nil, err // before any library or file is loaded
	}
	if err := InitRuntime(opts.LibraryPath); err != nil {
		return nil, err
	}
	m := b.Manifest
	tok, err := tokenizer.Load(b.Path(models.RoleTokenizer))
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", b.Path(models.RoleTokenizer), err)
	}
	p := &Predictor{
		bundle: b,
		cfg:    m.Model,
		tok:    tok,
		opts:   opts,
		window: m.Prompt.HistoryWindow,
		maxNew: m.Prompt.MaxTargetTokens,
		prep: preprocess.Config{
			Height: m.Preprocess.Height, Width: m.Preprocess.Width,
			RescaleFactor: float32(m.Preprocess.RescaleFactor),
			Mean:          [3]float32{float32(m.Preprocess.Mean[0]), float32(m.Preprocess.Mean[1]), float32(m.Preprocess.Mean[2])},
			Std:           [3]float32{float32(m.Preprocess.Std[0]), float32(m.Preprocess.Std[1]), float32(m.Preprocess.Std[2])},
		},
	}
	if m.Action.ScrollMap == "legacy" {
		p.scrollMap = action.ScrollLegacy
	}
	switch {
	case opts.HistoryWindow > 0:
		p.window = opts.HistoryWindow
	case opts.HistoryWindow == NoHistory:
		p.window = 0
	}
	if opts.MaxNewTokens > 0 {
		p.maxNew = opts.MaxNewTokens
	}
	p.promptGroups = opts.PromptGroups
	if p.promptGroups == 0 {
		p.promptGroups = PromptGroupsLimit
	}
	p.maxDraft = cmp.Or(opts.MaxDraft, sample.MaxDraft)
	p.align = max(1, opts.AlignPositions)
	p.verify = cmp.Or(opts.VerifyPositions, defaultVerify(opts.Session.Provider, p.maxDraft))
	if n := tok.VocabSize(); n > p.cfg.VocabSize {
		return nil, fmt.Errorf("load tokenizer %s: %d tokens, more than the model's vocab_size %d", b.Path(models.RoleTokenizer), n, p.cfg.VocabSize)
	}
	// On a GPU a position verified costs a few percent of a call (H200,
	// captured: ~0.1 ms against 2.3-3.4), so a weak guess is cheap there;
	// on a CPU each position costs its share of the weights' work.
	if p.drafts, err = sample.NewNGram(tok, m.Tokens.EOSID, sample.NGramOptions{Full: opts.Session.Provider == ProviderCUDA}); err != nil {
		return nil, err
	}
	if p.grammars, err = sample.NewGrammars(tok); err != nil {
		return nil, fmt.Errorf("output grammar: %w", err)
	}
	p.so, err = opts.Session.build()
	if err != nil {
		return nil, err
	}
	if opts.Session.Spin == SpinDecoder {
		o := opts.Session
		o.Spin = SpinOn
		if p.decoderSO, err = o.build(); err != nil {
			p.Close()
			return nil, err
		}
	}
	for _, g := range []struct {
		role models.Role
		dst  **graph
	}{{models.RoleEncoder, &p.encoder}, {models.RoleFusion, &p.fusion}, {models.RoleDecoderCross, &p.decoderCross}, {models.RoleDecoder, &p.decoder}} {
		so := p.so
		if g.role == models.RoleDecoder {
			so = p.decoderOptions()
		}
		if g.role == models.RoleDecoder && opts.CUDAGraph {
			// decodes run the static decoder: not a second copy of the weights
			*g.dst, err = readGraph(b, g.role)
		} else {
			*g.dst, err = openGraph(b, g.role, so, opts.Session.Profile)
		}
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	if L, n := p.cfg.NumDecoderLayers, len(p.decoder.inputs); n != 2+4*L { // before the names are built per layer
		p.Close()
		return nil, fmt.Errorf("load decoder graph %s: %d inputs, for the manifest's %d layers want %d (2 + 4 per layer)", p.decoder.path, n, L, 2+4*L)
	}
	p.decoderNames = kv.DecoderNames(p.cfg.NumDecoderLayers)
	if p.decoderSlots, err = kv.FindSlots(p.decoderNames, p.decoder.inputs, p.decoder.outputs, p.decoderCross.inputs, p.decoderCross.outputs); err != nil {
		p.Close()
		return nil, fmt.Errorf("load decoder graph %s: %w", p.decoder.path, err)
	}
	if p.deviceMem, err = deviceMemory(opts.Session); err != nil {
		p.Close()
		return nil, err
	}
	opsSO := p.decoderOptions()
	if opts.Session.Provider == ProviderCUDA {
		if p.opsSO, err = opsSessionOptions(opts.Session).build(); err != nil {
			p.Close()
			return nil, err
		}
		opsSO = p.opsSO
	}
	if p.cacheElem, err = cacheElem(&b.Manifest); err != nil {
		p.Close()
		return nil, fmt.Errorf("load %s: %w", b.Dir, err)
	}
	if p.kvOps, err = kv.NewOps(p.cfg.NumDecoderLayers, p.cacheElem, opsSO); err != nil {
		p.Close()
		return nil, err
	}
	p.groupCost = groupCostCPU
	if opts.Session.Provider == ProviderCUDA || p.cacheElem != kv.Float32 {
		// a half-precision cache lives only where ORT computes it (on the
		// cpu provider too): the host path's buffers are float32
		p.cachePlace = placeDevice
	}
	if opts.Session.Provider == ProviderCUDA {
		p.overlapPrefill = true
		p.groupCost = groupCostCUDA
	}
	if opts.CUDAGraph {
		if err := p.openStatic(b, opts.Session, opts.CaptureRows); err != nil {
			p.Close()
			return nil, err
		}
		p.cachePlace = placeStatic
	}
	return p, nil
}

// capturePromptBucket is Predictor.promptBucket under capture: prompts of
// up to 512 tokens come in 8 lengths.
const capturePromptBucket = 64

// captureRows is Predictor.graphRows under capture. On an H200 a captured
// call at batch 1 took 3.5 ms against 5.2 on the device-resident path, at
// batch 64 13.8 against 11.2 (fp32; fp16 9.4 against 8.7): a large batch's
// call is the GPU's own work, which capture does not shorten, while its
// fixed buffers then cost a full cache copy per call (since removed: the
// cache is written in place) and rows padded to a power of two. 8 keeps
// the captured shapes (rows 1, 2, 4, 8 x 8 prompt lengths) well within
// maxCapturedGraphs. At 8 rows capture still gained 20% (fp32) and 54%
// (fp16) of screens/s; 16, and 64 with the cache in place, are not
// measured (docs/cuda.md; Options.CaptureRows sets it).
const captureRows = 8

// CaptureRows is the most rows a batch decodes on fixed buffers
// (Options.CaptureRows as it applies: captureRows under cuda by default), 0
// for every batch, -1 without CUDAGraph.
func (p *Predictor) CaptureRows() int {
	if p.cachePlace != placeStatic {
		return -1
	}
	return p.graphRows
}

// fixedRows reports whether a batch of b rows decodes on fixed buffers (the
// static decoder; under capture, CUDA graphs).
func (p *Predictor) fixedRows(b int) bool {
	return p.cachePlace == placeStatic && (p.graphRows == 0 || b <= p.graphRows)
}

// fixedVision reports whether the vision tower runs b screens on its fixed
// buffers (captured under cuda): where visionRows says, when the tower has
// them.
func (p *Predictor) fixedVision(b int) bool {
	return p.visionFixed != nil && p.visionRows(b)
}

// visionRows reports whether b screens are few enough for the tower's fixed
// buffers: as a batch decodes, but at most captureRows once there is a row
// limit. Capture pays where the tower's ~600 launches outweigh its work (a
// few screens); a batch of 33 bucketed to 64 rows for it would run the
// ViT-g's work twice over.
func (p *Predictor) visionRows(b int) bool {
	return p.fixedRows(b) && (p.graphRows == 0 || b <= captureRows)
}

// decoderOptions are the session options of the decoder (its own, when
// only its workers spin) and, on the CPU, of the ops on its cache.
func (p *Predictor) decoderOptions() *ort.SessionOptions {
	if p.decoderSO != nil {
		return p.decoderSO
	}
	return p.so
}

// opsSessionOptions are the cache ops' session options under cuda: their
// dozen small graphs (trim, gather, copies, merges) run on the GPU, where an
// intra-op pool of CPU threads per session would only idle, or spin under
// --spin decoder, beside the host's decoding and resizing.
func opsSessionOptions(o SessionOptions) SessionOptions {
	o.IntraOpThreads, o.Spin = 1, SpinOff
	return o
}

// dynamicDecoder is the decoder graph with its session, which a predictor
// that decodes with the static decoder opens when it opens the static one
// with a row limit (graphRows), else (tests that set one) for its first
// batch of more than graphRows rows. A failed open is tried again by the
// next batch.
func (p *Predictor) dynamicDecoder() (*graph, error) {
	p.decoderMu.Lock()
	defer p.decoderMu.Unlock()
	if p.decoder.sess != nil {
		return p.decoder, nil
	}
	g, err := openGraph(p.bundle, models.RoleDecoder, p.decoderOptions(), p.opts.Session.Profile)
	if err != nil {
		return nil, err
	}
	p.decoder.sess = g.sess
	return p.decoder, nil
}

// openStatic opens the bundle's static decoder graph, with graph capture
// under cuda, for batches of up to rows rows (0: the provider's default).
func (p *Predictor) openStatic(b *models.Bundle, o SessionOptions, rows int) error {
	if !b.Has(models.RoleDecoderStatic) {
		return fmt.Errorf("--cuda-graph: bundle %s has no static decoder graph (decoder_static); add it with `python -m scripts.upgrade_bundle %s`", b.Dir, b.Dir)
	}
	if o.Spin == SpinDecoder {
		o.Spin = SpinOn
	}
	var err error
	if p.captureSO, err = o.buildCapture(o.Provider == ProviderCUDA, 0); err != nil {
		return err
	}
	so := p.captureSO
	if p.opts.DecodePriority {
		// a session of its own: the tower's shares captureSO, and every
		// run of a session with a stream of the caller's is on that stream
		if p.decodeStream, err = cudart.NewPriorityStream(o.CUDADevice); err != nil {
			return fmt.Errorf("--decode-priority: %w", err)
		}
		if p.decoderStaticSO, err = o.buildCapture(true, p.decodeStream.Handle()); err != nil {
			return err
		}
		so = p.decoderStaticSO
	}
	if p.decoderStatic, err = openGraph(b, models.RoleDecoderStatic, so, o.Profile); err != nil {
		return err
	}
	if err := kv.CheckStatic(p.decoderNames, p.decoderStatic.inputs, p.decoderStatic.outputs); err != nil {
		return fmt.Errorf("load %s graph %s: %w", models.RoleDecoderStatic, p.decoderStatic.path, err)
	}
	p.statics.keep = staticKeepCPU
	p.graphRows = rows
	if p.statics.capture = o.Provider == ProviderCUDA; p.statics.capture {
		p.statics.keep = staticKeepCUDA
		p.promptBucket, p.bucketRows, p.graphRows = capturePromptBucket, true, cmp.Or(rows, captureRows)
	}
	if p.graphRows > 0 {
		// now, not inside the first large batch (a server's request)
		if _, err := p.dynamicDecoder(); err != nil {
			return err
		}
	}
	return nil
}

// check refuses option values outside the convention (0 the default,
// NoHistory the one "none").
func (o Options) check() error {
	if o.HistoryWindow < NoHistory {
		return fmt.Errorf("history window %d: want NoHistory (-1), 0 (the bundle's) or more", o.HistoryWindow)
	}
	if o.MaxNewTokens < 0 || o.MaxNewTokens > MaxNewTokensLimit {
		return fmt.Errorf("max new tokens %d: want 0 (the bundle's) to %d", o.MaxNewTokens, MaxNewTokensLimit)
	}
	if o.PromptGroups < 0 || o.PromptGroups > PromptGroupsLimit {
		return fmt.Errorf("prompt groups %d: want 0 (the most) to %d", o.PromptGroups, PromptGroupsLimit)
	}
	if o.VerifyPositions < 0 || o.VerifyPositions > VerifyPositionsLimit {
		return fmt.Errorf("verify positions %d: want 0 (the provider's default) to %d", o.VerifyPositions, VerifyPositionsLimit)
	}
	if o.MaxDraft < 0 || o.MaxDraft > MaxDraftLimit {
		return fmt.Errorf("max draft %d: want 0 (%d) to %d", o.MaxDraft, sample.MaxDraft, MaxDraftLimit)
	}
	if o.AlignPositions < 0 || o.AlignPositions > AlignPositionsLimit {
		return fmt.Errorf("align positions %d: want 0 (none) to %d", o.AlignPositions, AlignPositionsLimit)
	}
	if o.CaptureRows < 0 || o.CaptureRows > CaptureRowsLimit {
		return fmt.Errorf("capture rows %d: want 0 (the provider's default) to %d", o.CaptureRows, CaptureRowsLimit)
	}
	if o.CaptureRows > 0 && !o.CUDAGraph {
		return errors.New("capture rows: only with CUDAGraph (the fixed-buffer decode)")
	}
	if o.DecodePriority && (!o.CUDAGraph || o.Session.Provider != ProviderCUDA) {
		return errors.New("decode priority: a CUDA stream's, only under the cuda provider with CUDAGraph")
	}
	return nil
}

// Close releases the sessions. No call on p may be running: a caller ends
// or cancels its calls first (serve's Shutdown waits for its batches, and
// eval run for its call), since ORT's sessions go with them.
func (p *Predictor) Close() error {
	p.statics.thread.close()
	p.statics.prefill.close()
	p.statics.gate.Lock() // a prefill beside the thread finishes first
	p.statics.closed = true
	p.statics.gate.Unlock()
	p.statics.close()
	p.visionFixed.close()
	p.decoderStatic.close()
	p.encoder.close()
	p.fusion.close()
	p.decoder.close()
	p.decoderCross.close()
	p.vision.close()
	if p.kvOps != nil {
		p.kvOps.Close()
		p.kvOps = nil
	}
	if p.deviceMem != nil {
		p.deviceMem.Destroy()
		p.deviceMem = nil
	}
	for _, so := range []**ort.SessionOptions{&p.so, &p.decoderSO, &p.captureSO, &p.opsSO, &p.decoderStaticSO} {
		if *so != nil {
			(*so).Destroy()
			*so = nil
		}
	}
	err := p.decodeStream.Close() // its session is closed
	p.decodeStream = nil
	return err
}

// Bundle returns the bundle the predictor runs.
func (p *Predictor) Bundle() *models.Bundle { return p.bundle }

// Settings are a predictor's effective prediction settings: its options
// with the bundle's defaults filled in (what a run must record to be
// reproducible).
type Settings struct {
	HistoryWindow     int
	MaxNewTokens      int
	Truncation        Truncation
	Decoding          Decoding
	Constrained       bool
	Provider          Provider
	GraphOptimization GraphOptimization
	// ExactFP32 is cuda without TF32 (SessionOptions.TF32).
	ExactFP32 bool
	// Threads and Spin are the intra-op thread count and whose workers
	// spin-wait: they change speed, never tokens.
	Threads int
	Spin    Spin
}

// Settings returns the effective settings.
func (p *Predictor) Settings() Settings {
	s := Settings{
		HistoryWindow: p.window, MaxNewTokens: p.maxNew, Truncation: p.opts.Truncation,
		Decoding: p.opts.Decoding, Constrained: p.opts.Constrained,
		Provider: p.opts.Session.Provider, GraphOptimization: p.opts.Session.GraphOptimization,
		Threads: p.opts.Session.threads(), Spin: p.opts.Session.Spin,
		ExactFP32: !p.opts.Session.TF32 && p.opts.Session.Provider == ProviderCUDA,
	}
	if s.Provider == "" {
		s.Provider = ProviderCPU
	}
	if s.GraphOptimization == "" {
		s.GraphOptimization = OptimizeAll
	}
	return s
}

// Tokenizer returns the bundle's tokenizer.
func (p *Predictor) Tokenizer() *tokenizer.Tokenizer { return p.tok }

// Shrink is a screenshot at the vision tower's input size, resized exactly
// as preprocessing resizes it: a request with it predicts exactly what one
// with the whole screenshot does (a same-size resize is a copy). A server
// holds it, 4 bytes a pixel of the model's input, instead of the screenshot
// while a request waits.
func (p *Predictor) Shrink(img image.Image) image.Image {
	return preprocess.ResizeBicubic(img, p.prep.Width, p.prep.Height)
}

// VisionCaptureSafe reports whether the bundle marks its vision graph safe
// to capture as a CUDA graph (models.FileSpec.CaptureSafe). Under
// Options.CUDAGraph an unmarked tower runs uncaptured, on its own session:
// ONNX Runtime 1.29's Concat, replayed after another run of its session,
// reads that run's pointers (docs/cuda.md, "CUDA graphs").
func (p *Predictor) VisionCaptureSafe() bool {
	return p.bundle.Manifest.Files[models.RoleVision].CaptureSafe
}

func (p *Predictor) visionGraph() (*graph, error) {
	p.visionOnce.Do(func() {
		so := p.so
		fixed := p.captureSO != nil && (!p.statics.capture || p.VisionCaptureSafe())
		if fixed {
			so = p.captureSO
		}
		p.vision, p.visionErr = openGraph(p.bundle, models.RoleVision, so, p.opts.Session.Profile)
		if p.visionErr == nil && fixed && p.statics.capture && p.graphRows > 0 {
			// batches past graphRows run the tower plainly on its session
			p.vision.runOpts, p.visionErr = ortval.GraphRunOptions(-1)
		}
		if p.visionErr == nil && fixed {
			dim, H, W := int64(p.bundle.Manifest.Vision.OutputDim), int64(p.prep.Height), int64(p.prep.Width)
			f := &fixedGraph{g: p.vision, ops: p.kvOps, mem: p.deviceMem, capture: p.statics.capture,
				bucket: p.bucketRows, in: []int64{3, H, W}, out: []int64{dim}}
			if p.statics.capture {
				f.alone = &p.statics.gate
			}
			p.statics.mu.Lock() // CapturedGraphs reads it from any goroutine
			p.visionFixed = f
			p.statics.mu.Unlock()
		}
	})
	return p.vision, p.visionErr
}

// Decoding selects the decoding strategy. Both produce the same tokens.
type Decoding int

const (
	// DecodeSpeculative drafts the tokens the Auto-UI output format fixes and
	// verifies them in one decoder call (the default).
	DecodeSpeculative Decoding = iota
	// DecodeGreedy runs one decoder call per token: the reference.
	DecodeGreedy
)

// ParseDecoding reads "speculative" or "greedy".
func ParseDecoding(s string) (Decoding, error) {
	switch s {
	case "", "speculative":
		return DecodeSpeculative, nil
	case "greedy":
		return DecodeGreedy, nil
	}
	return 0, fmt.Errorf("unknown decoding %q (want speculative or greedy)", s)
}

func (d Decoding) String() string {
	if d == DecodeGreedy {
		return "greedy"
	}
	return "speculative"
}

// cacheElem is the element type of the decoder graphs' K/V in m: every past
// and present of the decoders and every output of the cross graph, float32
// or float16 (scripts.half --fp16-cache), the same throughout.
func cacheElem(m *models.Manifest) (kv.Elem, error) {
	dtype, err := m.CacheDType()
	if err != nil {
		return 0, err
	}
	e, ok := kv.ParseElem(dtype)
	if !ok {
		return 0, fmt.Errorf("the decoder's K/V are %s: want a float32 or float16 cache", dtype)
	}
	return e, nil
}
