package engine

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/tokenizer"
)

// MaxNewTokensLimit bounds Options.MaxNewTokens: the self-attention cache is
// sized by it. (A request's own limits are in predict.)
const MaxNewTokensLimit = models.MaxTargetTokensLimit

// Predict returns the next action for one screen: PredictBatch of one.
func (p *Predictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	res, err := p.PredictBatch(ctx, []predict.Request{req})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// PredictBatch predicts the next action for several screens (several
// devices, or several evaluation steps) in one pass: one vision call for all
// screens given as images, an encoder and a fusion call for each group of
// prompts of similar length (prefillText; up to Options.PromptGroups), and
// decoder calls shared by the whole batch (see decode). Every item gets the
// same TokenIDs, Raw, Action, Plan and SourceText that it gets on its own;
// per-request MaxNewTokens, MinNewTokens and Replay and the predictor's
// options (Constrained, Decoding, HistoryWindow, Truncation) apply per item.
//
// Padding costs: every item is cross-attended at the longest prompt's
// length, so callers with many requests gain by batching prompts of similar
// length together.
//
// Timings: Tokenize is the item's own. Preprocess (the screens resized
// together, over the cores), Vision, Encoder, Fusion (per group of
// prompts) and the decoder steps are batched work shared by the items: each
// item is attributed the full wall time of every shared call it took part in
// (DecoderCalls counts the decoder calls made while it was still generating),
// so summing a stage over items overcounts it. Total is the wall time from the
// start of the batch to the item's result.
//
// The results are in request order. A bad request fails the whole batch with
// an error naming its index (in batches of more than one).
//
// Under capture the decoder calls run on the capture thread, one batch at a
// time; a batch whose prefill runs no graph that may be captured (its
// screens, if any, are too many for the vision tower's fixed buffers)
// prefills on a thread of its own first (the prefill thread), so that
// concurrent calls see one batch's screens and prompts while another
// decodes.
func (p *Predictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	if p.statics.capture && p.prefillsBeside(reqs) {
		b, err := p.prefillBeside(ctx, reqs)
		if err != nil {
			return nil, err
		}
		return p.decodePrefilled(ctx, b)
	}
	var res []*predict.Result
	var err error
	if cerr := p.engineCall(ctx, func() { res, err = p.predictBatch(ctx, reqs) }); cerr != nil {
		return nil, cerr
	}
	return res, err
}

// prefilledBatch is a batch up to its decode: its sequences, results
// (prefill's timings) and the fused states and mask the decoder
// cross-attends.
type prefilledBatch struct {
	start    time.Time
	seqs     []*sequence
	res      []*predict.Result
	fused    encoded
	mask     []int64
	batchErr func(error) error
}

// prefillNew checks a batch's requests, started at start, makes their
// sequences and results, and prefills them (beside: prefill's).
func (p *Predictor) prefillNew(ctx context.Context, reqs []predict.Request, start time.Time, beside bool) (*prefilledBatch, error) {
	if len(reqs) == 0 {
		return nil, errors.New("predict batch: empty batch")
	}
	b := &prefilledBatch{start: start, seqs: make([]*sequence, len(reqs)), res: make([]*predict.Result, len(reqs))}
	itemErr, batchErr := batchErrors(len(reqs), "predict batch")
	b.batchErr = batchErr
	for i, r := range reqs {
		b.res[i] = &predict.Result{}
		var err error
		if b.seqs[i], err = p.sequence(r, &b.res[i].Timings); err != nil {
			return nil, itemErr(i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var err error
	if b.fused, b.mask, err = p.prefill(ctx, reqs, b.res, itemErr, batchErr, beside); err != nil {
		return nil, err
	}
	return b, nil
}

// prefillsBeside reports whether a batch's prefill, under capture, runs
// beside the capture thread: where it runs no graph that may be captured,
// its screens (if any) too many for the tower's fixed buffers.
func (p *Predictor) prefillsBeside(reqs []predict.Request) bool {
	screens := 0
	for _, r := range reqs {
		if r.Features == nil {
			screens++
		}
	}
	return screens == 0 || !p.visionRows(screens)
}

// prefillBeside prefills a batch beside the capture thread, on the prefill
// thread (PredictBatch, where prefillsBeside says).
func (p *Predictor) prefillBeside(ctx context.Context, reqs []predict.Request) (b *prefilledBatch, err error) {
	start := time.Now()
	if cerr := p.statics.prefill.do(ctx, func() { b, err = p.prefillBatch(ctx, reqs, start) }); cerr != nil {
		return nil, cerr
	}
	return b, err
}

// prefillBatch is prefillBeside's work, on the prefill thread.
func (p *Predictor) prefillBatch(ctx context.Context, reqs []predict.Request, start time.Time) (*prefilledBatch, error) {
	p.statics.gate.RLock() // no capture meanwhile: opening the tower allocates, and so do its runs
	defer p.statics.gate.RUnlock()
	if p.statics.closed {
		return nil, errClosed
	}
	return p.prefillNew(ctx, reqs, start, true)
}

// decodePrefilled decodes a prefilled batch on the capture thread (or
// where the caller is, without capture) and releases its states.
func (p *Predictor) decodePrefilled(ctx context.Context, b *prefilledBatch) ([]*predict.Result, error) {
	defer b.fused.release()
	var err error
	if cerr := p.engineCall(ctx, func() { err = p.decodeBatch(ctx, b) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return b.res, nil
}

// decodeBatch decodes a prefilled batch and parses its outputs.
func (p *Predictor) decodeBatch(ctx context.Context, b *prefilledBatch) error {
	for i, s := range b.seqs {
		p.draftWithPrompt(s, b.res[i].SourceIDs)
	}
	if err := p.decode(ctx, b.seqs, b.fused, b.mask); err != nil {
		return b.batchErr(err)
	}
	for i, r := range b.res {
		p.parse(r, b.seqs[i], b.start)
	}
	return nil
}

// engineCall runs f, on the capture thread under capture (captureThread
// says why); it fails only when f could not start there.
func (p *Predictor) engineCall(ctx context.Context, f func()) error {
	if p.statics.capture {
		return p.statics.thread.do(ctx, f)
	}
	f()
	return nil
}

func (p *Predictor) predictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	b, err := p.prefillNew(ctx, reqs, time.Now(), false)
	if err != nil {
		return nil, err
	}
	defer b.fused.release()
	if err := p.decodeBatch(ctx, b); err != nil {
		return nil, err
	}
	return b.res, nil
}

// draftWithPrompt has s's drafter, if it drafts, also draft from its
// prompt's tokens (src), once they are known.
func (p *Predictor) draftWithPrompt(s *sequence, src []int64) {
	if s.draft != nil {
		s.draft = p.drafts.WithPrompt(src)
	}
}

// batchErrors wrap the errors of a batch of B requests, named what: one
// item's, naming its index, and the whole batch's (a cancellation as it
// is); a batch of one's as they are.
func batchErrors(B int, what string) (itemErr func(int, error) error, batchErr func(error) error) {
	itemErr = func(i int, err error) error {
		if B == 1 {
			return err
		}
		return fmt.Errorf("%s item %d: %w", what, i, err)
	}
	batchErr = func(err error) error {
		if B == 1 || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("%s of %d: %w", what, B, err)
	}
	return itemErr, batchErr
}

// prefill runs a batch's screens and prompts up to the fused states [B, n,
// d] the decoder cross-attends, and their mask [B, n]; its errors are
// wrapped by itemErr and batchErr as PredictBatch returns them. beside is a
// prefill that runs beside the capture thread's decoder calls (a stream's
// overlapped join): it runs no graph that may be captured, whatever its
// thread.
func (p *Predictor) prefill(ctx context.Context, reqs []predict.Request, res []*predict.Result,
	itemErr func(int, error) error, batchErr func(error) error, beside bool) (encoded, []int64, error) {
	// The text's prefill needs no image: under overlapPrefill it runs while
	// the screens are resized and the vision tower runs.
	var text prefilled
	var textErr error
	var wg sync.WaitGroup
	textCtx, stopText := context.WithCancel(ctx) // the screens failed: no more encoding
	defer stopText()
	if p.overlapPrefill {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, textErr = p.prefillText(textCtx, reqs, res, itemErr, batchErr)
		}()
	}
	var gate func() // run between resizing the screens and the vision tower
	if p.overlapPrefill && p.statics.capture {
		// The vision tower may be capturing, and a capture must see no
		// other CUDA work: then the prompts are encoded while the screens
		// are resized, and the tower waits for them.
		gate = wg.Wait
	}
	featErr := p.features(ctx, reqs, res, gate, beside)
	if p.overlapPrefill {
		if featErr != nil {
			stopText()
		}
		wg.Wait()
	} else if featErr == nil {
		text, textErr = p.prefillText(ctx, reqs, res, itemErr, batchErr)
	}
	defer text.release()
	if featErr != nil {
		return encoded{}, nil, batchErr(featErr)
	}
	if textErr != nil {
		return encoded{}, nil, textErr
	}
	if err := ctx.Err(); err != nil {
		return encoded{}, nil, err
	}
	fused, err := p.fuse(text, res)
	if err != nil {
		return encoded{}, nil, batchErr(err)
	}
	return fused, text.mask, nil
}

// Check reports whether PredictBatch would take r, with the error it would
// give: a caller that batches requests of its own (a server) checks each
// alone, so that one bad request does not fail a batch.
func (p *Predictor) Check(r predict.Request) error {
	_, err := p.sequence(r, &predict.Timings{})
	return err
}

// sequence checks a request (every path goes through here) and makes its
// decoding state: the token limit and the chooser and drafter its options
// ask for. Its errors are RequestErrors: the request, not the engine, is
// at fault.
func (p *Predictor) sequence(r predict.Request, tm *predict.Timings) (*sequence, error) {
	s, err := p.newSequence(r, tm)
	if err != nil {
		return nil, &predict.RequestError{Err: err}
	}
	return s, nil
}

func (p *Predictor) newSequence(r predict.Request, tm *predict.Timings) (*sequence, error) {
	if err := r.CheckSize(); err != nil {
		return nil, err
	}
	switch {
	case r.Features != nil:
		if len(r.Features) != p.cfg.ImageDim {
			return nil, fmt.Errorf("image features have %d values, the bundle's image_dim is %d", len(r.Features), p.cfg.ImageDim)
		}
		for i, v := range r.Features {
			if v != v || v > math.MaxFloat32 || v < -math.MaxFloat32 {
				return nil, fmt.Errorf("image feature %d is %v: features must be finite", i, v)
			}
		}
	case r.Screen == nil:
		return nil, errors.New("no screen and no image features given")
	}
	if r.MaxNewTokens < 0 || r.MinNewTokens < 0 {
		return nil, fmt.Errorf("token limits must not be negative (max %d, min %d)", r.MaxNewTokens, r.MinNewTokens)
	}
	for i, a := range r.History {
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("history action %d: %w", i, err)
		}
	}
	limit := p.maxNew
	if r.MaxNewTokens > p.maxNew {
		return nil, fmt.Errorf("max_new_tokens %d is over this model's limit of %d", r.MaxNewTokens, p.maxNew)
	}
	if r.MaxNewTokens > 0 {
		limit = r.MaxNewTokens
	}
	eos := p.bundle.Manifest.Tokens.EOSID
	var choose sample.Chooser = sample.Argmax{}
	switch {
	case r.Replay != nil:
		if len(r.Replay) >= limit {
			return nil, fmt.Errorf("replay of %d tokens does not fit the %d-token limit with its </s>", len(r.Replay), limit)
		}
		for i, id := range r.Replay {
			if id < 0 || id >= int64(p.cfg.VocabSize) {
				return nil, fmt.Errorf("replay token %d is %d, outside the vocabulary of %d", i, id, p.cfg.VocabSize)
			}
		}
		choose = sample.Replay{Tokens: r.Replay, EOS: eos}
	case p.opts.Constrained || r.Constrained:
		g, err := p.grammars.New(limit)
		if err != nil {
			return nil, err
		}
		choose = g
	}
	if r.MinNewTokens > 0 && r.Replay == nil {
		choose = sample.MinLength{N: r.MinNewTokens, EOS: eos, Next: choose}
	}
	s := &sequence{tokens: make([]int64, 1, limit+p.maxDraft+2), limit: limit, choose: choose, tm: tm}
	s.tokens[0] = p.bundle.Manifest.Tokens.DecoderStartID
	if p.opts.Decoding != DecodeGreedy {
		s.draft = p.drafts
	}
	return s, nil
}

// parse sets the result's tokens from s's output, detokenizes them as
// Auto-UI does and parses the action; an unparsable output is recorded, not
// an error. It closes the timings (Total from start).
func (p *Predictor) parse(res *predict.Result, s *sequence, start time.Time) {
	res.TokenIDs = append(make([]int64, 0, len(s.out())), s.out()...)
	t := time.Now()
	res.Raw = p.tok.Decode(res.TokenIDs, tokenizer.DecodeOptions{SkipSpecial: true, CleanUpSpaces: true})
	out, perr := action.ParseOutput(res.Raw)
	if s.broken != nil {
		perr = s.broken
	}
	if perr != nil {
		res.ParseErr = perr
		res.Action = action.Action{Touch: action.NoPoint, Lift: action.NoPoint}
	} else {
		res.Action, res.Plan = out.Action, out.Plan
	}
	res.Timings.Parse = time.Since(t)
	res.Timings.Total = time.Since(start)
}

// ImageFeatures runs preprocessing and the vision tower on one screenshot.
func (p *Predictor) ImageFeatures(ctx context.Context, img image.Image) ([]float32, error) {
	if img == nil {
		return nil, errors.New("no screen given")
	}
	res := []*predict.Result{{}}
	var err error
	if cerr := p.engineCall(ctx, func() { err = p.features(ctx, []predict.Request{{Screen: img}}, res, nil, false) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return res[0].Features, nil
}

// features fills res[i].Features: given features as they are, screens
// preprocessed in parallel and run through the vision tower in one call
// (after gate, when given, has returned); beside, never on the tower's
// fixed buffers (prefill).
func (p *Predictor) features(ctx context.Context, reqs []predict.Request, res []*predict.Result, gate func(), beside bool) error {
	var need []int
	for i, r := range reqs {
		if r.Features != nil {
			res[i].Features = r.Features
		} else {
			need = append(need, i)
		}
	}
	if len(need) == 0 {
		return nil
	}
	g, err := p.visionGraph()
	if err != nil {
		return err
	}
	per := p.prep.Len()
	// Resizing a full screenshot is plain Go work: spread it over the cores,
	// straight into the vision tower's input.
	fixed := p.fixedVision(len(need)) && !beside
	if !fixed || !p.visionFixed.mayCapture(len(need)) {
		gate = nil // a replay or a plain run may overlap the encoder
	}
	var fillErr error
	var prep, waited time.Duration
	fill := func(pix []float32) error {
		t := time.Now()
		fillErr = preprocess.Parallel(len(need), func(j int) error {
			return p.prep.PixelsInto(pix[j*per:(j+1)*per], reqs[need[j]].Screen)
		})
		if fillErr == nil {
			fillErr = ctx.Err()
		}
		prep = time.Since(t)
		for _, i := range need {
			// every screen waits for the batch's: a shared stage, like vision
			res[i].Timings.Preprocess = prep
		}
		if gate != nil && fillErr == nil {
			gate()
			waited = time.Since(t) - prep
			fillErr = ctx.Err()
		}
		return fillErr
	}

	dim := p.bundle.Manifest.Vision.OutputDim
	t := time.Now()
	feat := make([]float32, len(need)*dim)
	err = p.runVision(g, len(need), fill, feat, fixed)
	switch {
	case fillErr != nil:
		return fillErr
	case err != nil:
		return fmt.Errorf("%d screens: %w", len(need), err)
	}
	dt := time.Since(t) - prep - waited
	for j, i := range need {
		res[i].Features = feat[j*dim : (j+1)*dim : (j+1)*dim]
		res[i].Timings.Vision = dt
	}
	return nil
}

// encoded is a batch's encoder or fused states, [B, n, d]: in Go memory, or
// where ORT computed them when the decode keeps its state on the device
// (under cuda the chain encoder -> fusion -> cross-attention projection
// never crosses the bus: at batch 64 and 490-token prompts each hop was
// 96 MB each way).
type encoded struct {
	host []float32
	dev  *ort.OwnedValue
}

func (e encoded) release() {
	if e.dev != nil {
		e.dev.Destroy()
	}
}

// value is e as an ORT value [B, n, d] and what releases it.
func (e encoded) value(B, n, d int) (ort.Value, func(), error) {
	if e.dev != nil {
		return e.dev, func() {}, nil
	}
	t, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), int64(d)), e.host)
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Destroy() }, nil
}

// runVision runs the vision tower on k screens, whose pixels fill writes
// into its input, into their features: on fixed buffers (fixedGraph, where
// fixedVision says) when fixed, else as any graph.
func (p *Predictor) runVision(g *graph, k int, fill func(pix []float32) error, feat []float32, fixed bool) error {
	if fixed {
		return p.visionFixed.run(k, fill, feat)
	}
	pix := make([]float32, k*p.prep.Len())
	if err := fill(pix); err != nil {
		return err
	}
	H, W := int64(p.prep.Height), int64(p.prep.Width)
	in, err := ort.NewTensor(ort.NewShape(int64(k), 3, H, W), pix)
	if err != nil {
		return fmt.Errorf("vision input: %w", err)
	}
	defer in.Destroy()
	out, err := ort.NewTensor(ort.NewShape(int64(k), int64(len(feat)/k)), feat)
	if err != nil {
		return fmt.Errorf("vision output: %w", err)
	}
	defer out.Destroy()
	ins, outs := g.values()
	ins[0], outs[0] = in, out // the vision graph's one input and output
	return g.run(ins, outs)
}

// runEncoder runs the T5 encoder on B padded prompts of n tokens: [B, n, d],
// on the device when the decode's state is.
func (p *Predictor) runEncoder(B, n int, ids, mask []int64) (encoded, error) {
	shape := ort.NewShape(int64(B), int64(n))
	idT, err := ort.NewTensor(shape, ids)
	if err != nil {
		return encoded{}, fmt.Errorf("encoder input: %w", err)
	}
	defer idT.Destroy()
	maskT, err := ort.NewTensor(shape, mask)
	if err != nil {
		return encoded{}, fmt.Errorf("encoder input: %w", err)
	}
	defer maskT.Destroy()
	g := p.encoder
	ins, outs := g.values()
	ins[g.in["input_ids"]], ins[g.in["attention_mask"]] = idT, maskT
	if p.cachePlace != placeHost {
		dev, err := g.runOnDevice(ins, "last_hidden_state", p.deviceMem)
		return encoded{dev: dev}, err
	}
	hidden := make([]float32, B*n*p.cfg.DModel)
	outT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), int64(p.cfg.DModel)), hidden)
	if err != nil {
		return encoded{}, fmt.Errorf("encoder output: %w", err)
	}
	defer outT.Destroy()
	outs[g.out["last_hidden_state"]] = outT
	return encoded{host: hidden}, g.run(ins, outs)
}

