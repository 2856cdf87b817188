package engine

import (
	"context"
	"fmt"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/engine/sample"
)

// sequence is one item's decoding: its tokens so far and its own policy.
type sequence struct {
	tokens []int64 // decoder start token + generated tokens
	limit  int     // most tokens to generate
	choose sample.Chooser
	draft  sample.Drafter // nil: one token per call
	tm     *Timings       // the item's decoder calls are counted here
	done   bool
}

func (s *sequence) out() []int64 { return s.tokens[1:] }

// decode generates every sequence's tokens together, over fused states
// [B, E, d] with mask [B, E] (0 on padding).
//
// The sequences move in lockstep: every call feeds each the same number k of
// new positions, so one cache length serves the batch (the decoder graph has
// no self-attention mask that would let rows differ). A sequence's positions
// are its tokens not yet cached followed by its drafts, right-padded to k;
// after the call each keeps the tokens its chooser confirms (a draft is kept
// only while it equals the choice at its position, and the first
// disagreeing position yields the choice), and the cache keeps the positions
// confirmed for every active sequence, the rest being fed again next call.
// Every sequence so gets exactly the tokens of one-token-per-call decoding.
// A finished sequence is fed padding and no longer changes; the loop ends
// when all are finished.
func (p *Predictor) decode(ctx context.Context, seqs []*sequence, fused []float32, mask []int64) error {
	B := len(seqs)
	eos, pad := p.bundle.Manifest.Tokens.EOSID, p.bundle.Manifest.Tokens.PadID
	V := p.cfg.VocabSize
	// A decoder call costs about the same for a few positions as for one
	// only while reading the weights dominates; past that it grows with the
	// positions. So a batch shares one speculative call's worth
	// (MaxDraft+1) among its sequences: batches of 7 or more do not draft.
	width := 1
	longest, left := 0, 0
	for _, s := range seqs {
		if s.draft != nil {
			width = max(1, (sample.MaxDraft+1)/B)
		}
		longest = max(longest, s.limit)
		if s.done = s.limit <= 0; !s.done {
			left++
		}
	}
	// A call never feeds past a sequence's limit (drafts stop there), so the
	// longest limit plus one call's positions bounds the cache.
	t0 := time.Now()
	c, err := p.newCall(B, fused, mask, longest+width, width)
	if err != nil {
		return err
	}
	defer c.close()
	project := time.Since(t0) // the cross graph's run counts into the first call

	drafts := make([][]int64, B)
	for calls := 0; left > 0; calls++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		past := c.cache.Len()
		k := 0
		for i, s := range seqs {
			drafts[i] = nil
			if s.done {
				continue
			}
			pending := len(s.tokens) - past
			if budget := min(width-pending, s.limit-len(s.out())-1); budget > 0 && s.draft != nil {
				drafts[i] = s.draft.Draft(s.tokens, budget)
			}
			k = max(k, pending+len(drafts[i]))
		}
		ids := c.input(k)
		for i, s := range seqs {
			row := ids[i*k : (i+1)*k]
			n := 0
			if !s.done {
				n = copy(row, s.tokens[past:])
				n += copy(row[n:], drafts[i])
			}
			for j := n; j < k; j++ {
				row[j] = pad
			}
		}
		t := time.Now()
		logits, err := c.step(k)
		if err != nil {
			return fmt.Errorf("decoder call %d: %w", calls, err)
		}
		dt := time.Since(t)
		if calls == 0 {
			dt += project
		}

		keep := -1 // positions confirmed for every sequence still active
		for i, s := range seqs {
			if s.done {
				continue
			}
			s.tm.addDecoderCall(dt)
			// row pending-1 predicts the token after the last known one;
			// each accepted draft moves one row on
			pending := len(s.tokens) - past
			d := drafts[i]
			accepted := 0
			for j := 0; j <= len(d); j++ {
				at := (i*k + pending - 1 + j) * V
				tok := s.choose.Choose(logits[at:at+V], s.out())
				s.tokens = append(s.tokens, tok)
				if tok == eos || len(s.out()) >= s.limit {
					s.done = true
					left--
					break
				}
				if j == len(d) || tok != d[j] {
					break
				}
				accepted++
			}
			if !s.done && (keep < 0 || pending+accepted < keep) {
				keep = pending + accepted
			}
		}
		if left > 0 {
			c.cache.Truncate(past + keep)
		}
	}
	return nil
}

// decoderCall runs decoder calls over one cache: it owns the ids and logits
// tensors, made once per call length and kept, and the two slices every call
// binds by slot, so a call allocates only what ORT's Go binding does.
type decoderCall struct {
	g       *graph
	sl      *kv.Slots
	cache   *kv.Cache
	B       int64
	vocab   int64
	ids     []int64   // [B, k]
	logits  []float32 // [B, k, vocab]
	idsT    []kv.Pinned
	logitsT []kv.Pinned
	ins     []ort.Value
	outs    []ort.Value
	shape   ort.Shape
}

