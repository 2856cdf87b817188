package action

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Output is a parsed model output.
type Output struct {
	// Plan holds the plan's types; nil when the output has no plan part or the
	// plan does not parse (it is advisory: Auto-UI's scorer ignores it).
	Plan   []Type
	Action Action
}

// ParseError reports model output that does not hold a valid action. Raw is
// the whole output, kept for logs and reports.
type ParseError struct {
	Raw    string
	Reason string
}

func (e *ParseError) Error() string {
	raw := e.Raw
	if len(raw) > 200 {
		raw = raw[:200] + "..."
	}
	return fmt.Sprintf("parse model output %q: %s", raw, e.Reason)
}

const (
	planPrefix     = "Action Plan:"
	decisionPrefix = "Action Decision:"
)

// ParseOutput reads "Action Plan: [A,B] ; Action Decision: <action text>",
// "Action Decision: <action text>" or bare action text (models trained without
// a plan). It follows Auto-UI's evaluation, which takes the rest of the line
// after the first "Action Decision:" and evaluates it as the body of a Python
// dict: the keys action_type, touch_point, lift_point and typed_text must all
// be there with string values (later duplicates win, unknown keys are
// ignored); action_type must be an exact AITW name; the points must be Python
// lists (or tuples) of two finite numbers. Anything else gives a *ParseError.
func ParseOutput(raw string) (Output, error) {
	out, fields, err := parseDecision(raw)
	if err != nil {
		return Output{}, err
	}
	touch, err := parsePoint(fields["touch_point"])
	if err != nil {
		return Output{}, &ParseError{Raw: raw, Reason: fmt.Sprintf("touch_point: %v", err)}
	}
	lift, err := parsePoint(fields["lift_point"])
	if err != nil {
		return Output{}, &ParseError{Raw: raw, Reason: fmt.Sprintf("lift_point: %v", err)}
	}
	out.Action.Touch, out.Action.Lift = touch, lift
	return out, nil
}

// LooseOutput is a model output as Auto-GUI's main.py reads it: it eval()s
// each point, so a point of any length parses there.
type LooseOutput struct {
	Output
	// Touch and Lift are each point's numbers as written: two when it is
	// well-formed (then Action holds the point), else any other count
	// ("[0.876]", "[0.1, 0.2, 0.3]", "[]"; a bare number counts as one) and
	// Action holds NoPoint.
	Touch, Lift []float64
}

// ParseOutputLoose reads raw as ParseOutput does, except that a point may
// hold any number of numbers (or be one bare number), as Python's eval()
// accepts it. Only the autoui scoring protocol uses it, to count what
// main.py counts (the type of an output whose points are malformed); every
// other reader keeps ParseOutput's [y, x] rule.
func ParseOutputLoose(raw string) (LooseOutput, error) {
	out, fields, err := parseDecision(raw)
	if err != nil {
		return LooseOutput{}, err
	}
	lo := LooseOutput{Output: out}
	if lo.Touch, err = parseNumbers(fields["touch_point"]); err != nil {
		return LooseOutput{}, &ParseError{Raw: raw, Reason: fmt.Sprintf("touch_point: %v", err)}
	}
	if lo.Lift, err = parseNumbers(fields["lift_point"]); err != nil {
		return LooseOutput{}, &ParseError{Raw: raw, Reason: fmt.Sprintf("lift_point: %v", err)}
	}
	lo.Action.Touch, lo.Action.Lift = pointOf(lo.Touch), pointOf(lo.Lift)
	return lo, nil
}

// pointOf is the point two numbers make, NoPoint for any other count.
func pointOf(nums []float64) Point {
	if len(nums) != 2 {
		return NoPoint
	}
	return Point{Y: nums[0], X: nums[1]}
}

// parseDecision reads the plan, the action type and text, and the raw
// fields of an output (ParseOutput's rules, points left to the caller).
func parseDecision(raw string) (Output, map[string]string, error) {
	fail := func(format string, args ...any) (Output, map[string]string, error) {
		return Output{}, nil, &ParseError{Raw: raw, Reason: fmt.Sprintf(format, args...)}
	}
	var out Output
	decision := raw
	if i := strings.Index(raw, decisionPrefix); i >= 0 {
		out.Plan = parsePlan(raw[:i])
		decision = raw[i+len(decisionPrefix):]
	}
	decision = strings.TrimLeftFunc(decision, IsPySpace)
	// Auto-UI's regex `.*` stops at the end of the line.
	if i := strings.IndexByte(decision, '\n'); i >= 0 {
		decision = decision[:i]
	}
	decision = strings.TrimFunc(decision, IsPySpace)
	if decision == "" {
		return fail("no action text")
	}
	fields, err := parseDict(decision)
	if err != nil {
		return fail("%v", err)
	}
	for _, k := range []string{"action_type", "touch_point", "lift_point", "typed_text"} {
		if _, ok := fields[k]; !ok {
			return fail("missing %s", k)
		}
	}
	t, ok := typeByName(fields["action_type"])
	if !ok {
		return fail("unknown action_type %q", fields["action_type"])
	}
	out.Action = Action{Type: t, Text: fields["typed_text"]}
	return out, fields, nil
}

