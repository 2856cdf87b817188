package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"github.com/sugarme/tokenizer/spm"
)

// normalizer rewrites text before pre-tokenization. Offsets are not tracked: ids are all
// this package returns.
type normalizer interface {
	normalize(s string) string
}

type normalizerSeq []normalizer

func (n normalizerSeq) normalize(s string) string {
	for _, step := range n {
		s = step.normalize(s)
	}
	return s
}

// precompiled is SentencePiece's precompiled_charsmap (nmt_nfkc for T5). The trie comes
// from sugarme/tokenizer/spm; the walk over graphemes is ours, because the library's
// Precompiled normalizer rewrites combining marks as "U+0301" text, never advances inside
// long graphemes, and cannot tell "maps to nothing" from "no mapping".
type precompiled struct {
	trie       *spm.DoubleArray
	normalized string
	ascii      [128]asciiMapping // transform of each single ASCII byte, for the fast path
}

type asciiMapping struct {
	norm string
	ok   bool
}

func newPrecompiled(charsmap []byte) (*precompiled, error) {
	if len(charsmap) < 4 {
		return nil, fmt.Errorf("precompiled_charsmap: %d bytes, want at least 4", len(charsmap))
	}
	trieSize := int(uint32(charsmap[0]) | uint32(charsmap[1])<<8 | uint32(charsmap[2])<<16 | uint32(charsmap[3])<<24)
	if trieSize%4 != 0 || trieSize > len(charsmap)-4 {
		return nil, fmt.Errorf("precompiled_charsmap: trie size %d does not fit in %d bytes", trieSize, len(charsmap))
	}
	p, err := spm.NewPrecompiledFrom(charsmap)
	if err != nil {
		return nil, fmt.Errorf("precompiled_charsmap: %w", err)
	}
	if len(p.Trie.Array) == 0 {
		return nil, fmt.Errorf("precompiled_charsmap: empty trie")
	}
	pc := &precompiled{trie: p.Trie, normalized: p.Normalized}
	for b := 1; b < 128; b++ {
		norm, ok := pc.transform(string(rune(b)))
		pc.ascii[b] = asciiMapping{norm: norm, ok: ok}
	}
	return pc, nil
}

// transform returns the replacement of the shortest charsmap entry that prefixes chunk,
// as spm_precompiled does; ok is false when no entry matches (an entry may map to "").
func (p *precompiled) transform(chunk string) (string, bool) {
	results := p.commonPrefixSearch(chunk)
	if len(results) == 0 {
		return "", false
	}
	start := results[0]
	if start < 0 || start > len(p.normalized) {
		return "", false
	}
	end := strings.IndexByte(p.normalized[start:], 0)
	if end < 0 {
		return p.normalized[start:], true
	}
	return p.normalized[start : start+end], true
}

// commonPrefixSearch is the library's DoubleArray.CommonPrefixSearch with bounds checks,
// so a malformed charsmap cannot index out of range.
func (p *precompiled) commonPrefixSearch(key string) []int {
	arr := p.trie.Array
	var results []int
	pos := int(arr[0].Offset())
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == 0 {
			break
		}
		pos ^= int(c)
		if pos < 0 || pos >= len(arr) {
			return results
		}
		unit := arr[pos]
		if unit.Label() != uint(c) {
			return results
		}
		pos ^= int(unit.Offset())
		if pos < 0 || pos >= len(arr) {
			return results
		}
		if unit.HasLeaf() {
			results = append(results, arr[pos].Value())
		}
	}
	return results
}

func (p *precompiled) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	state := -1
	for s != "" {
		// Fast path: an ASCII byte followed by another ASCII byte (or nothing) is a
		// grapheme of its own, except CR LF; no grapheme rule carries state past it.
		if c := s[0]; c < utf8.RuneSelf && c != 0 && (len(s) == 1 || (s[1] < utf8.RuneSelf && !(c == '\r' && s[1] == '\n'))) {
			if m := p.ascii[c]; m.ok {
				b.WriteString(m.norm)
			} else {
				b.WriteByte(c)
			}
			s = s[1:]
			state = -1
			continue
		}
		var cluster string
		cluster, s, _, state = uniseg.FirstGraphemeClusterInString(s, state)
		// Short graphemes map as a whole (SentencePiece's quirk, kept by Hugging Face).
		if len(cluster) < 6 {
			if norm, ok := p.transform(cluster); ok {
				b.WriteString(norm)
				continue
			}
		}
		for i, r := range cluster {
			part := cluster[i : i+len(string(r))]
			if norm, ok := p.transform(part); ok {
				b.WriteString(norm)
			} else {
				b.WriteString(part)
			}
		}
	}
	return b.String()
}

// strip removes Unicode White_Space (Rust's char::is_whitespace equals Go's unicode.IsSpace).
type strip struct{ left, right bool }

func (n strip) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// replace is Hugging Face's Replace normalizer: every non-overlapping match, left to right.
type replace struct {
	literal string // used when re is nil
	re      *regexp.Regexp
	content string
}

func (n replace) normalize(s string) string {
	if n.re != nil {
		return n.re.ReplaceAllLiteralString(s, n.content)
	}
	if n.literal == "" {
		return s
	}
	return strings.ReplaceAll(s, n.literal, n.content)
}

// prepend adds a prefix to non-empty text.
type prepend struct{ prefix string }

func (n prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}
