package tokenizer

import (
	"strings"
	"testing"
)

// FuzzEncode checks that encoding never fails or panics, that ids are in range and end
// with </s>, and that decode∘encode is stable. A single round trip may still change text
// (Hugging Face drops <unk> pieces but keeps the "▁" before them, and decoded text can
// spell an added token), so stability means: after two round trips a third changes nothing.
func FuzzEncode(f *testing.F) {
	for _, c := range loadGolden(f).Encode {
		if len(c.Text) < 300 {
			f.Add(c.Text)
		}
	}
	f.Add("\xff\xfe invalid utf-8 \xc3")
	f.Add("<extra_id_3></s><pad><unk>")
	toks := []*Tokenizer{loadLayout(f, "legacy"), loadLayout(f, "modern")}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			ids, err := tok.Encode(s)
			if err != nil {
				t.Fatalf("Encode(%q): %v", s, err)
			}
			if len(ids) == 0 || ids[len(ids)-1] != tok.EOS() {
				t.Fatalf("Encode(%q) = %v: no final </s>", s, ids)
			}
			for _, id := range ids {
				if id < 0 || id >= int64(tok.VocabSize()) {
					t.Fatalf("Encode(%q): id %d out of range", s, id)
				}
			}
			keep := DecodeOptions{SkipSpecial: true}
			roundTrip := func(text string) string {
				ids, err := tok.EncodeNoEOS(text)
				if err != nil {
					t.Fatalf("EncodeNoEOS(%q): %v", text, err)
				}
				return tok.Decode(ids, keep)
			}
			twice := roundTrip(roundTrip(s))
			if thrice := roundTrip(twice); thrice != twice {
				t.Fatalf("round trip not stable for %q:\n  twice %q\nthrice %q", s, twice, thrice)
			}
			_ = tok.Decode(ids, DecodeOptions{SkipSpecial: true, CleanUpSpaces: true})
		}
	})
}

// BenchmarkEncodePrompt encodes an Auto-UI prompt of about 400 tokens.
func BenchmarkEncodePrompt(b *testing.B) {
	tok := loadLayout(b, "modern")
	var prompt string
	best := 0
	for _, c := range loadGolden(b).Encode {
		if strings.HasPrefix(c.Text, "Previous Actions:") && abs(len(c.Modern)-400) < abs(best-400) {
			prompt, best = c.Text, len(c.Modern)
		}
	}
	ids, err := tok.Encode(prompt)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(prompt)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Encode(prompt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)), "tokens/op")
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
