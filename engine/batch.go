package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// PredictBatch predicts the next action for several screens (several
// devices, or several evaluation steps) in one pass: one vision call for all
// screens given as images, one encoder and one fusion call over the prompts
// right-padded to the longest, and decoder calls shared by the whole batch
// (see decodeBatch). Every item gets the same TokenIDs, Raw, Action, Plan and
// SourceText that Predict gives it on its own; per-request MaxNewTokens and
// MinNewTokens and the predictor's options (Constrained, Decoding,
// HistoryWindow, Truncation) apply per item.
//
// Padding costs: every item is encoded and cross-attended at the longest
// prompt's length, so callers with many requests should batch prompts of
// similar length together.
//
// Timings: Preprocess and Tokenize are the item's own. Vision, Encoder,
// Fusion and the decoder steps are batched calls shared by the items: each
// item is attributed the full wall time of every shared call it took part in
// (DecoderCalls counts the decoder calls made while it was still generating),
// so summing a stage over items overcounts it. Total is the wall time from the
// start of the batch to the item's result.
//
// The results are in request order. A bad request fails the whole batch with
// an error naming its index. A batch of one is Predict.
func (p *Predictor) PredictBatch(ctx context.Context, reqs []Request) ([]*Result, error) {
	if len(reqs) == 0 {
		return nil, errors.New("predict batch: empty batch")
	}
	if len(reqs) == 1 {
		res, err := p.Predict(ctx, reqs[0])
		if err != nil {
			return nil, fmt.Errorf("predict batch item 0: %w", err)
		}
		return []*Result{res}, nil
	}
	start := time.Now()
	B := len(reqs)
	res := make([]*Result, B)
	for i, r := range reqs {
		res[i] = &Result{}
		switch {
		case r.Features != nil && len(r.Features) != p.cfg.ImageDim:
			return nil, fmt.Errorf("predict batch item %d: image features have %d values, the bundle's image_dim is %d", i, len(r.Features), p.cfg.ImageDim)
		case r.Features == nil && r.Screen == nil:
			return nil, fmt.Errorf("predict batch item %d: no screen and no image features given", i)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.batchFeatures(ctx, reqs, res); err != nil {
		return nil, err
	}

	// Prompts exactly as Predict builds them, right-padded to the longest.
	prompts := make([][]int64, B)
	n := 0
	for i, r := range reqs {
		t := time.Now()
		var err error
		res[i].SourceText, prompts[i], err = buildPrompt(p.tok, p.bundle.Manifest.Tokens.EOSID, r.Goal, r.History,
			p.window, p.bundle.Manifest.Prompt.MaxSourceTokens, p.scrollMap, p.opts.Truncation)
		if err != nil {
			return nil, fmt.Errorf("predict batch item %d: %w", i, err)
		}
		res[i].SourceTokens = len(prompts[i])
		res[i].SourceIDs = prompts[i]
		res[i].Timings.Tokenize = time.Since(t)
		n = max(n, len(prompts[i]))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The mask is 0 on padding; the encoder, fusion and the decoder's
	// cross-attention all read it, so padded positions never reach an output.
	ids := make([]int64, B*n)
	mask := make([]int64, B*n)
	feats := make([]float32, 0, B*p.cfg.ImageDim)
	for i, pr := range prompts {
		row := ids[i*n : (i+1)*n]
		copy(row, pr)
		for j := len(pr); j < n; j++ {
			row[j] = p.bundle.Manifest.Tokens.PadID
		}
		for j := range pr {
			mask[i*n+j] = 1
		}
		feats = append(feats, res[i].Features...)
	}

	t := time.Now()
	enc, err := p.runEncoder(B, n, ids, mask)
	if err != nil {
		return nil, fmt.Errorf("predict batch of %d: %w", B, err)
	}
	dt := time.Since(t)
	for _, r := range res {
		r.Timings.Encoder = dt
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	t = time.Now()
	fused, err := p.runFusion(B, n, enc, feats, mask)
	if err != nil {
		return nil, fmt.Errorf("predict batch of %d: %w", B, err)
	}
	dt = time.Since(t)
	for _, r := range res {
		r.Timings.Fusion = dt
	}

	if err := p.decodeBatch(ctx, reqs, res, fused, mask, n); err != nil {
		return nil, err
	}

	for _, r := range res {
		p.parse(r, start)
	}
	return res, nil
}

// batchFeatures fills res[i].Features: given features as they are, screens
// preprocessed in parallel and run through the vision tower in one call.
func (p *Predictor) batchFeatures(ctx context.Context, reqs []Request, res []*Result) error {
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
	H, W := p.prep.Height, p.prep.Width
	per := 3 * H * W
	pix := make([]float32, len(need)*per)
	// Resizing a full screenshot is plain Go work: spread it over the cores.
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(need)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				i := need[j]
				t := time.Now()
				copy(pix[j*per:(j+1)*per], p.prep.Pixels(reqs[i].Screen))
				res[i].Timings.Preprocess = time.Since(t)
			}
		}()
	}
	for j := range need {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}

	k := int64(len(need))
	dim := p.bundle.Manifest.Vision.OutputDim
	t := time.Now()
	in, err := ort.NewTensor(ort.NewShape(k, 3, int64(H), int64(W)), pix)
	if err != nil {
		return fmt.Errorf("predict batch: vision input: %w", err)
	}
	defer in.Destroy()
	feat := make([]float32, len(need)*dim)
	out, err := ort.NewTensor(ort.NewShape(k, int64(dim)), feat)
	if err != nil {
		return fmt.Errorf("predict batch: vision output: %w", err)
	}
	defer out.Destroy()
	if err := g.run(map[string]ort.Value{g.inputs[0]: in}, map[string]ort.Value{g.outputs[0]: out}); err != nil {
		return fmt.Errorf("predict batch: %d screens: %w", k, err)
	}
	dt := time.Since(t)
	for j, i := range need {
		res[i].Features = feat[j*dim : (j+1)*dim : (j+1)*dim]
		res[i].Timings.Vision = dt
	}
	return nil
}

// runEncoder runs the T5 encoder on B padded prompts of n tokens: [B, n, d].
func (p *Predictor) runEncoder(B, n int, ids, mask []int64) ([]float32, error) {
	shape := ort.NewShape(int64(B), int64(n))
	idT, err := ort.NewTensor(shape, ids)
	if err != nil {
		return nil, fmt.Errorf("encoder input: %w", err)
	}
	defer idT.Destroy()
	maskT, err := ort.NewTensor(shape, mask)
	if err != nil {
		return nil, fmt.Errorf("encoder input: %w", err)
	}
	defer maskT.Destroy()
	hidden := make([]float32, B*n*p.cfg.DModel)
	outT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), int64(p.cfg.DModel)), hidden)
	if err != nil {
		return nil, fmt.Errorf("encoder output: %w", err)
	}
	defer outT.Destroy()
	err = p.encoder.run(
		map[string]ort.Value{"input_ids": idT, "attention_mask": maskT},
		map[string]ort.Value{"last_hidden_state": outT})
	return hidden, err
}

