package sim

import (
	"strconv"
	"strings"
)

// calcKey applies a calculator button.
func (p *Phone) calcKey(k string) {
	switch k {
	case "C":
		p.calc = ""
	case "<":
		if r := []rune(p.calc); len(r) > 0 {
			p.calc = string(r[:len(r)-1])
		}
	case "=":
		if v, ok := evalExpr(p.calc); ok {
			p.calc = formatNum(v)
		} else {
			p.calc = "Error"
		}
	default:
		if p.calc == "Error" {
			p.calc = ""
		}
		if len(p.calc) < 24 {
			p.calc += k
		}
	}
}

func formatNum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// evalExpr evaluates + - * / with parentheses and the usual precedence.
func evalExpr(s string) (float64, bool) {
	e := &exprParser{s: s}
	v, ok := e.sum()
	return v, ok && e.i == len(e.s)
}

type exprParser struct {
	s string
	i int
}

func (e *exprParser) sum() (float64, bool) {
	v, ok := e.product()
	for ok && e.i < len(e.s) && (e.s[e.i] == '+' || e.s[e.i] == '-') {
		op := e.s[e.i]
		e.i++
		var w float64
		if w, ok = e.product(); op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, ok
}

func (e *exprParser) product() (float64, bool) {
	v, ok := e.unary()
	for ok && e.i < len(e.s) && (e.s[e.i] == '*' || e.s[e.i] == '/') {
		op := e.s[e.i]
		e.i++
		var w float64
		if w, ok = e.unary(); op == '*' {
			v *= w
		} else if w == 0 {
			return 0, false
		} else {
			v /= w
		}
	}
	return v, ok
}

func (e *exprParser) unary() (float64, bool) {
	if e.i < len(e.s) && e.s[e.i] == '-' {
		e.i++
		v, ok := e.unary()
		return -v, ok
	}
	if e.i < len(e.s) && e.s[e.i] == '(' {
		e.i++
		v, ok := e.sum()
		if !ok || e.i >= len(e.s) || e.s[e.i] != ')' {
			return 0, false
		}
		e.i++
		return v, true
	}
	j := e.i
	for e.i < len(e.s) && (e.s[e.i] == '.' || e.s[e.i] >= '0' && e.s[e.i] <= '9') {
		e.i++
	}
	v, err := strconv.ParseFloat(e.s[j:e.i], 64)
	return v, err == nil
}
