package action

import "testing"

// Expected values are CPython 3.11's str.lower on the same strings.
func TestPyLower(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Hello World", "hello world"},
		{"ΣΊΣΥΦΟΣ", "σίσυφος"},         // final sigma at the end only
		{"ΌΣΟΣ Σ", "όσος σ"},           // a lone Σ is not final (nothing cased before it)
		{"AΣ.B", "aσ.b"},               // '.' is case-ignorable: B follows, not final
		{"ΑΣ'Β", "ασ'β"},               // so is the apostrophe
		{"aΣ\u0301", "aς\u0301"},       // a combining mark after Σ keeps it final
		{"aΣ\u0301b", "aσ\u0301b"},     // ... unless a cased letter follows
		{"İstanbul", "i\u0307stanbul"}, // dotted capital I: two code points
		{"ÄPFEL", "äpfel"},
		{"ß", "ß"},
		{"ᾼ", "ᾳ"},
		{"Ǆ", "ǆ"},
		{"K", "k"}, // Kelvin sign
		{"Ω", "ω"}, // Ohm sign
	} {
		if got := PyLower(c.in); got != c.want {
			t.Errorf("PyLower(%q) = %q %U, want %q %U", c.in, got, []rune(got), c.want, []rune(c.want))
		}
	}
}
