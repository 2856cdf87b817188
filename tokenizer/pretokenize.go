package tokenizer

import (
	"strings"
	"unicode"
)

// piece is a word on its way to the model. first marks text that starts the input, which
// Metaspace's "first" prepend scheme needs.
type piece struct {
	text  string
	first bool
}

type preTokenizer interface {
	split(in []piece) []piece
}

type preTokenizerSeq []preTokenizer

func (p preTokenizerSeq) split(in []piece) []piece {
	for _, step := range p {
		in = step.split(in)
	}
	return in
}

// whitespaceSplit splits on runs of Unicode White_Space and drops them.
type whitespaceSplit struct{}

func (whitespaceSplit) split(in []piece) []piece {
	out := make([]piece, 0, len(in)*4)
	for _, p := range in {
		start := -1
		for i, r := range p.text {
			if unicode.IsSpace(r) {
				if start >= 0 {
					out = append(out, piece{text: p.text[start:i], first: p.first && start == 0})
					start = -1
				}
			} else if start < 0 {
				start = i
			}
		}
		if start >= 0 {
			out = append(out, piece{text: p.text[start:], first: p.first && start == 0})
		}
	}
	return out
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspace replaces spaces by the replacement character (U+2581 for T5), prepends it per
// the scheme, and splits before each run of replacement characters.
type metaspace struct {
	replacement string
	scheme      prependScheme
	splitWords  bool
}

func (m metaspace) splitOne(p piece, out []piece) []piece {
	s := strings.ReplaceAll(p.text, " ", m.replacement)
	if !strings.HasPrefix(s, m.replacement) {
		if m.scheme == prependAlways || (m.scheme == prependFirst && p.first) {
			s = m.replacement + s
		}
	}
	if !m.splitWords {
		if s != "" {
			out = append(out, piece{text: s, first: p.first})
		}
		return out
	}
	// Split with the delimiter merged into the next piece; consecutive delimiters stay
	// together (Hugging Face's MergedWithNext behaviour).
	start := 0
	prevDelim := false
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], m.replacement) {
			if !prevDelim && i > start {
				out = append(out, piece{text: s[start:i], first: p.first && start == 0})
				start = i
			}
			prevDelim = true
			i += len(m.replacement)
			continue
		}
		prevDelim = false
		_, size := decodeRune(s[i:])
		i += size
	}
	if start < len(s) {
		out = append(out, piece{text: s[start:], first: p.first && start == 0})
	}
	return out
}

func (m metaspace) split(in []piece) []piece {
	out := make([]piece, 0, len(in)*2)
	for _, p := range in {
		out = m.splitOne(p, out)
	}
	return out
}
