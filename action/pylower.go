package action

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// PyLower is Python's str.lower: the full Unicode lowercase mapping, with
// the context-dependent final sigma (Σ at the end of a word -> ς) and the
// one-to-many mappings (İ -> i + U+0307). Go's strings.ToLower maps rune by
// rune and has neither, so AITW text accuracy would differ from Auto-UI's on
// Greek and Turkish text.
func PyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	// A Caser keeps state between calls: one per call keeps this safe for
	// concurrent use.
	return cases.Lower(language.Und).String(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
