package action

import "strings"

// The Auto-UI output grammar, for constrained decoding:
//
//	"Action Plan: [" TYPE ("," TYPE)* "] ; Action Decision: "
//	"\"action_type\": \"" TYPE "\", \"touch_point\": \"" POINT "\", \"lift_point\": \"" POINT
//	"\", \"typed_text\": \"" TEXT "\""
//
// POINT is "[" NUM ", " NUM "]", NUM is -1.0 or a Python float repr in
// [0, 1] with at most 4 decimals (0.405, 1.0), TEXT has no '"'. Every text
// the grammar accepts parses with ParseOutput.

type grammarElem struct {
	kind byte // 'l' literal, 't' type name, 'p' type list, 'n' number, 'x' text
	lit  string
}

var outputGrammar = func() []grammarElem {
	l := func(s string) grammarElem { return grammarElem{kind: 'l', lit: s} }
	num, typ := grammarElem{kind: 'n'}, grammarElem{kind: 't'}
	return []grammarElem{
		l("Action Plan: ["), {kind: 'p'}, l("] ; Action Decision: "),
		l(`"action_type": "`), typ,
		l(`", "touch_point": "[`), num, l(", "), num,
		l(`]", "lift_point": "[`), num, l(", "), num,
		l(`]", "typed_text": "`), {kind: 'x'}, l(`"`),
	}
}()

// ValidOutputPrefix reports whether s can be extended to an output the
// grammar accepts.
func ValidOutputPrefix(s string) bool { return matchGrammar(s, 0, false) }

// CompleteOutput reports whether s is a whole output of the grammar.
func CompleteOutput(s string) bool { return matchGrammar(s, 0, true) }

// matchGrammar matches s against outputGrammar[i:]. With whole false, s may
// end anywhere inside the grammar.
func matchGrammar(s string, i int, whole bool) bool {
	if i == len(outputGrammar) {
		return s == ""
	}
	if s == "" {
		return !whole
	}
	e := outputGrammar[i]
	switch e.kind {
	case 'l':
		return matchLiteral(s, e.lit, i, whole)
	case 't':
		for _, t := range Types {
			if matchLiteral(s, t.String(), i, whole) {
				return true
			}
		}
		return false
	case 'p':
		// TYPE ("," TYPE)*: after each type, either more or the next element
		for _, t := range Types {
			name := t.String()
			if len(s) < len(name) {
				if !whole && strings.HasPrefix(name, s) {
					return true
				}
				continue
			}
			if !strings.HasPrefix(s, name) {
				continue
			}
			rest := s[len(name):]
			if rest == "" && !whole {
				return true
			}
			if strings.HasPrefix(rest, ",") && matchGrammar(rest[1:], i, whole) {
				return true
			}
			if rest == "," && !whole {
				return true
			}
			if matchGrammar(rest, i+1, whole) {
				return true
			}
		}
		return false
	case 'n':
		n, complete, ok := scanNumber(s)
		if !ok {
			return false
		}
		if n == len(s) {
			return !whole || (complete && matchGrammar("", i+1, whole))
		}
		return complete && matchGrammar(s[n:], i+1, whole)
	case 'x':
		j := strings.IndexByte(s, '"')
		if j < 0 {
			return !whole
		}
		return matchGrammar(s[j:], i+1, whole)
	}
	return false
}

func matchLiteral(s, lit string, i int, whole bool) bool {
	if len(s) < len(lit) {
		return !whole && strings.HasPrefix(lit, s)
	}
	return strings.HasPrefix(s, lit) && matchGrammar(s[len(lit):], i+1, whole)
}

// scanNumber reads the longest number-shaped prefix of s: "-1.0", or [01]
// "." then 1 to 4 digits. It returns its length, whether it is a complete
// number, and false if s does not start like one.
func scanNumber(s string) (n int, complete, ok bool) {
	if strings.HasPrefix(s, "-") {
		const neg = "-1.0"
		for n < len(s) && n < len(neg) && s[n] == neg[n] {
			n++
		}
		if n < len(neg) && n < len(s) {
			return 0, false, false
		}
		return n, n == len(neg), true
	}
	if s[0] != '0' && s[0] != '1' {
		return 0, false, false
	}
	n = 1
	if n == len(s) {
		return n, false, true
	}
	if s[n] != '.' {
		return 0, false, false
	}
	n++
	digits := 0
	for n < len(s) && digits < 4 && s[n] >= '0' && s[n] <= '9' {
		n++
		digits++
	}
	if s[0] == '1' && digits > 0 && strings.Trim(s[2:n], "0") != "" {
		return 0, false, false // above 1.0
	}
	return n, digits > 0, true
}
