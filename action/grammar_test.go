package action

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGrammarAcceptsRenderedOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 2000; i++ {
		a := screenAction(rng)
		plan := append([]Type{a.Type}, randomPlan(rng)...)
		out := Target(plan, Normalize(a, ScrollFixed))
		if !CompleteOutput(out) {
			t.Fatalf("grammar rejects %q", out)
		}
		for k := 0; k <= len(out); k++ {
			if !ValidOutputPrefix(out[:k]) {
				t.Fatalf("prefix %q of %q rejected", out[:k], out)
			}
		}
		if _, err := ParseOutput(out); err != nil {
			t.Fatalf("grammar output does not parse: %v", err)
		}
	}
}

// screenAction is randomAction with gesture points moved onto the screen:
// the grammar, like a trained model, only has coordinates in [0, 1].
func screenAction(r *rand.Rand) Action {
	a := randomAction(r)
	clamp := func(v float64) float64 { return math.Min(1, math.Max(0, v)) }
	a.Touch = Point{clamp(a.Touch.Y), clamp(a.Touch.X)}
	a.Lift = Point{clamp(a.Lift.Y), clamp(a.Lift.X)}
	return a
}

func TestGrammarRejects(t *testing.T) {
	bad := []string{
		"Action Plan: [DUAL_POINTS",
		"Action Plan: [DUAL_POINT] ; Action Decision: \"action_type\": \"TAP",
		`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[2`,
		`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[1.5`,
		`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[0.12345`,
		`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[-2`,
		"Action Plan: [,",
		"Plan",
		`Action Plan: [PRESS_HOME] ; Action Decision: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": ""x`,
	}
	for _, s := range bad {
		if ValidOutputPrefix(s) {
			t.Errorf("accepted %q", s)
		}
	}
	if CompleteOutput(`Action Plan: [PRESS_HOME] ; Action Decision: "action_type": "PRESS_HOME"`) {
		t.Error("incomplete output accepted as complete")
	}
	if !ValidOutputPrefix("") || CompleteOutput("") {
		t.Error("empty text")
	}
}