// runFusion runs the fusion graph on B padded sequences of n states, where
// enc is.
func (p *Predictor) runFusion(B, n int, enc encoded, feats []float32, mask []int64) (encoded, error) {
	d := p.cfg.DModel
	encV, done, err := enc.value(B, n, d)
	if err != nil {
		return encoded{}, fmt.Errorf("fusion input: %w", err)
	}
	defer done()
	maskT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n)), mask)
	if err != nil {
		return encoded{}, fmt.Errorf("fusion input: %w", err)
	}
	defer maskT.Destroy()
	featT, err := ort.NewTensor(ort.NewShape(int64(B), int64(p.cfg.ImageDim)), feats)
	if err != nil {
		return encoded{}, fmt.Errorf("fusion input: %w", err)
	}
	defer featT.Destroy()
	g := p.fusion
	ins, outs := g.values()
	ins[g.in["encoder_hidden_states"]], ins[g.in["attention_mask"]], ins[g.in["image_features"]] = encV, maskT, featT
	if enc.dev != nil {
		dev, err := g.runOnDevice(ins, "fused_hidden_states", p.deviceMem)
		return encoded{dev: dev}, err
	}
	fused := make([]float32, B*n*d)
	outT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), int64(d)), fused)
	if err != nil {
		return encoded{}, fmt.Errorf("fusion output: %w", err)
	}
	defer outT.Destroy()
	outs[g.out["fused_hidden_states"]] = outT
	return encoded{host: fused}, g.run(ins, outs)
}
