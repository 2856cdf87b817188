package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// decodeRun is the decoder state of one request: the fused encoder states,
// the cross-attention K/V (computed by the first call, then reused), and the
// self-attention cache in two ping-pong buffers sized for the longest output,
// so the loop allocates no tensor memory as it grows.
type decodeRun struct {
	p       *Predictor
	tm      *Timings // decoder calls are timed and counted here
	encLen  int64
	maxLen  int64 // longest decoder sequence the buffers hold
	pastLen int64
	cur     int // which self-attention buffer holds the past

	fusedT, maskT ort.Value
	selfKV        [2][][]float32 // [buffer][layer*2+k/v], each heads*maxLen*dkv
	crossKV       [][]float32    // [layer*2+k/v], heads*encLen*dkv
	logits        []float32
	empty         []float32
}

func (p *Predictor) newDecodeRun(fused []float32, mask []int64, maxLen int, tm *Timings) (*decodeRun, error) {
	r := &decodeRun{p: p, tm: tm, encLen: int64(len(mask)), maxLen: int64(maxLen)}
	d := int64(p.cfg.DModel)
	var err error
	if r.fusedT, err = ort.NewTensor(ort.NewShape(1, r.encLen, d), fused); err != nil {
		return nil, fmt.Errorf("decoder input: %w", err)
	}
	if r.maskT, err = ort.NewTensor(ort.NewShape(1, r.encLen), mask); err != nil {
		r.close()
		return nil, fmt.Errorf("decoder input: %w", err)
	}
	L := p.cfg.NumDecoderLayers
	h, dkv := int64(p.cfg.NumHeads), int64(p.cfg.DKV)
	for b := 0; b < 2; b++ {
		r.selfKV[b] = make([][]float32, 2*L)
		for i := range r.selfKV[b] {
			r.selfKV[b][i] = make([]float32, h*r.maxLen*dkv)
		}
	}
	r.crossKV = make([][]float32, 2*L)
	for i := range r.crossKV {
		r.crossKV[i] = make([]float32, h*r.encLen*dkv)
	}
	return r, nil
}

func (r *decodeRun) close() {
	destroyAll(r.fusedT, r.maskT)
}

// step runs the decoder on the given new tokens after the cached past and
// returns their logits, len(tokens) rows of vocab_size. The first call
// computes the cross-attention K/V; later calls reuse them.
func (r *decodeRun) step(tokens []int64) ([]float32, error) {
	p := r.p
	k := int64(len(tokens))
	if r.pastLen+k > r.maxLen {
		return nil, fmt.Errorf("decoder sequence %d exceeds buffer %d (programmer error)", r.pastLen+k, r.maxLen)
	}
	h, dkv, V := int64(p.cfg.NumHeads), int64(p.cfg.DKV), int64(p.cfg.VocabSize)
	if need := k * V; int64(len(r.logits)) < need {
		r.logits = make([]float32, need)
	}
	useCache := r.pastLen > 0

	var owned []ort.Value
	defer func() { destroyAll(owned...) }()
	tensor := func(shape ort.Shape, data []float32) (ort.Value, error) {
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("decoder tensor %v: %w", shape, err)
		}
		owned = append(owned, t)
		return t, nil
	}

	in := make(map[string]ort.Value, 4+4*len(p.decoderPastNames))
	out := make(map[string]ort.Value, 1+4*len(p.decoderPresNames))
	idT, err := ort.NewTensor(ort.NewShape(1, k), tokens)
	if err != nil {
		return nil, fmt.Errorf("decoder input ids: %w", err)
	}
	owned = append(owned, idT)
	flag, err := ort.NewTensor(ort.NewShape(1), []bool{useCache})
	if err != nil {
		return nil, fmt.Errorf("decoder use_cache_branch: %w", err)
	}
	owned = append(owned, flag)
	in["input_ids"], in["encoder_attention_mask"], in["encoder_hidden_states"], in["use_cache_branch"] = idT, r.maskT, r.fusedT, flag

	logT, err := tensor(ort.NewShape(1, k, V), r.logits)
	if err != nil {
		return nil, err
	}
	out["logits"] = logT

	next := 1 - r.cur
	for l, names := range p.decoderPastNames {
		pres := p.decoderPresNames[l]
		for kv := 0; kv < 2; kv++ {
			// self-attention: past from the current buffer, present into the other
			past, err := tensor(ort.NewShape(1, h, r.pastLen, dkv), r.selfKV[r.cur][2*l+kv])
			if err != nil {
				return nil, err
			}
			in[names[kv]] = past
			present, err := tensor(ort.NewShape(1, h, r.pastLen+k, dkv), r.selfKV[next][2*l+kv])
			if err != nil {
				return nil, err
			}
			out[pres[kv]] = present
			// cross-attention: computed by the first call into crossKV, fed
			// back afterwards. Cached calls return them empty (optimum layout;
			// older bundles pass a copy through): left to ORT, then dropped.
			if useCache {
				if in[names[2+kv]], err = tensor(ort.NewShape(1, h, r.encLen, dkv), r.crossKV[2*l+kv]); err != nil {
					return nil, err
				}
				continue
			}
			if in[names[2+kv]], err = tensor(ort.NewShape(1, h, 0, dkv), r.empty); err != nil {
				return nil, err
			}
			if out[pres[2+kv]], err = tensor(ort.NewShape(1, h, r.encLen, dkv), r.crossKV[2*l+kv]); err != nil {
				return nil, err
			}
		}
	}
	t := time.Now()
	err = p.decoder.run(in, out)
	if useCache {
		for _, pres := range p.decoderPresNames {
			destroyAll(out[pres[2]], out[pres[3]])
		}
	}
	if err != nil {
		return nil, err
	}
	if r.tm.DecoderCalls == 0 {
		r.tm.FirstStep = time.Since(t)
	} else {
		r.tm.LaterSteps += time.Since(t)
	}
	r.tm.DecoderCalls++
	r.pastLen += k
	r.cur = next
	return r.logits[:k*V], nil
}

// greedy is the reference decoding: argmax each step, stop at </s> or the
// token limit. Returned ids exclude the decoder start token.
func (p *Predictor) greedy(ctx context.Context, fused []float32, mask []int64, minNew, maxNew int, tm *Timings) ([]int64, error) {
	r, err := p.newDecodeRun(fused, mask, maxNew, tm)
	if err != nil {
		return nil, err
	}
	defer r.close()
	eos := p.bundle.Manifest.Tokens.EOSID
	tok := p.bundle.Manifest.Tokens.DecoderStartID
	out := make([]int64, 0, maxNew)
	for len(out) < maxNew {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		logits, err := r.step([]int64{tok})
		if err != nil {
			return nil, err
		}
		tok = p.pickToken(logits, out, minNew)
		out = append(out, tok)
		if tok == eos {
			break
		}
	}
	return out, nil
}

// pickToken chooses the token after out from one row of logits: </s> is
// masked while fewer than minNew tokens exist, then argmax (or the
// grammar-constrained choice). The row is scratch.
func (p *Predictor) pickToken(row []float32, out []int64, minNew int) int64 {
	if len(out) < minNew {
		row[p.bundle.Manifest.Tokens.EOSID] = float32(math.Inf(-1))
	}
	return p.nextToken(row, out)
}

// argmax returns the first index of the maximum, as torch.argmax does.
func argmax(v []float32) int64 {
	best, bi := v[0], 0
	for i, x := range v[1:] {
		if x > best {
			best, bi = x, i+1
		}
	}
	return int64(bi)
}
