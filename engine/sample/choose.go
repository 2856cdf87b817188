// Package sample is a sequence's token policy: a Chooser picks each next
// token from the decoder's logits, a Drafter proposes tokens to verify in the
// same call. Both are built per sequence, so items of one batch can decode
// under different rules.
package sample

import "math"

// Chooser picks the token after out from one row of logits. The row is
// scratch and may be modified.
type Chooser interface {
	Choose(row []float32, out []int64) int64
}

// ArgmaxChooser is a Chooser that can also choose from a row's argmax alone
// (the decoder's logits_argmax output), so that the row's logits need not
// leave the device.
type ArgmaxChooser interface {
	Chooser
	// NeedsLogits reports whether choosing after out, and after the tokens
	// that follow it within one call, needs the logits.
	NeedsLogits(out []int64) bool
	// ChooseArgmax returns the token after out given the first index of
	// the row's maximum; it must equal Choose on that row.
	ChooseArgmax(best int64, out []int64) int64
}

// NeedsLogits reports whether c needs the next call's logits after out.
func NeedsLogits(c Chooser, out []int64) bool {
	a, ok := c.(ArgmaxChooser)
	return !ok || a.NeedsLogits(out)
}

// Argmax is greedy decoding.
type Argmax struct{}

// Choose returns the first index of the maximum, as torch.argmax does.
func (Argmax) Choose(row []float32, _ []int64) int64 { return argmax(row) }

// NeedsLogits implements ArgmaxChooser: never.
func (Argmax) NeedsLogits([]int64) bool { return false }

// ChooseArgmax implements ArgmaxChooser.
func (Argmax) ChooseArgmax(best int64, _ []int64) int64 { return best }

func argmax(v []float32) int64 {
	best, bi := v[0], 0
	for i, x := range v[1:] {
		if x > best {
			best, bi = x, i+1
		}
	}
	return int64(bi)
}

// MinLength masks </s> until the output has N tokens, then asks Next.
// Benchmarks of random-weight bundles use it to generate a fixed length.
type MinLength struct {
	N    int
	EOS  int64
	Next Chooser
}

// Choose implements Chooser.
func (m MinLength) Choose(row []float32, out []int64) int64 {
	if len(out) < m.N {
		row[m.EOS] = float32(math.Inf(-1))
	}
	return m.Next.Choose(row, out)
}

// NeedsLogits implements ArgmaxChooser: while </s> is masked, and whenever
// Next needs them. The output only grows within a call, so a call that
// starts at N or more tokens never masks.
func (m MinLength) NeedsLogits(out []int64) bool {
	return len(out) < m.N || NeedsLogits(m.Next, out)
}

// ChooseArgmax implements ArgmaxChooser (only asked when NeedsLogits is false).
func (m MinLength) ChooseArgmax(best int64, out []int64) int64 {
	return m.Next.(ArgmaxChooser).ChooseArgmax(best, out)
}

// Replay stands in for a model: the token at each position is the next of
// Tokens, then </s>, whatever the logits say. Every decoder call still runs.
type Replay struct {
	Tokens []int64
	EOS    int64
}

// Choose implements Chooser.
func (r Replay) Choose(_ []float32, out []int64) int64 {
	if len(out) < len(r.Tokens) {
		return r.Tokens[len(out)]
	}
	return r.EOS
}

// NeedsLogits implements ArgmaxChooser: never.
func (Replay) NeedsLogits([]int64) bool { return false }

// ChooseArgmax implements ArgmaxChooser.
func (r Replay) ChooseArgmax(_ int64, out []int64) int64 { return r.Choose(nil, out) }