// runFusion runs the fusion graph on B padded sequences of n states.
func (p *Predictor) runFusion(B, n int, enc, feats []float32, mask []int64) ([]float32, error) {
	d := int64(p.cfg.DModel)
	encT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), d), enc)
	if err != nil {
		return nil, fmt.Errorf("fusion input: %w", err)
	}
	defer encT.Destroy()
	maskT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n)), mask)
	if err != nil {
		return nil, fmt.Errorf("fusion input: %w", err)
	}
	defer maskT.Destroy()
	featT, err := ort.NewTensor(ort.NewShape(int64(B), int64(p.cfg.ImageDim)), feats)
	if err != nil {
		return nil, fmt.Errorf("fusion input: %w", err)
	}
	defer featT.Destroy()
	fused := make([]float32, len(enc))
	outT, err := ort.NewTensor(ort.NewShape(int64(B), int64(n), d), fused)
	if err != nil {
		return nil, fmt.Errorf("fusion output: %w", err)
	}
	defer outT.Destroy()
	err = p.fusion.run(
		map[string]ort.Value{"encoder_hidden_states": encT, "attention_mask": maskT, "image_features": featT},
		map[string]ort.Value{"fused_hidden_states": outT})
	return fused, err
}

// decodeBatch decodes all items together and stores each item's tokens and
// decoder timings in res. The items move in lockstep: every call feeds each
// item the same number k of new positions, so one cache length serves the
// batch (the decoder graph has no self-attention mask that would let rows
// differ). With greedy decoding, or 7 items or more, k is 1. Otherwise
// (speculative, the default) an item's positions are its tokens not yet
// cached followed by drafts (see drafter), right-padded to k; after the call
// every item keeps its verified tokens, and the cache keeps the positions
// verified for all active items, the rest being fed again next call. Every
// item so gets exactly greedy's tokens. An item that produced </s> or
// reached its limit is fed the pad token from then on and its output no
// longer changes; the loop stops when every item is done.
func (p *Predictor) decodeBatch(ctx context.Context, reqs []Request, res []*Result, fused []float32, mask []int64, encLen int) error {
	B := len(reqs)
	eos := p.bundle.Manifest.Tokens.EOSID
	pad := p.bundle.Manifest.Tokens.PadID
	V := p.cfg.VocabSize
	// Positions fed per item per call. A decoder call costs about the same
	// for a few positions as for one only while reading the weights
	// dominates; past that it grows with the positions. So a batch shares
	// one speculative call's worth (maxDraft+1) among its items: small
	// batches still draft, batches of 7 or more are plain greedy.
	width := 1
	if p.opts.Decoding != DecodeGreedy {
		width = max(1, (maxDraft+1)/B)
	}
	type item struct {
		seq            []int64 // decoder start token + generated tokens
		maxNew, minNew int
		done           bool
	}
	items := make([]item, B)
	longest, left := 0, 0
	for i, r := range reqs {
		it := &items[i]
		it.maxNew, it.minNew = p.maxNew, r.MinNewTokens
		if r.MaxNewTokens > 0 {
			it.maxNew = r.MaxNewTokens
		}
		it.seq = make([]int64, 1, it.maxNew+maxDraft+2)
		it.seq[0] = p.bundle.Manifest.Tokens.DecoderStartID
		if it.done = it.maxNew == 0; !it.done {
			left++
		}
		longest = max(longest, it.maxNew)
	}
	// A call never feeds past an item's limit (drafts stop there), so the
	// longest limit plus one call's positions bounds the cache.
	r, err := p.newBatchDecodeRun(B, fused, mask, encLen, longest+width)
	if err != nil {
		return fmt.Errorf("predict batch of %d: %w", B, err)
	}
	defer r.close()

	drafts := make([][]int64, B)
	for calls := 0; left > 0; calls++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		past := int(r.pastLen)
		k := 0
		for i := range items {
			it := &items[i]
			drafts[i] = nil
			if it.done {
				continue
			}
			pending := len(it.seq) - past
			if budget := min(width-pending, it.maxNew-len(it.seq)); budget > 0 {
				drafts[i] = p.drafts.draft(it.seq, budget)
			}
			k = max(k, pending+len(drafts[i]))
		}
		ids := r.input(k)
		for i := range items {
			row := ids[i*k : (i+1)*k]
			n := 0
			if !items[i].done {
				n = copy(row, items[i].seq[past:])
				n += copy(row[n:], drafts[i])
			}
			for j := n; j < k; j++ {
				row[j] = pad
			}
		}
		t := time.Now()
		logits, err := r.step(k)
		if err != nil {
			return fmt.Errorf("predict batch of %d: decoder call %d: %w", B, calls, err)
		}
		dt := time.Since(t)

		keep := -1 // positions verified for every item still active
		for i := range items {
			it := &items[i]
			if it.done {
				continue
			}
			res[i].Timings.addDecoderCall(dt)
			// row pending-1 predicts the token after the last known one;
			// each accepted draft moves one row on
			pending := len(it.seq) - past
			d := drafts[i]
			accepted := 0
			for j := 0; j <= len(d); j++ {
				at := (i*k + pending - 1 + j) * V
				tok := p.choose(logits[at:at+V], it.seq[1:], genLimits{minNew: it.minNew, maxNew: it.maxNew, replay: reqs[i].Replay})
				it.seq = append(it.seq, tok)
				if tok == eos || len(it.seq)-1 >= it.maxNew {
					it.done = true
					left--
					break
				}
				if j == len(d) || tok != d[j] {
					break
				}
				accepted++
			}
			if !it.done && (keep < 0 || pending+accepted < keep) {
				keep = pending + accepted
			}
		}
		if left > 0 {
			r.truncate(int64(past + keep))
		}
	}
	for i := range items {
		res[i].TokenIDs = append(make([]int64, 0, len(items[i].seq)-1), items[i].seq[1:]...)
	}
	return nil
}