func typeByName(name string) (Type, bool) {
	for t, n := range typeNames {
		if n == name {
			return t, true
		}
	}
	return 0, false
}

// parsePlan reads "Action Plan: [A,B,C] ;" (spaces allowed around the items
// and the separator). It returns nil if s is not exactly that.
func parsePlan(s string) []Type {
	s = strings.TrimFunc(s, IsPySpace)
	s, ok := strings.CutPrefix(s, planPrefix)
	if !ok {
		return nil
	}
	s = strings.TrimFunc(s, IsPySpace)
	s = strings.TrimRightFunc(strings.TrimSuffix(s, ";"), IsPySpace)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil
	}
	body := strings.TrimFunc(s[1:len(s)-1], IsPySpace)
	plan := []Type{}
	if body == "" {
		return plan
	}
	for _, item := range strings.Split(body, ",") {
		t, ok := typeByName(strings.TrimFunc(item, IsPySpace))
		if !ok {
			return nil
		}
		plan = append(plan, t)
	}
	return plan
}

// parseDict reads the body of a Python dict literal whose keys and values are
// all string literals: `"k": "v", "k2": 'v2',` (trailing comma allowed).
func parseDict(s string) (map[string]string, error) {
	fields := map[string]string{}
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v') {
			i++
		}
	}
	for {
		skip()
		if i == len(s) {
			break
		}
		key, n, err := parseStr(s[i:])
		if err != nil {
			return nil, fmt.Errorf("key at byte %d: %w", i, err)
		}
		i += n
		skip()
		if i == len(s) || s[i] != ':' {
			return nil, fmt.Errorf("expected ':' after key %q at byte %d", key, i)
		}
		i++
		skip()
		val, n, err := parseStr(s[i:])
		if err != nil {
			return nil, fmt.Errorf("value of %q at byte %d: %w", key, i, err)
		}
		i += n
		fields[key] = val
		skip()
		if i == len(s) {
			break
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("expected ',' at byte %d", i)
		}
		i++
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("no fields")
	}
	return fields, nil
}

// parseStr reads one quoted string literal at the start of s and returns its
// value and length. Escapes: \\, \" and \' give the character; any other
// backslash stays literal (as Python keeps unknown escapes). Auto-UI removes
// these characters from typed text, so models rarely produce them.
func parseStr(s string) (string, int, error) {
	if s == "" || (s[0] != '"' && s[0] != '\'') {
		return "", 0, fmt.Errorf("expected a quoted string")
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '"' || s[i+1] == '\''):
			b.WriteByte(s[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string")
}

// parsePoint reads "[y, x]" (or "(y, x)", trailing comma allowed) with two
// finite Python number literals.
func parsePoint(s string) (Point, error) {
	s = strings.TrimFunc(s, IsPySpace)
	parts, err := listItems(s)
	if err != nil {
		return Point{}, err
	}
	if len(parts) != 2 {
		return Point{}, fmt.Errorf("%q does not hold two numbers", s)
	}
	var v [2]float64
	for k, p := range parts {
		f, err := parseNumber(p)
		if err != nil {
			return Point{}, fmt.Errorf("%q: %w", s, err)
		}
		v[k] = f
	}
	return Point{Y: v[0], X: v[1]}, nil
}

// listItems splits a Python list or tuple literal of plain items (no
// nesting) into its trimmed items; a trailing comma is allowed.
func listItems(s string) ([]string, error) {
	if len(s) < 2 || !(s[0] == '[' && s[len(s)-1] == ']' || s[0] == '(' && s[len(s)-1] == ')') {
		return nil, fmt.Errorf("%q is not a [y, x] list", s)
	}
	body := strings.TrimFunc(s[1:len(s)-1], IsPySpace)
	if body == "" {
		return nil, nil
	}
	parts := strings.Split(body, ",")
	if len(parts) > 1 && strings.TrimFunc(parts[len(parts)-1], IsPySpace) == "" {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		parts[i] = strings.TrimFunc(parts[i], IsPySpace)
	}
	return parts, nil
}

// parseNumbers reads a list or tuple of any number of finite numbers, or
// one bare number, as Python's eval() accepts them.
func parseNumbers(s string) ([]float64, error) {
	s = strings.TrimFunc(s, IsPySpace)
	if f, err := parseNumber(s); err == nil {
		return []float64{f}, nil
	}
	parts, err := listItems(s)
	if err != nil {
		return nil, err
	}
	nums := make([]float64, len(parts))
	for i, p := range parts {
		if nums[i], err = parseNumber(p); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
	}
	return nums, nil
}

// parseNumber accepts a decimal int or float literal with an optional sign
// ("0.5", "-1.0", "1", ".5", "1e-05"), finite.
func parseNumber(s string) (float64, error) {
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	digits, dot, exp := 0, false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && !exp:
			dot = true
		case (c == 'e' || c == 'E') && !exp && digits > 0:
			exp = true
			if i+1 < len(body) && (body[i+1] == '+' || body[i+1] == '-') {
				i++
			}
			if i+1 == len(body) {
				return 0, fmt.Errorf("bad number %q", s)
			}
		default:
			return 0, fmt.Errorf("bad number %q", s)
		}
	}
	if digits == 0 {
		return 0, fmt.Errorf("bad number %q", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return f, nil
}
