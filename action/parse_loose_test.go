package action

import (
	"errors"
	"slices"
	"testing"
)

// ParseOutputLoose reads points of any length, as main.py's eval() does,
// and agrees with ParseOutput everywhere else; ParseOutput stays strict.
func TestParseOutputLoose(t *testing.T) {
	decision := func(touch, lift string) string {
		return `Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "` + touch + `", "lift_point": "` + lift + `", "typed_text": ""`
	}
	for _, c := range []struct {
		touch, lift string
		wantT       []float64
		wantL       []float64
	}{
		{"[0.876]", "[0.876]", []float64{0.876}, []float64{0.876}},
		{"[0.1, 0.2, 0.3]", "[0.5, 0.2]", []float64{0.1, 0.2, 0.3}, []float64{0.5, 0.2}},
		{"[]", "()", []float64{}, []float64{}},
		{"0.876", "(0.5,)", []float64{0.876}, []float64{0.5}},
		{"[0.7262, 0.4187,]", "(-1, 5E-1)", []float64{0.7262, 0.4187}, []float64{-1, 0.5}},
	} {
		raw := decision(c.touch, c.lift)
		lo, err := ParseOutputLoose(raw)
		if err != nil {
			t.Errorf("%s %s: %v", c.touch, c.lift, err)
			continue
		}
		if lo.Action.Type != DualPoint || !slices.Equal(lo.Touch, c.wantT) || !slices.Equal(lo.Lift, c.wantL) || !slices.Equal(lo.Plan, []Type{DualPoint}) {
			t.Errorf("%s %s: %+v", c.touch, c.lift, lo)
		}
		if want := pointOf(c.wantT); lo.Action.Touch != want {
			t.Errorf("%s: Action.Touch %v, want %v", c.touch, lo.Action.Touch, want)
		}
		strict, serr := ParseOutput(raw)
		if len(c.wantT) == 2 && len(c.wantL) == 2 {
			if serr != nil || strict.Action != lo.Action {
				t.Errorf("%s %s: ParseOutput %+v, %v; loose %+v", c.touch, c.lift, strict.Action, serr, lo.Action)
			}
		} else if serr == nil {
			t.Errorf("ParseOutput accepted %q", raw)
		}
	}
	// What Python's eval() refuses, or what fails before the points, stays
	// refused: only the point lengths are loose.
	loose := 0
	for _, raw := range malformedOutputs {
		_, err := ParseOutputLoose(raw)
		var pe *ParseError
		switch {
		case err == nil:
			loose++
		case !errors.As(err, &pe) || pe.Raw != raw:
			t.Errorf("ParseOutputLoose(%q): %v, want a *ParseError", raw, err)
		}
	}
	if loose != 2 { // "[0.7262]" and "[0.7262, 0.4187, 0.1]"
		t.Errorf("ParseOutputLoose accepted %d of the malformed outputs, want the 2 with 1 and 3 numbers", loose)
	}
}
