package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"
)

// fileConfig is the part of tokenizer.json this package reads. truncation and padding
// are ignored: callers truncate and pad ids themselves.
type fileConfig struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type typed struct {
	Type string `json:"type"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func parseConfig(data []byte) (*Tokenizer, error) {
	var cfg fileConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	t := &Tokenizer{}
	var err error
	if t.model, err = parseModel(cfg.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	for _, tok := range cfg.AddedTokens {
		if tok.SingleWord || tok.LStrip || tok.RStrip {
			return nil, fmt.Errorf("added token %q: single_word/lstrip/rstrip are not supported", tok.Content)
		}
		if tok.ID < 0 || tok.ID >= 1<<31 {
			return nil, fmt.Errorf("added token %q: id %d out of range", tok.Content, tok.ID)
		}
	}
	t.added = newAddedVocab(cfg.AddedTokens)
	if !isNull(cfg.Normalizer) {
		if t.normalizer, err = parseNormalizer(cfg.Normalizer); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	if !isNull(cfg.PreTokenizer) {
		if t.preTok, err = parsePreTokenizer(cfg.PreTokenizer); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	if t.decoder, err = parseDecoder(cfg.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if t.prefix, t.suffix, err = parsePostProcessor(cfg.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}

	t.vocabSize = len(t.model.pieces)
	for id := range t.added.byID {
		if int(id) >= t.vocabSize {
			t.vocabSize = int(id) + 1
		}
	}
	for _, id := range append(append([]int64(nil), t.prefix...), t.suffix...) {
		if id < 0 || id >= int64(t.vocabSize) {
			return nil, fmt.Errorf("post_processor: special token id %d outside the vocab of %d", id, t.vocabSize)
		}
	}
	t.unk = int64(t.model.unkID)
	t.eos, t.pad = -1, -1
	if id, ok := t.TokenID("</s>"); ok {
		t.eos = id
	} else if len(t.suffix) > 0 {
		t.eos = t.suffix[len(t.suffix)-1]
	}
	if id, ok := t.TokenID("<pad>"); ok {
		t.pad = id
	}
	return t, nil
}

type vocabEntry struct {
	piece string
	score float64
}

func (v *vocabEntry) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("vocab entry %s: want [piece, score]", b)
	}
	if err := json.Unmarshal(pair[0], &v.piece); err != nil {
		return fmt.Errorf("vocab entry %s: %w", b, err)
	}
	score, err := parseScore(bytes.TrimSpace(pair[1]))
	if err != nil {
		return fmt.Errorf("vocab entry %s: %w", b, err)
	}
	v.score = score
	return nil
}

func parseModel(raw json.RawMessage) (*unigram, error) {
	if isNull(raw) {
		return nil, errors.New("missing")
	}
	var m struct {
		Type         string       `json:"type"`
		UnkID        *int         `json:"unk_id"`
		ByteFallback bool         `json:"byte_fallback"`
		Vocab        []vocabEntry `json:"vocab"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.Type != "Unigram" {
		return nil, fmt.Errorf("unsupported model type %q (only Unigram)", m.Type)
	}
	if m.ByteFallback {
		return nil, errors.New("Unigram byte_fallback is not supported")
	}
	if m.UnkID == nil {
		return nil, errors.New("Unigram without unk_id is not supported")
	}
	pieces := make([]string, len(m.Vocab))
	scores := make([]float64, len(m.Vocab))
	for i, e := range m.Vocab {
		pieces[i], scores[i] = e.piece, e.score
	}
	return newUnigram(pieces, scores, *m.UnkID)
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Sequence":
		seq, err := parseSequence(raw, "normalizers", parseNormalizer)
		return normalizerSeq(seq), err
	case "Precompiled":
		var p struct {
			Charsmap *string `json:"precompiled_charsmap"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		if p.Charsmap == nil || *p.Charsmap == "" {
			return normalizerSeq(nil), nil // Hugging Face treats an empty charsmap as identity
		}
		data, err := base64.StdEncoding.DecodeString(*p.Charsmap)
		if err != nil {
			return nil, fmt.Errorf("precompiled_charsmap: %w", err)
		}
		return newPrecompiled(data)
	case "Strip":
		var s struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return strip{left: s.Left, right: s.Right}, nil
	case "Replace":
		var r struct {
			Pattern struct {
				String *string `json:"String"`
				Regex  *string `json:"Regex"`
			} `json:"pattern"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		switch {
		case r.Pattern.String != nil:
			return replace{literal: *r.Pattern.String, content: r.Content}, nil
		case r.Pattern.Regex != nil:
			re, err := compileRegex(*r.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			return replace{re: re, content: r.Content}, nil
		default:
			return nil, errors.New("Replace: pattern has neither String nor Regex")
		}
	case "Prepend":
		var p struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		return prepend{prefix: p.Prepend}, nil
	default:
		return nil, fmt.Errorf("unsupported normalizer type %q", t.Type)
	}
}

// compileRegex accepts the Oniguruma patterns that mean the same in Go's RE2 syntax;
// anything RE2 rejects (look-around, backreferences) is an error.
func compileRegex(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("unsupported regex %q: %w", pattern, err)
	}
	if re.MatchString("") {
		return nil, fmt.Errorf("unsupported regex %q: matches the empty string", pattern)
	}
	return re, nil
}

