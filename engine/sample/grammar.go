package sample

import (
	"fmt"
	"math"
	"slices"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/tokenizer"
)

// Grammar keeps the output inside the Auto-UI output grammar: each token is
// the highest-scoring one whose text stays a prefix of the grammar, and </s>
// comes only once the output is whole. It also ends the output within the
// token limit: a token is taken only if the output can still be closed
// (action.CloseOutput, tokenized) in the tokens left after it; otherwise the
// next token of the closing is emitted. So with a limit of at least
// Grammars.MinTokens every output parses.
type Grammar struct {
	tok           *tokenizer.Tokenizer
	eos, pad, unk int64
	limit         int
	// closeFrom is the number of tokens left below which closings are
	// computed: above it no closing can run out of room.
	closeFrom int
	text      []int64 // scratch for candidate texts
}

// Grammars makes the grammar choosers of one tokenizer. The shortest whole
// output is tokenized once, not per sequence.
type Grammars struct {
	tok      *tokenizer.Tokenizer
	shortest int
}

// NewGrammars measures the shortest whole output in tok's tokens.
func NewGrammars(tok *tokenizer.Tokenizer) (*Grammars, error) {
	ids, err := (&Grammar{tok: tok}).closing(nil)
	if err != nil {
		return nil, err
	}
	return &Grammars{tok: tok, shortest: len(ids)}, nil
}

// MinTokens is the token count of the shortest whole output: the smallest
// limit under which Grammar can always close.
func (gs *Grammars) MinTokens() int { return gs.shortest }

// New returns the chooser of one sequence of at most limit tokens.
func (gs *Grammars) New(limit int) (*Grammar, error) {
	if limit < gs.shortest {
		return nil, fmt.Errorf("constrained decoding needs a limit of at least %d tokens (the shortest valid action), got %d", gs.shortest, limit)
	}
	tok := gs.tok
	// A closing is at most a whole output's skeleton plus the pieces that
	// finish a partial token.
	return &Grammar{tok: tok, eos: tok.EOS(), pad: tok.Pad(), unk: tok.Unk(), limit: limit, closeFrom: 2*gs.shortest + 8}, nil
}

func (g *Grammar) decode(ids []int64) string {
	return g.tok.Decode(ids, tokenizer.DecodeOptions{SkipSpecial: true})
}

// Choose implements Chooser.
func (g *Grammar) Choose(row []float32, out []int64) int64 {
	prefix := g.decode(out)
	if action.CompleteOutput(prefix) {
		return g.eos
	}
	left := g.limit - len(out) // this token included
	var closing []int64
	if left <= g.closeFrom {
		var err error
		if closing, err = g.closing(out); err != nil || len(closing) == 0 {
			return g.eos // out left the grammar: not produced by this chooser
		}
	}
	g.text = append(g.text[:0], out...)
	g.text = append(g.text, 0)
	for range row {
		tok := argmax(row)
		if math.IsInf(float64(row[tok]), -1) {
			break
		}
		row[tok] = float32(math.Inf(-1))
		if tok == g.eos || tok == g.pad || tok == g.unk || g.tok.IsSpecial(tok) {
			// </s>: the output is not whole (checked above). The others add
			// no text (T5's <extra_id_N> sentinels decode to nothing), so
			// they would only spend the token budget.
			continue
		}
		if piece, known := g.tok.Token(tok); !known || piece == "" {
			continue
		}
		g.text[len(out)] = tok
		if !action.ValidOutputPrefix(g.decode(g.text)) {
			continue
		}
		if closing == nil {
			return tok
		}
		// Take the model's token only if the output can still close after it.
		if after, err := g.closing(g.text); err == nil && len(after) <= left-1 {
			return tok
		}
		break
	}
	if closing == nil {
		return g.eos // nothing fits (cannot happen with a vocabulary that spells the format)
	}
	return closing[0]
}

// closing returns tokens that make out a whole output, as few as it finds.
// The closing text is tokenized on its own, with and without a leading word
// boundary, and with out's text (when that keeps out's tokens); each is
// checked by decoding out with it. Spelled piece by piece it always works.
func (g *Grammar) closing(out []int64) ([]int64, error) {
	prefix := g.decode(out)
	c, ok := action.CloseOutput(prefix)
	if !ok {
		return nil, fmt.Errorf("%q is not a prefix of the output grammar", prefix)
	}
	if c == "" {
		return []int64{}, nil
	}
	var cands [][]int64
	if ids, err := g.tok.EncodeNoEOS(c); err == nil {
		cands = append(cands, ids)
		if len(ids) > 1 {
			if p, _ := g.tok.Token(ids[0]); p == "▁" {
				cands = append(cands, ids[1:])
			}
		}
	}
	if full, err := g.tok.EncodeNoEOS(prefix + c); err == nil && len(full) > len(out) && slices.Equal(full[:len(out)], out) {
		cands = append(cands, full[len(out):])
	}
	var best []int64
	for _, ids := range cands {
		if (best == nil || len(ids) < len(best)) && g.closes(out, ids) {
			best = ids
		}
	}
	if best != nil {
		return best, nil
	}
	spelled := make([]int64, 0, len(c))
	for _, r := range c {
		piece := string(r)
		if r == ' ' {
			piece = "▁"
		}
		id, ok := g.tok.TokenID(piece)
		if !ok {
			return nil, fmt.Errorf("the vocabulary cannot spell %q", piece)
		}
		spelled = append(spelled, id)
	}
	if !g.closes(out, spelled) {
		return nil, fmt.Errorf("cannot close %q with %q", prefix, c)
	}
	return spelled, nil
}

func (g *Grammar) closes(out, ids []int64) bool {
	return action.CompleteOutput(g.decode(append(slices.Clip(out), ids...)))
}
