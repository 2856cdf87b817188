package engine

import (
	"context"
	"errors"
	"fmt"
	"image"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/tokenizer"
)

// Options configure a Predictor. The zero value uses the bundle's settings.
type Options struct {
	Session SessionOptions
	// Truncation is the prompt truncation policy (default KeepGoal).
	Truncation Truncation
	// HistoryWindow overrides the bundle's history window when > 0; negative
	// means no history (the "Goal: ..." prompt).
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
}

// Predictor runs a bundle. It is safe for concurrent use: sessions are
// shared, every request has its own buffers.
type Predictor struct {
	bundle    *models.Bundle
	cfg       models.ModelConfig
	tok       *tokenizer.Tokenizer
	prep      preprocess.Config
	scrollMap action.ScrollMap
	opts      Options
	window    int
	maxNew    int
	so        *ort.SessionOptions

	encoder, fusion, decoder *graph

	// The vision tower loads on first use: evaluation from precomputed
	// features (Auto-UI's pickles, a feature cache) never pays for it.
	visionOnce sync.Once
	vision     *graph
	visionErr  error

	drafts *drafter

	decoderPastNames [][4]string // per layer: decoder key, decoder value, encoder key, encoder value
	decoderPresNames [][4]string
}

// NewPredictor opens the bundle's graphs and tokenizer.
func NewPredictor(b *models.Bundle, opts Options) (*Predictor, error) {
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
	case opts.HistoryWindow < 0:
		p.window = 0
	}
	if opts.MaxNewTokens > 0 {
		p.maxNew = opts.MaxNewTokens
	}
	if p.drafts, err = newDrafter(tok, m.Tokens.EOSID); err != nil {
		return nil, err
	}
	p.so, err = opts.Session.build()
	if err != nil {
		return nil, err
	}
	for _, g := range []struct {
		role models.Role
		dst  **graph
	}{{models.RoleEncoder, &p.encoder}, {models.RoleFusion, &p.fusion}, {models.RoleDecoder, &p.decoder}} {
		if *g.dst, err = openGraph(b, g.role, p.so); err != nil {
			p.Close()
			return nil, err
		}
	}
	for i := 0; i < p.cfg.NumDecoderLayers; i++ {
		p.decoderPastNames = append(p.decoderPastNames, [4]string{
			fmt.Sprintf("past_key_values.%d.decoder.key", i), fmt.Sprintf("past_key_values.%d.decoder.value", i),
			fmt.Sprintf("past_key_values.%d.encoder.key", i), fmt.Sprintf("past_key_values.%d.encoder.value", i),
		})
		p.decoderPresNames = append(p.decoderPresNames, [4]string{
			fmt.Sprintf("present.%d.decoder.key", i), fmt.Sprintf("present.%d.decoder.value", i),
			fmt.Sprintf("present.%d.encoder.key", i), fmt.Sprintf("present.%d.encoder.value", i),
		})
	}
	return p, nil
}

// Close releases the sessions.
func (p *Predictor) Close() error {
	p.encoder.close()
	p.fusion.close()
	p.decoder.close()
	p.vision.close()
	if p.so != nil {
		p.so.Destroy()
		p.so = nil
	}
	return nil
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
}