func parseMetaspace(raw json.RawMessage) (string, prependScheme, bool, error) {
	var m struct {
		Replacement    string  `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
		Split          *bool   `json:"split"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", 0, false, err
	}
	if utf8.RuneCountInString(m.Replacement) != 1 {
		return "", 0, false, fmt.Errorf("Metaspace replacement %q: want one character", m.Replacement)
	}
	// Older files carry add_prefix_space (true means "always"); newer ones prepend_scheme.
	scheme := prependAlways
	switch {
	case m.PrependScheme != nil:
		switch *m.PrependScheme {
		case "always":
			scheme = prependAlways
		case "first":
			scheme = prependFirst
		case "never":
			scheme = prependNever
		default:
			return "", 0, false, fmt.Errorf("unsupported Metaspace prepend_scheme %q", *m.PrependScheme)
		}
	case m.AddPrefixSpace != nil && !*m.AddPrefixSpace:
		scheme = prependNever
	}
	split := m.Split == nil || *m.Split
	return m.Replacement, scheme, split, nil
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Sequence":
		seq, err := parseSequence(raw, "pretokenizers", parsePreTokenizer)
		return preTokenizerSeq(seq), err
	case "WhitespaceSplit":
		return whitespaceSplit{}, nil
	case "Metaspace":
		rep, scheme, split, err := parseMetaspace(raw)
		if err != nil {
			return nil, err
		}
		return metaspace{replacement: rep, scheme: scheme, splitWords: split}, nil
	default:
		return nil, fmt.Errorf("unsupported pre_tokenizer type %q", t.Type)
	}
}

func parseDecoder(raw json.RawMessage) (decoder, error) {
	if isNull(raw) {
		return joinDecoder{}, nil
	}
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	switch t.Type {
	case "Metaspace":
		rep, scheme, _, err := parseMetaspace(raw)
		if err != nil {
			return nil, err
		}
		r, _ := utf8.DecodeRuneInString(rep)
		return metaspaceDecoder{replacement: r, scheme: scheme}, nil
	default:
		return nil, fmt.Errorf("unsupported decoder type %q", t.Type)
	}
}

// parsePostProcessor reads a TemplateProcessing "single" template of special tokens
// around $A (T5: "$A </s>").
func parsePostProcessor(raw json.RawMessage) (prefix, suffix []int64, err error) {
	if isNull(raw) {
		return nil, nil, nil
	}
	var p struct {
		Type   string `json:"type"`
		Single []struct {
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, err
	}
	if p.Type != "TemplateProcessing" {
		return nil, nil, fmt.Errorf("unsupported post_processor type %q", p.Type)
	}
	seenA := false
	for _, item := range p.Single {
		switch {
		case item.Sequence != nil:
			if item.Sequence.ID != "A" || seenA {
				return nil, nil, fmt.Errorf("single template: unexpected sequence %q", item.Sequence.ID)
			}
			seenA = true
		case item.SpecialToken != nil:
			st, ok := p.SpecialTokens[item.SpecialToken.ID]
			if !ok {
				return nil, nil, fmt.Errorf("single template: special token %q not defined", item.SpecialToken.ID)
			}
			if seenA {
				suffix = append(suffix, st.IDs...)
			} else {
				prefix = append(prefix, st.IDs...)
			}
		default:
			return nil, nil, errors.New("single template: item is neither Sequence nor SpecialToken")
		}
	}
	if !seenA {
		return nil, nil, errors.New("single template has no $A")
	}
	return prefix, suffix, nil
}

// parseSequence parses a Sequence component: its items under key, each with
// parse (normalizers and pre-tokenizers share the shape).
func parseSequence[T any](raw json.RawMessage, key string, parse func(json.RawMessage) (T, error)) ([]T, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if r, ok := fields[key]; ok {
		if err := json.Unmarshal(r, &items); err != nil {
			return nil, fmt.Errorf("sequence %s: %w", key, err)
		}
	}
	seq := make([]T, 0, len(items))
	for i, r := range items {
		v, err := parse(r)
		if err != nil {
			return nil, fmt.Errorf("sequence item %d: %w", i, err)
		}
		seq = append(seq, v)
	}
	return seq, nil
}
