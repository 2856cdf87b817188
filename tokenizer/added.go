package tokenizer

import "strings"

// addedVocab holds tokenizer.json's added_tokens. They are cut out of the text before the
// model sees it (non-normalized ones from the raw text, normalized ones after the
// normalizer), leftmost match first, longest at a position.
type addedVocab struct {
	byContent  map[string]int64
	byID       map[int64]string
	special    map[string]bool
	raw        *tokenMatcher
	normalized *tokenMatcher
}

type addedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func newAddedVocab(tokens []addedToken) *addedVocab {
	a := &addedVocab{
		byContent: make(map[string]int64, len(tokens)),
		byID:      make(map[int64]string, len(tokens)),
		special:   make(map[string]bool),
	}
	var raw, norm []addedToken
	for _, tok := range tokens {
		a.byContent[tok.Content] = tok.ID
		a.byID[tok.ID] = tok.Content
		if tok.Special {
			a.special[tok.Content] = true
		}
		if tok.Normalized {
			norm = append(norm, tok)
		} else {
			raw = append(raw, tok)
		}
	}
	a.raw = newTokenMatcher(raw)
	a.normalized = newTokenMatcher(norm)
	return a
}

func (a *addedVocab) isSpecial(tok string) bool { return a.special[tok] }

// segment is a piece of text: either an added token (id >= 0) or plain text starting at
// byte start of the string it was cut from.
type segment struct {
	text  string
	id    int64
	start int
}

// tokenMatcher finds added tokens by their first byte.
type tokenMatcher struct {
	byFirst [256][]addedToken
	empty   bool
}

func newTokenMatcher(tokens []addedToken) *tokenMatcher {
	m := &tokenMatcher{empty: true}
	for _, tok := range tokens {
		if tok.Content == "" {
			continue
		}
		m.byFirst[tok.Content[0]] = append(m.byFirst[tok.Content[0]], tok)
		m.empty = false
	}
	return m
}

// split cuts s at the added tokens m knows; empty text segments are dropped.
func (a *addedVocab) split(s string, m *tokenMatcher) []segment {
	if m.empty {
		if s == "" {
			return nil
		}
		return []segment{{text: s, id: -1}}
	}
	var out []segment
	last := 0
	for i := 0; i < len(s); {
		cands := m.byFirst[s[i]]
		best := -1
		for k, tok := range cands {
			if strings.HasPrefix(s[i:], tok.Content) && (best < 0 || len(tok.Content) > len(cands[best].Content)) {
				best = k
			}
		}
		if best < 0 {
			i++
			continue
		}
		if last < i {
			out = append(out, segment{text: s[last:i], id: -1, start: last})
		}
		tok := cands[best]
		out = append(out, segment{text: tok.Content, id: tok.ID, start: i})
		i += len(tok.Content)
		last = i
	}
	if last < len(s) {
		out = append(out, segment{text: s[last:], id: -1, start: last})
	}
	return out
}
