package tokenizer

import (
	"strconv"
	"testing"
)

func TestParseScore(t *testing.T) {
	// Up to 15-16 significant digits serde_json's fast path is correctly rounded.
	for _, s := range []string{"0", "-0.0", "1", "-7.078732490539551", "0.5", "1e3", "-2.5E-3", "123456789012345", "1e-320", "0.0001"} {
		got, err := parseScore([]byte(s))
		want, _ := strconv.ParseFloat(s, 64)
		if err != nil || got != want {
			t.Errorf("parseScore(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	// 17 digits: the significand is rounded to float64 before the division, so the
	// result is one ulp off the correctly rounded value (as in Hugging Face tokenizers).
	got, err := parseScore([]byte("-10.806371688842773"))
	if err != nil {
		t.Fatal(err)
	}
	want := -(float64(10806371688842773) / 1e15)
	exact, _ := strconv.ParseFloat("-10.806371688842773", 64)
	if got != want || got == exact {
		t.Errorf("parseScore(-10.806371688842773) = %v; want serde's %v (not %v)", got, want, exact)
	}
	for _, s := range []string{"", "-", "1.", ".5", "1e", "abc", "1x", "1e400"} {
		if _, err := parseScore([]byte(s)); err == nil {
			t.Errorf("parseScore(%q): no error", s)
		}
	}
}
