package action

import (
	"math"
	"strconv"
	"strings"
	"unicode"
)

// String renders the action as Auto-UI's action text, byte for byte what its
// Python f-string produces:
//
//	"action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""
//
// Points are Python list reprs of [y, x] with the values as stored (call
// Normalize first for the training-time form); the typed text has \ " and '
// removed. It is a String method, not Text(): Go forbids a method named
// like the Text field.
func (a Action) String() string {
	var b strings.Builder
	b.Grow(128 + len(a.Text))
	b.WriteString(`"action_type": "`)
	b.WriteString(a.Type.String())
	b.WriteString(`", "touch_point": "`)
	writePoint(&b, a.Touch)
	b.WriteString(`", "lift_point": "`)
	writePoint(&b, a.Lift)
	b.WriteString(`", "typed_text": "`)
	b.WriteString(stripQuotes(a.Text))
	b.WriteString(`"`)
	return b.String()
}

// Target renders the full training target: the plan (type names joined by
// commas, no spaces) and the action text, as Auto-UI's target after its
// whitespace collapse.
func Target(plan []Type, a Action) string {
	var b strings.Builder
	b.WriteString("Action Plan: [")
	for i, t := range plan {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.String())
	}
	b.WriteString("] ; Action Decision: ")
	b.WriteString(a.String())
	return b.String()
}

// PyList renders p as Python's repr of the list [y, x], e.g. "[0.5, 0.2]".
func (p Point) PyList() string {
	var b strings.Builder
	writePoint(&b, p)
	return b.String()
}

func writePoint(b *strings.Builder, p Point) {
	b.WriteByte('[')
	b.WriteString(PyFloat(p.Y))
	b.WriteString(", ")
	b.WriteString(PyFloat(p.X))
	b.WriteByte(']')
}

// PyFloat formats x exactly as Python's repr(float): the shortest digits that
// round-trip, positional for decimal exponents -4 < e <= 16 (always with a
// fractional part, "1.0"), scientific otherwise ("1e-05", "1.5e+16").
func PyFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case x == 0:
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	// Go's shortest formatting picks the same digits as Python's dtoa (both the
	// shortest round-tripping string closest to x); only the layout differs.
	s := strconv.FormatFloat(x, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	ePos := strings.IndexByte(s, 'e')
	mant, expStr := s[:ePos], s[ePos+1:]
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // position of the decimal point relative to digits

	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case decpt <= -4 || decpt > 16:
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
	case decpt <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -decpt))
		b.WriteString(digits)
	case decpt >= len(digits):
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", decpt-len(digits)))
		b.WriteString(".0")
	default:
		b.WriteString(digits[:decpt])
		b.WriteByte('.')
		b.WriteString(digits[decpt:])
	}
	return b.String()
}

// PyRound4 is Python's round(x, 4) on a float: the double nearest to the
// decimal obtained by correctly rounding the exact binary value of x to 4
// places, ties to even (strconv's 'f' formatting rounds the exact value the
// same way, and ParseFloat returns the nearest double, as Python does).
func PyRound4(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 4, 64), 64)
	if err != nil { // cannot happen for a finite x; keep x rather than panic
		return x
	}
	if r == 0 && math.Signbit(x) {
		return math.Copysign(0, -1) // Python keeps the sign: round(-0.00001, 4) == -0.0
	}
	return r
}

// stripQuotes removes \ " and ', as Auto-UI does to typed text.
func stripQuotes(s string) string {
	if !strings.ContainsAny(s, `\"'`) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\\' || r == '"' || r == '\'' {
			return -1
		}
		return r
	}, s)
}

// collapseSpace replaces each run of Python whitespace by one space: the effect
// that Auto-UI's " ".join(target.split()) has on text inside the target.
func collapseSpace(s string) string {
	var b strings.Builder
	inSpace := false
	changed := false
	for _, r := range s {
		if IsPySpace(r) {
			if inSpace || r != ' ' {
				changed = true
			}
			inSpace = true
			continue
		}
		if inSpace {
			b.WriteByte(' ')
			inSpace = false
		}
		b.WriteRune(r)
	}
	if inSpace {
		b.WriteByte(' ')
	}
	if !changed {
		return s
	}
	return b.String()
}

// IsPySpace is Python's str.isspace for one character: Unicode White_Space
// plus the information separators U+001C..U+001F, which Python splits on and
// Go does not.
func IsPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