// newCall makes a decode's cache (host, or device-resident under cuda) for
// maxLen positions and its call tensors for up to width positions per row.
func (p *Predictor) newCall(B int, fused []float32, mask []int64, maxLen, width int) (*decoderCall, error) {
	cfg := kv.Config{
		Shape: kv.Shape{Layers: p.cfg.NumDecoderLayers, Heads: p.cfg.NumHeads, DKV: p.cfg.DKV, DModel: p.cfg.DModel},
		Batch: B, MaxLen: maxLen, Names: p.decoderNames, Slots: p.decoderSlots, Place: p.cachePlace,
	}
	if cfg.Place == kv.Adapter {
		var err error
		if cfg.Alloc, err = kvAllocator(p.decoder.sess, p.opts.Session); err != nil {
			return nil, fmt.Errorf("decoder cache: %w", err)
		}
	}
	cross := p.decoderCross
	cache, err := kv.New(cfg, fused, mask, func(ins, outs []ort.Value) error {
		if err := cross.sess.Run(ins, outs); err != nil {
			return fmt.Errorf("run %s graph %s: %w", cross.role, cross.path, err)
		}
		return nil
	})
	if err != nil {
		if cfg.Alloc != nil {
			cfg.Alloc.Destroy()
		}
		return nil, err
	}
	g := p.decoder
	return &decoderCall{g: g, sl: p.decoderSlots, cache: cache, B: int64(B), vocab: int64(p.cfg.VocabSize),
		ids:    make([]int64, B*width),
		logits: make([]float32, B*width*p.cfg.VocabSize),
		idsT:   make([]kv.Pinned, width+1), logitsT: make([]kv.Pinned, width+1),
		ins: make([]ort.Value, len(g.inputs)), outs: make([]ort.Value, len(g.outputs)),
		shape: make(ort.Shape, 0, 3),
	}, nil
}

// input returns the next call's ids, [B, k] row-major.
func (c *decoderCall) input(k int) []int64 { return c.ids[:int(c.B)*k] }

// step runs the decoder on the k positions per row in input(k) after the
// cached past and returns their logits, [B, k, vocab] (scratch, valid until
// the next call).
func (c *decoderCall) step(k int) ([]float32, error) {
	if k <= 0 || k >= len(c.idsT) {
		return nil, fmt.Errorf("decoder call on %d positions per row, at most %d (programmer error)", k, len(c.idsT)-1)
	}
	K := int64(k)
	var err error
	if c.idsT[k].Value == nil {
		if c.idsT[k], err = kv.NewTensor(&c.shape, c.ids, c.B, K); err != nil {
			return nil, fmt.Errorf("decoder input ids: %w", err)
		}
	}
	if c.logitsT[k].Value == nil {
		if c.logitsT[k], err = kv.NewTensor(&c.shape, c.logits, c.B, K, c.vocab); err != nil {
			return nil, fmt.Errorf("decoder logits: %w", err)
		}
	}
	sl := c.sl
	c.ins[sl.IDs], c.outs[sl.Logits] = &c.idsT[k], &c.logitsT[k]
	if err := c.cache.Bind(c.ins, c.outs, k); err != nil {
		return nil, err
	}
	if err := c.g.sess.RunWithOptions(c.ins, c.outs, c.cache.RunOptions()); err != nil {
		return nil, fmt.Errorf("run %s graph %s: %w", c.g.role, c.g.path, err)
	}
	c.cache.Advance(k)
	return c.logits[:c.B*K*c.vocab], nil
}

func (c *decoderCall) close() {
	c.cache.Close()
	kv.ReleaseAll(c.idsT)
	kv.ReleaseAll(c.logitsT)
}

// kvAllocator returns the allocator a device cache is uploaded with: the
// decoder session's CUDA device memory, or nil on the cpu provider, where
// the adapters stay in ORT's host memory (ORT refuses a CPU allocator here).
func kvAllocator(sess *ort.DynamicAdvancedSession, o SessionOptions) (*ort.Allocator, error) {
	switch o.Provider {
	case "", ProviderCPU:
		return nil, nil
	case ProviderCUDA:
		mi, err := ort.NewMemoryInfo("Cuda", ort.AllocatorTypeDevice, o.CUDADevice, ort.MemTypeDefault)
		if err != nil {
			return nil, fmt.Errorf("cuda memory info: %w", err)
		}
		defer mi.Destroy()
		a, err := sess.CreateAllocator(mi)
		if err != nil {
			return nil, fmt.Errorf("cuda device %d memory from the decoder session: %w", o.CUDADevice, err)
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown execution provider %q", o.Provider)
}
