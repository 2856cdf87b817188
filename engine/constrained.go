package engine

import (
	"math"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/tokenizer"
)

// nextToken picks the next token from one row of logits: the argmax, or with
// Options.Constrained the highest-scoring token that keeps the output a
// prefix of the Auto-UI grammar (and </s> only once the output is whole), so
// every constrained output parses. out is the output so far. The row is
// scratch and may be modified.
//
// budget is how many tokens may still be generated, this one included. On
// the last one, a token that completes the output wins over the others: an
// output cut by the token limit (a model repeating itself inside typed_text)
// never parses, and nothing else can still save it.
func (p *Predictor) nextToken(row []float32, out []int64, budget int) int64 {
	if !p.opts.Constrained {
		return argmax(row)
	}
	eos := p.bundle.Manifest.Tokens.EOSID
	text := func(ids []int64) string {
		return p.tok.Decode(ids, tokenizer.DecodeOptions{SkipSpecial: true})
	}
	prefix := text(out)
	if action.CompleteOutput(prefix) {
		return eos
	}
	cand := make([]int64, len(out)+1)
	copy(cand, out)
	if budget == 1 {
		if tok, ok := p.completingToken(row, cand); ok {
			return tok
		}
	}
	for range row {
		tok := argmax(row)
		if math.IsInf(float64(row[tok]), -1) {
			break
		}
		row[tok] = float32(math.Inf(-1))
		if tok == eos {
			continue // not complete: checked above
		}
		piece, known := p.tok.Token(tok)
		if !known || piece == "" || tok == p.bundle.Manifest.Tokens.PadID || tok == p.bundle.Manifest.Tokens.UnkID {
			continue
		}
		cand[len(out)] = tok
		if action.ValidOutputPrefix(text(cand)) {
			return tok
		}
	}
	// Nothing fits (cannot happen with a vocabulary that spells the format);
	// end the output rather than loop.
	return eos
}

// completingToken returns the highest-scoring token that makes cand's prefix
// (all but its last slot) a whole output, if one does. row is not modified.
func (p *Predictor) completingToken(row []float32, cand []int64) (int64, bool) {
	best, found := int64(0), false
	for id, score := range row {
		tok := int64(id)
		if math.IsInf(float64(score), -1) || (found && score <= row[best]) {
			continue
		}
		if tok == p.bundle.Manifest.Tokens.EOSID || tok == p.bundle.Manifest.Tokens.PadID {
			continue
		}
		cand[len(cand)-1] = tok
		if action.CompleteOutput(p.tok.Decode(cand, tokenizer.DecodeOptions{SkipSpecial: true})) {
			best, found = tok, true
		}
	}
	return best, found
}
