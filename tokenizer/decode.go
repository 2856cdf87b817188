package tokenizer

import "strings"

type decoder interface {
	decode(tokens []string) string
}

// joinDecoder is Hugging Face's behaviour without a decoder: tokens joined by spaces.
type joinDecoder struct{}

func (joinDecoder) decode(tokens []string) string { return strings.Join(tokens, " ") }

// metaspaceDecoder turns replacement characters back into spaces. In the first token
// every replacement character is dropped (unless the scheme is "never"), as Hugging Face
// does.
type metaspaceDecoder struct {
	replacement rune
	scheme      prependScheme
}

func (d metaspaceDecoder) decode(tokens []string) string {
	var b strings.Builder
	for i, tok := range tokens {
		for _, r := range tok {
			switch {
			case r != d.replacement:
				b.WriteRune(r)
			case i == 0 && d.scheme != prependNever:
			default:
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}
