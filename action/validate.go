package action

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Validate reports whether a is a well-formed action as a caller may give it
// (a previous action in a prompt, a history file): a known type; for
// DUAL_POINT, touch and lift points that are finite and in [0, 1]; for every
// other type both points [-1, -1] (NoPoint); typed text only on TYPE, and
// valid UTF-8. Every path that accepts actions from outside (--prev, history
// files) checks them with it, so all forms accept exactly the same actions.
func (a Action) Validate() error {
	if !a.Type.Valid() {
		return fmt.Errorf("unknown action type %s", a.Type)
	}
	if a.Type == DualPoint {
		for _, p := range []struct {
			name string
			pt   Point
		}{{"touch_point", a.Touch}, {"lift_point", a.Lift}} {
			if err := checkNormalized(p.pt); err != nil {
				return fmt.Errorf("%s %s: %w", a.Type, p.name, err)
			}
		}
	} else {
		if a.Touch != NoPoint {
			return fmt.Errorf("%s carries touch_point %s, want [-1.0, -1.0] (only DUAL_POINT has points)", a.Type, pointText(a.Touch))
		}
		if a.Lift != NoPoint {
			return fmt.Errorf("%s carries lift_point %s, want [-1.0, -1.0] (only DUAL_POINT has points)", a.Type, pointText(a.Lift))
		}
	}
	if a.Text != "" && a.Type != TypeText {
		return fmt.Errorf("%s carries typed_text %q (only TYPE has text)", a.Type, a.Text)
	}
	if !utf8.ValidString(a.Text) {
		return fmt.Errorf("%s typed_text %q is not valid UTF-8", a.Type, a.Text)
	}
	return nil
}

// checkNormalized accepts a point whose coordinates are finite and in [0, 1].
func checkNormalized(p Point) error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"y", p.Y}, {"x", p.X}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 || c.v > 1 {
			return fmt.Errorf("%s = %v is not a normalized coordinate in [0, 1]", c.name, c.v)
		}
	}
	return nil
}

// pointText writes p for an error message; unlike PyList it takes NaN and Inf.
func pointText(p Point) string {
	return fmt.Sprintf("[%v, %v]", p.Y, p.X)
}