// batchDecodeRun is the decoder state of a batch: like decodeRun, with a
// leading batch dimension B on every tensor. Self-attention caches are
// [B, heads, len, d_kv] in two ping-pong buffers sized for the longest
// output; cross-attention K/V are [B, heads, encLen, d_kv], computed by the
// first call and fed back afterwards.
type batchDecodeRun struct {
	p       *Predictor
	B       int64
	encLen  int64
	maxLen  int64
	pastLen int64
	cur     int

	ids     []int64 // the next call's input ids, [B, k]
	logits  []float32
	selfKV  [2][][]float32 // [buffer][layer*2+k/v]
	crossKV [][]float32    // [layer*2+k/v]

	// tensors that live for the whole run
	fusedT, maskT, noCacheT, cacheT ort.Value
	crossT, emptyT                  []ort.Value // [layer*2+k/v]
	// crossOutT receive the cached branch's present.*.encoder.* outputs
	// (empty in the optimum layout, a copy of the past in older bundles):
	// allocated by ORT on the first cached call, then reused.
	crossOutT []ort.Value
}

func (p *Predictor) newBatchDecodeRun(B int, fused []float32, mask []int64, encLen, maxLen int) (*batchDecodeRun, error) {
	r := &batchDecodeRun{p: p, B: int64(B), encLen: int64(encLen), maxLen: int64(maxLen)}
	b := r.B
	d, h, dkv := int64(p.cfg.DModel), int64(p.cfg.NumHeads), int64(p.cfg.DKV)
	L := p.cfg.NumDecoderLayers
	for k := 0; k < 2; k++ {
		r.selfKV[k] = make([][]float32, 2*L)
		for i := range r.selfKV[k] {
			r.selfKV[k][i] = make([]float32, b*h*r.maxLen*dkv)
		}
	}
	r.crossKV = make([][]float32, 2*L)
	for i := range r.crossKV {
		r.crossKV[i] = make([]float32, b*h*r.encLen*dkv)
	}
	fail := func(what string, err error) (*batchDecodeRun, error) {
		r.close()
		return nil, fmt.Errorf("decoder %s: %w", what, err)
	}
	var err error
	if r.fusedT, err = ort.NewTensor(ort.NewShape(b, r.encLen, d), fused); err != nil {
		return fail("encoder_hidden_states", err)
	}
	if r.maskT, err = ort.NewTensor(ort.NewShape(b, r.encLen), mask); err != nil {
		return fail("encoder_attention_mask", err)
	}
	if r.noCacheT, err = ort.NewTensor(ort.NewShape(1), []bool{false}); err != nil {
		return fail("use_cache_branch", err)
	}
	if r.cacheT, err = ort.NewTensor(ort.NewShape(1), []bool{true}); err != nil {
		return fail("use_cache_branch", err)
	}
	for i := range r.crossKV {
		t, err := ort.NewTensor(ort.NewShape(b, h, r.encLen, dkv), r.crossKV[i])
		if err != nil {
			return fail("cross-attention cache", err)
		}
		r.crossT = append(r.crossT, t)
		e, err := ort.NewTensor(ort.NewShape(b, h, 0, dkv), []float32(nil))
		if err != nil {
			return fail("empty past", err)
		}
		r.emptyT = append(r.emptyT, e)
	}
	return r, nil
}