// Settings returns the effective settings.
func (p *Predictor) Settings() Settings {
	s := Settings{
		HistoryWindow: p.window, MaxNewTokens: p.maxNew, Truncation: p.opts.Truncation,
		Decoding: p.opts.Decoding, Constrained: p.opts.Constrained,
		Provider: p.opts.Session.Provider, GraphOptimization: p.opts.Session.GraphOptimization,
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

func (p *Predictor) visionGraph() (*graph, error) {
	p.visionOnce.Do(func() {
		p.vision, p.visionErr = openGraph(p.bundle, models.RoleVision, p.so)
	})
	return p.vision, p.visionErr
}

// ImageFeatures runs preprocessing and the vision tower on one screenshot.
func (p *Predictor) ImageFeatures(ctx context.Context, img image.Image) ([]float32, error) {
	f, _, _, err := p.imageFeatures(ctx, img)
	return f, err
}

func (p *Predictor) imageFeatures(ctx context.Context, img image.Image) (feat []float32, prep, vis time.Duration, err error) {
	if img == nil {
		return nil, 0, 0, errors.New("no screen and no image features given")
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	g, err := p.visionGraph()
	if err != nil {
		return nil, 0, 0, err
	}
	t0 := time.Now()
	pix := p.prep.Pixels(img)
	prep = time.Since(t0)
	t1 := time.Now()
	in, err := ort.NewTensor(ort.NewShape(1, 3, int64(p.prep.Height), int64(p.prep.Width)), pix)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("vision input: %w", err)
	}
	defer in.Destroy()
	feat = make([]float32, p.bundle.Manifest.Vision.OutputDim)
	out, err := ort.NewTensor(ort.NewShape(1, int64(len(feat))), feat)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("vision output: %w", err)
	}
	defer out.Destroy()
	if err := g.run(map[string]ort.Value{g.inputs[0]: in}, map[string]ort.Value{g.outputs[0]: out}); err != nil {
		return nil, 0, 0, err
	}
	return feat, prep, time.Since(t1), nil
}

// Predict returns the next action for one screen.
func (p *Predictor) Predict(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	res := &Result{}
	var err error
	if req.Features != nil {
		if len(req.Features) != p.cfg.ImageDim {
			return nil, fmt.Errorf("image features have %d values, the bundle's image_dim is %d", len(req.Features), p.cfg.ImageDim)
		}
		res.Features = req.Features
	} else {
		res.Features, res.Timings.Preprocess, res.Timings.Vision, err = p.imageFeatures(ctx, req.Screen)
		if err != nil {
			return nil, err
		}
	}

	t := time.Now()
	var ids []int64
	res.SourceText, ids, err = buildPrompt(p.tok, p.bundle.Manifest.Tokens.EOSID, req.Goal, req.History,
		p.window, p.bundle.Manifest.Prompt.MaxSourceTokens, p.scrollMap, p.opts.Truncation)
	if err != nil {
		return nil, err
	}
	res.SourceTokens = len(ids)
	res.SourceIDs = ids
	res.Timings.Tokenize = time.Since(t)

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Every prompt token is real (no padding): one all-ones mask serves the
	// encoder, the fusion and the decoder's cross-attention.
	mask := make([]int64, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	t = time.Now()
	enc, err := p.encode(ids, mask)
	if err != nil {
		return nil, err
	}
	res.Timings.Encoder = time.Since(t)

	t = time.Now()
	fused, err := p.fuse(enc, res.Features, mask)
	if err != nil {
		return nil, err
	}
	res.Timings.Fusion = time.Since(t)

	maxNew := p.maxNew
	if req.MaxNewTokens > 0 {
		maxNew = req.MaxNewTokens
	}
	decode := p.speculative
	if p.opts.Decoding == DecodeGreedy {
		decode = p.greedy
	}
	if req.Replay != nil && len(req.Replay) >= maxNew {
		return nil, fmt.Errorf("replay of %d tokens does not fit the %d-token limit with its </s>", len(req.Replay), maxNew)
	}
	g := genLimits{minNew: req.MinNewTokens, maxNew: maxNew, replay: req.Replay}
	res.TokenIDs, err = decode(ctx, fused, mask, g, &res.Timings)
	if err != nil {
		return nil, err
	}

	p.parse(res, start)
	return res, nil
}

// parse detokenizes the result's tokens as Auto-UI does and parses the
// action; an unparsable output is recorded, not an error. It closes the
// timings (Total from start).
func (p *Predictor) parse(res *Result, start time.Time) {
	t := time.Now()
	res.Raw = p.tok.Decode(res.TokenIDs, tokenizer.DecodeOptions{SkipSpecial: true, CleanUpSpaces: true})
	out, perr := action.ParseOutput(res.Raw)
	if perr != nil {
		res.ParseErr = perr
	} else {
		res.Action, res.Plan = out.Action, out.Plan
	}
	res.Timings.Parse = time.Since(t)
	res.Timings.Total = time.Since(start)
}

// encode runs the T5 encoder on one prompt: [1, n, d].
func (p *Predictor) encode(ids, mask []int64) ([]float32, error) {
	return p.runEncoder(1, len(ids), ids, mask)
}

// fuse runs the fusion graph on one prompt: encoder states + image vector ->
// fused states.
func (p *Predictor) fuse(enc, feat []float32, mask []int64) ([]float32, error) {
	return p.runFusion(1, len(mask), enc, feat, mask)
}
