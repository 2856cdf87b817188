// Package tokenizer encodes and decodes text for T5 models exactly like Hugging Face
// tokenizers does with a model's tokenizer.json (both the older T5 layout and the one
// transformers >= 4.40 writes with legacy=False).
//
// The pipeline (added-token split, normalizer, pre-tokenizer, Unigram Viterbi, template
// post-processor, decoder) runs in this package. github.com/sugarme/tokenizer is used for
// the SentencePiece precompiled charsmap (its double-array trie); its Unigram model, its
// Precompiled/Strip/Replace normalizers and its Metaspace pre-tokenizer disagree with
// Hugging Face on T5 inputs, so they are not used.
package tokenizer

import (
	"fmt"
	"os"
	"strings"
)

// Tokenizer is a loaded tokenizer.json. It is immutable after Load and safe for
// concurrent use.
type Tokenizer struct {
	model      *unigram
	added      *addedVocab
	normalizer normalizer // nil: none
	preTok     preTokenizer
	decoder    decoder
	prefix     []int64 // template post-processor ids before $A
	suffix     []int64 // and after it (T5: </s>)
	vocabSize  int
	eos        int64
	pad        int64
	unk        int64
}

// DecodeOptions select transformers' decode behaviour.
type DecodeOptions struct {
	// SkipSpecial drops special tokens (<pad>, </s>, <unk>, <extra_id_N>).
	SkipSpecial bool
	// CleanUpSpaces applies transformers' clean_up_tokenization (" ." -> ".", " 's" -> "'s", ...).
	CleanUpSpaces bool
}

// Load reads a Hugging Face tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return t, nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json. Unsupported
// components (model types, normalizers, pre-tokenizers, decoders, post-processors, added
// token flags) are reported as errors rather than silently tokenizing differently.
func FromJSON(data []byte) (t *Tokenizer, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("tokenizer.json: internal error: %v", r)
		}
	}()
	return parseConfig(data)
}

// Encode tokenizes text the way Hugging Face's encode does with special tokens added
// (for T5: the ids followed by </s>). Invalid UTF-8 bytes are read as U+FFFD.
func (t *Tokenizer) Encode(text string) ([]int64, error) {
	return t.encode(text, true)
}

// EncodeNoEOS tokenizes text without the post-processor's special tokens, for fragments
// that are joined later.
func (t *Tokenizer) EncodeNoEOS(text string) ([]int64, error) {
	return t.encode(text, false)
}

func (t *Tokenizer) encode(text string, withSpecial bool) (ids []int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			ids, err = nil, fmt.Errorf("encode %q: internal error: %v", truncateForError(text), r)
		}
	}()
	text = strings.ToValidUTF8(text, "\uFFFD")
	ids = make([]int64, 0, len(text)/3+len(t.prefix)+len(t.suffix)+1)
	if withSpecial {
		ids = append(ids, t.prefix...)
	}
	var v viterbiScratch
	for _, seg := range t.added.split(text, t.added.raw) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
			continue
		}
		norm := seg.text
		if t.normalizer != nil {
			norm = t.normalizer.normalize(norm)
		}
		for _, sub := range t.added.split(norm, t.added.normalized) {
			if sub.id >= 0 {
				ids = append(ids, sub.id)
				continue
			}
			// Metaspace's "first" scheme prepends only to text that starts the input.
			first := seg.start == 0 && sub.start == 0
			words := []piece{{text: sub.text, first: first}}
			if t.preTok != nil {
				words = t.preTok.split(words)
			}
			for _, w := range words {
				ids = t.model.encode(w.text, ids, &v)
			}
		}
	}
	if withSpecial {
		ids = append(ids, t.suffix...)
	}
	return ids, nil
}

// Decode turns ids back into text like transformers' decode. Ids the tokenizer does not
// know (negative, or beyond the vocabulary, as a padded model vocabulary can emit) are
// dropped, as Hugging Face tokenizers does.
func (t *Tokenizer) Decode(ids []int64, opts DecodeOptions) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.Token(id)
		if !ok {
			continue
		}
		if opts.SkipSpecial && t.added.isSpecial(tok) {
			continue
		}
		tokens = append(tokens, tok)
	}
	s := t.decoder.decode(tokens)
	if opts.CleanUpSpaces {
		s = cleanUpTokenization(s)
	}
	return s
}

// cleanUpReplacer mirrors transformers' clean_up_tokenization: sequential replace-all passes.
var cleanUpPairs = [][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}

func cleanUpTokenization(s string) string {
	for _, p := range cleanUpPairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// TokenID returns the id of a token string (added tokens first, then the model vocabulary).
func (t *Tokenizer) TokenID(tok string) (int64, bool) {
	if id, ok := t.added.byContent[tok]; ok {
		return id, true
	}
	if id, ok := t.model.ids[tok]; ok {
		return int64(id), true
	}
	return 0, false
}

// Token returns the token string of an id.
func (t *Tokenizer) Token(id int64) (string, bool) {
	if tok, ok := t.added.byID[id]; ok {
		return tok, true
	}
	if id >= 0 && id < int64(len(t.model.pieces)) {
		return t.model.pieces[id], true
	}
	return "", false
}

// IsSpecial reports whether id is a special token (</s>, <pad>, T5's
// <extra_id_N> sentinels): one that decoding with SkipSpecial drops.
func (t *Tokenizer) IsSpecial(id int64) bool {
	tok, ok := t.added.byID[id]
	return ok && t.added.isSpecial(tok)
}

// VocabSize is one past the largest id the tokenizer knows (T5: 32100 for the public
// checkpoints, whose models pad the embedding to 32128).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// EOS is the id of </s> (-1 if the tokenizer has none).
func (t *Tokenizer) EOS() int64 { return t.eos }

// Pad is the id of <pad> (-1 if the tokenizer has none).
func (t *Tokenizer) Pad() int64 { return t.pad }

// Unk is the model's unknown-token id (-1 if the model has none).
func (t *Tokenizer) Unk() int64 { return t.unk }

func truncateForError(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