func (r *batchDecodeRun) close() {
	destroyAll(r.fusedT, r.maskT, r.noCacheT, r.cacheT)
	destroyAll(r.crossT...)
	destroyAll(r.emptyT...)
	destroyAll(r.crossOutT...)
}

// input returns the buffer for the next call's ids, [B, k] row-major.
func (r *batchDecodeRun) input(k int) []int64 {
	if need := int(r.B) * k; len(r.ids) < need {
		r.ids = make([]int64, need)
	}
	return r.ids[:int(r.B)*k]
}

// step runs the decoder on the k new positions per item in r.ids after the
// cached past and returns their logits, [B, k, vocab_size].
func (r *batchDecodeRun) step(k int) ([]float32, error) {
	p := r.p
	K := int64(k)
	if r.pastLen+K > r.maxLen {
		return nil, fmt.Errorf("decoder sequence %d exceeds buffer %d (programmer error)", r.pastLen+K, r.maxLen)
	}
	h, dkv, V := int64(p.cfg.NumHeads), int64(p.cfg.DKV), int64(p.cfg.VocabSize)
	if need := r.B * K * V; int64(len(r.logits)) < need {
		r.logits = make([]float32, need)
	}
	useCache := r.pastLen > 0

	var owned callTensors
	defer owned.destroy()
	tensor := owned.float32s
	in := make(map[string]ort.Value, 4+4*len(p.decoderPastNames))
	out := make(map[string]ort.Value, 1+4*len(p.decoderPresNames))
	idsT, err := ort.NewTensor(ort.NewShape(r.B, K), r.ids)
	if err != nil {
		return nil, fmt.Errorf("decoder input ids: %w", err)
	}
	owned = append(owned, idsT)
	in["input_ids"], in["encoder_attention_mask"], in["encoder_hidden_states"] = idsT, r.maskT, r.fusedT
	in["use_cache_branch"] = r.noCacheT
	if useCache {
		in["use_cache_branch"] = r.cacheT
	}
	if out["logits"], err = tensor(ort.NewShape(r.B, K, V), r.logits); err != nil {
		return nil, err
	}

	next := 1 - r.cur
	for l, names := range p.decoderPastNames {
		pres := p.decoderPresNames[l]
		for kv := 0; kv < 2; kv++ {
			if in[names[kv]], err = tensor(ort.NewShape(r.B, h, r.pastLen, dkv), r.selfKV[r.cur][2*l+kv]); err != nil {
				return nil, err
			}
			if out[pres[kv]], err = tensor(ort.NewShape(r.B, h, r.pastLen+K, dkv), r.selfKV[next][2*l+kv]); err != nil {
				return nil, err
			}
			if useCache {
				in[names[2+kv]] = r.crossT[2*l+kv]
				if r.crossOutT != nil {
					out[pres[2+kv]] = r.crossOutT[2*l+kv]
				}
			} else {
				in[names[2+kv]], out[pres[2+kv]] = r.emptyT[2*l+kv], r.crossT[2*l+kv]
			}
		}
	}
	err = p.decoder.run(in, out)
	if useCache && r.crossOutT == nil {
		// keep what ORT allocated (also on error, so close releases it)
		r.crossOutT = make([]ort.Value, 0, 2*len(p.decoderPresNames))
		for _, pres := range p.decoderPresNames {
			r.crossOutT = append(r.crossOutT, out[pres[2]], out[pres[3]])
		}
	}
	if err != nil {
		return nil, err
	}
	r.pastLen += K
	r.cur = next
	return r.logits[:r.B*K*V], nil
}

// truncate keeps the first n cached positions of every item (the rest were
// rejected drafts, padding, or verified for some items only). A buffer is
// [B*heads, T, d_kv]: moving each row's first n positions down, in order,
// never overwrites a row not yet moved.
func (r *batchDecodeRun) truncate(n int64) {
	if n >= r.pastLen {
		return
	}
	keepPositions(r.selfKV[r.cur], r.B*int64(r.p.cfg.NumHeads), r.pastLen, n, int64(r.p.cfg.DKV))
	r.pastLen = n
}
