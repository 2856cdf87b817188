package action

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const validOutput = `Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`

func TestParseOutputValid(t *testing.T) {
	tapA := Action{Type: DualPoint, Touch: Point{0.7262, 0.4187}, Lift: Point{0.7262, 0.4187}}
	typeA := Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "Best Buy"}
	for _, c := range []struct {
		name string
		raw  string
		plan []Type
		want Action
	}{
		{"full", validOutput, []Type{DualPoint, TypeText, PressEnter}, tapA},
		{"decision only", `Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`, nil, tapA},
		{"bare action text", `"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Best Buy"`, nil, typeA},
		{"spaces in plan, no space after colon", `Action Plan: [ TYPE , PRESS_ENTER ];Action Decision:"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Best Buy"`, []Type{TypeText, PressEnter}, typeA},
		{"empty plan", `Action Plan: [] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Best Buy"`, []Type{}, typeA},
		{"bad plan is dropped, action kept", `Action Plan: [DUAL_POINT,SCROLL] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Best Buy"`, nil, typeA},
		{"single quotes, other key order, trailing comma, ints, tuple", `Action Decision: 'typed_text': 'Best Buy', "lift_point": "(-1, -1)", 'action_type': 'TYPE', "touch_point": "[-1, -1.0,]",`, nil, typeA},
		{"unknown key ignored, last duplicate wins", `"action_type": "PRESS_BACK", "extra": "x", "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "Best Buy"`, nil, typeA},
		{"rest of the line only", validOutput + "\nAction Decision: garbage", []Type{DualPoint, TypeText, PressEnter}, tapA},
		{"scientific and escapes", `"action_type": "TYPE", "touch_point": "[1e-05, -1.0]", "lift_point": "[-1.0, 5E-1]", "typed_text": "a\"b\\c\n"`, nil,
			Action{Type: TypeText, Touch: Point{1e-05, -1}, Lift: Point{-1, 0.5}, Text: `a"b\c\n`}},
	} {
		out, err := ParseOutput(c.raw)
		if err != nil {
			t.Errorf("%s: ParseOutput: %v", c.name, err)
			continue
		}
		if out.Action != c.want {
			t.Errorf("%s: action = %+v, want %+v", c.name, out.Action, c.want)
		}
		if !slices.Equal(out.Plan, c.plan) || (out.Plan == nil) != (c.plan == nil) {
			t.Errorf("%s: plan = %#v, want %#v", c.name, out.Plan, c.plan)
		}
	}
}

var malformedOutputs = []string{
	"",
	"   ",
	"Action Plan: [DUAL_POINT,TYPE] ; Action Decision: ",
	`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.72`,
	`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": "`,
	`"action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]"`,
	`"action_type": "dual_point", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "4", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": "[0.7262]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187, 0.1]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": "[nan, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": "[1e999, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": "[0x1, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT", "touch_point": [0.7262, 0.4187], "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`{"action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""}`,
	`"action_type" "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "DUAL_POINT" "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`,
	`"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "it"s"`,
	"Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER] ;",
	"Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER] ; Action Decision: Action Decision: Action Decision:",
	"\x00\xff\xfe garbage",
	"}{][:,'\"\\",
}

func TestParseOutputMalformed(t *testing.T) {
	for _, raw := range malformedOutputs {
		out, err := ParseOutput(raw)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseOutput(%q) = %+v, %v; want a *ParseError", raw, out, err)
			continue
		}
		if pe.Raw != raw || pe.Reason == "" {
			t.Errorf("ParseOutput(%q): ParseError{Raw: %q, Reason: %q}", raw, pe.Raw, pe.Reason)
		}
		if !strings.Contains(err.Error(), pe.Reason) {
			t.Errorf("error text %q lacks the reason", err.Error())
		}
	}
}

// randomAction draws actions of every type, with taps, swipes, tricky floats
// and texts holding quotes, whitespace and the target's own keywords.
func randomAction(r *rand.Rand) Action {
	texts := []string{"", "hello", `say "hi"`, "it's", `back\slash`, "two  spaces\tand\nlines", " lead", "日本語 café",
		`"typed_text": "x"`, "Action Decision: y", "[0.5, 0.2]", "a, b: c"}
	coord := func() float64 {
		switch r.IntN(5) {
		case 0:
			return PyRound4(r.Float64())
		case 1:
			return float64(float32(r.Float64()))
		case 2:
			return r.Float64() * math.Pow(10, float64(r.IntN(30)-15))
		case 3:
			return -1
		}
		return r.Float64()
	}
	t := Types[r.IntN(len(Types))]
	a := Action{Type: t, Touch: Point{coord(), coord()}, Text: texts[r.IntN(len(texts))]}
	if t == DualPoint && r.IntN(2) == 0 {
		a.Lift = Point{a.Touch.Y + (r.Float64()-0.5)*0.06, a.Touch.X + (r.Float64()-0.5)*0.06}
	} else {
		a.Lift = Point{coord(), coord()}
	}
	return a
}

func randomPlan(r *rand.Rand) []Type {
	plan := make([]Type, r.IntN(5))
	for i := range plan {
		plan[i] = Types[r.IntN(len(Types))]
	}
	return plan
}

// ParseOutput(Target(plan, Normalize(a))) gives back exactly (plan, Normalize(a)).
func TestParseRoundTripNormalized(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		a, plan := randomAction(r), randomPlan(r)
		m := ScrollMap(r.IntN(2))
		n := Normalize(a, m)
		s := Target(plan, n)
		out, err := ParseOutput(s)
		if err != nil {
			t.Fatalf("ParseOutput(%q): %v", s, err)
		}
		if out.Action != n || !slices.Equal(out.Plan, plan) {
			t.Fatalf("round trip of %v (%s):\n got %+v %v\nwant %+v %v", a, m, out.Action, out.Plan, n, plan)
		}
		if Normalize(n, m) != n {
			t.Fatalf("Normalize is not idempotent on %v: %v", n, Normalize(n, m))
		}
	}
}

// Raw (unnormalized) finite coordinates also survive render + parse exactly,
// because the rendering is Python's shortest round-trip repr.
func TestParseRoundTripRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		a, plan := randomAction(r), randomPlan(r)
		a.Text = collapseSpace(stripQuotes(a.Text))
		out, err := ParseOutput(Target(plan, a))
		if err != nil {
			t.Fatalf("ParseOutput(%q): %v", Target(plan, a), err)
		}
		if out.Action != a {
			t.Fatalf("round trip: got %+v, want %+v", out.Action, a)
		}
	}
}

func FuzzParseOutput(f *testing.F) {
	f.Add(validOutput)
	for i := 1; i < len(validOutput); i += 7 {
		f.Add(validOutput[:i]) // truncated
	}
	for _, s := range malformedOutputs {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20; i++ {
		f.Add(Target(randomPlan(r), Normalize(randomAction(r), ScrollFixed)))
		f.Add(randomAction(r).String())
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := ParseOutput(raw)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Raw != raw {
				t.Fatalf("ParseOutput(%q) error %v is not a *ParseError keeping the raw text", raw, err)
			}
			return
		}
		// What parses renders to text that parses to the same thing (the text
		// loses the characters Auto-UI strips).
		again, err := ParseOutput(Target(out.Plan, out.Action))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", Target(out.Plan, out.Action), err)
		}
		want := out.Action
		want.Text = stripQuotes(want.Text)
		if again.Action != want || !slices.Equal(again.Plan, out.Plan) {
			t.Fatalf("re-parse of %q: got %+v, want %+v", raw, again, out)
		}
	})
}
