package sample

import (
	"fmt"
	"slices"
	"strings"

	"github.com/autoui/autoui/action"
)

// Drafter proposes up to max tokens that may follow seq (the decoder start
// token and the tokens so far). Verification keeps exactly what the Chooser
// would have produced, so a wrong draft costs only compute.
type Drafter interface {
	Draft(seq []int64, max int) []int64
}

// MaxDraft bounds the tokens verified per call: decode steps are bound by
// reading the weights, so a call on 12 tokens costs little more than one.
const MaxDraft = 12

// maxNgram is the longest context suffix the drafter matches.
const maxNgram = 8

// NGram proposes continuations by matching the end of the sequence so far
// against token sequences that are likely to recur: the sequence itself (a
// tap's lift point repeats its touch point, a plan's first type is usually
// the decision's type) and tokenized Auto-UI outputs (the format's fixed
// text). A wrong draft costs only a little extra compute: verification keeps
// exactly what greedy decoding would have produced.
type NGram struct {
	refs [][]int64
}

// NewNGram tokenizes one canonical output per action type, so every fixed
// piece of the format (keys, punctuation, [-1.0, -1.0], type names) is in a
// reference in the tokenization the model was trained on.
func NewNGram(tok interface {
	EncodeNoEOS(string) ([]int64, error)
}, eos int64) (*NGram, error) {
	d := &NGram{}
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

// Draft returns up to max tokens that may follow seq. A match on a short
// suffix is weak evidence, so it drafts fewer tokens: a verified position
// costs little, but not nothing (logits over the vocabulary each).
func (d *NGram) Draft(seq []int64, max int) []int64 {
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
