package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/autoui/autoui/action"
)

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

// maxDraft bounds the tokens verified per call: decode steps are bound by
// reading the weights, so a call on 12 tokens costs little more than one.
const maxDraft = 12

// maxNgram is the longest context suffix the drafter matches.
const maxNgram = 8

// drafter proposes continuations by matching the end of the sequence so far
// against token sequences that are likely to recur: the sequence itself (a
// tap's lift point repeats its touch point, a plan's first type is usually
// the decision's type) and tokenized Auto-UI outputs (the format's fixed
// text). A wrong draft costs only a little extra compute: verification keeps
// exactly what greedy decoding would have produced.
type drafter struct {
	refs [][]int64
}

// newDrafter tokenizes one canonical output per action type, so every fixed
// piece of the format (keys, punctuation, [-1.0, -1.0], type names) is in a
// reference in the tokenization the model was trained on.
func newDrafter(tok interface {
	EncodeNoEOS(string) ([]int64, error)
}, eos int64) (*drafter, error) {
	d := &drafter{}
	tap := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}
	swipe := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}
	var outs []string
	for _, t := range action.Types {
		a := action.Action{Type: t, Touch: action.NoPoint, Lift: action.NoPoint}
		if t == action.DualPoint {
			a = tap
		}
		outs = append(outs, action.Target([]action.Type{t, t, action.StatusTaskComplete}, a))
	}
	outs = append(outs, action.Target([]action.Type{action.DualPoint}, swipe))
	for _, s := range outs {
		ids, err := tok.EncodeNoEOS(strings.Join(strings.Fields(s), " "))
		if err != nil {
			return nil, fmt.Errorf("tokenize draft template: %w", err)
		}
		d.refs = append(d.refs, append(ids, eos))
	}
	return d, nil
}

// draft returns up to max tokens that may follow seq. A match on a short
// suffix is weak evidence, so it drafts fewer tokens: a verified position
// costs little, but not nothing (logits over the vocabulary each).
func (d *drafter) draft(seq []int64, max int) []int64 {
	for n := min(maxNgram, len(seq)); n >= 1; n-- {
		max := min(max, 2*n+2)
		suffix := seq[len(seq)-n:]
		// most recent earlier occurrence in the sequence itself
		for start := len(seq) - n - 1; start >= 0; start-- {
			if slices.Equal(seq[start:start+n], suffix) {
				if cont := seq[start+n : min(len(seq), start+n+max)]; len(cont) > 0 {
					return cont
				}
			}
		}
		for _, ref := range d.refs {
			for start := 0; start+n < len(ref); start++ {
				if slices.Equal(ref[start:start+n], suffix) {
					return ref[start+n : min(len(ref), start+n+max)]
				}
			}
		}
	}
	return nil
}

// speculative decodes with drafts verified in batches. It returns exactly the
// tokens greedy would: a draft token is kept only if it equals the argmax at
// its position, and the first disagreeing position yields greedy's token.
func (p *Predictor) speculative(ctx context.Context, fused []float32, mask []int64, g genLimits, tm *Timings) ([]int64, error) {
	maxNew := g.maxNew
	r, err := p.newDecoderCache(fused, mask, maxNew+maxDraft+1, tm)
	if err != nil {
		return nil, err
	}
	defer r.close()
	eos := p.bundle.Manifest.Tokens.EOSID
	V := p.cfg.VocabSize
	// seq is the decoder input so far: start token + generated tokens.
	seq := make([]int64, 1, maxNew+maxDraft+2)
	seq[0] = p.bundle.Manifest.Tokens.DecoderStartID
	out := make([]int64, 0, maxNew)
	in := make([]int64, 0, maxNew+maxDraft+1) // the call's input, reused
	fed := 0                                  // tokens of seq already in the cache
	for len(out) < maxNew {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		drafts := p.drafts.draft(seq, min(maxDraft, maxNew-len(out)-1))
		in = append(append(in[:0], seq[fed:]...), drafts...)
		logits, err := r.step(in)
		if err != nil {
			return nil, err
		}
		// rows from len(in)-len(drafts)-1 on predict the token after each
		// fed position; earlier rows (none in practice) are already decided
		base := len(in) - len(drafts) - 1
		accepted := 0
		done := false
		for j := 0; j <= len(drafts); j++ {
			tok := p.choose(logits[(base+j)*V:(base+j+1)*V], out, g)
			out = append(out, tok)
			seq = append(seq, tok)
			if tok == eos || len(out) >= maxNew {
				done = true
				break
			}
			if j == len(drafts) || tok != drafts[j] {
				break
			}
			accepted++
		}
		if done {
			break
		}
		// The cache holds every fed token; keep those that agree with greedy:
		// the previous inputs plus the accepted drafts.
		fed = fed + len(in) - len(drafts) + accepted
		r.truncate(int64(fed))
	}
	return out, nil
}

// truncate drops cached self-attention positions past n (rejected drafts).
func (r *decodeRun) truncate(n int64) {
	if n >= r.pastLen {
		return
	}
	keepPositions(r.selfKV[r.cur], int64(r.p.cfg.NumHeads), r.pastLen, n, int64(r.p.cfg.DKV))
	r.pastLen = n
}

// keepPositions keeps the first n of T cached positions in each buffer,
// laid out [rows, T, d_kv] (rows = batch x heads), as [rows, n, d_kv]:
// each row moves down, in order, without overlap trouble.
func keepPositions(bufs [][]float32, rows, T, n, dkv int64) {
	for _, buf := range bufs {
		for row := int64(1); row < rows; row++ {
			copy(buf[row*n*dkv:(row+1)*n*dkv], buf[row*T*dkv:row*T*dkv+n*dkv])
		}
	}
}
