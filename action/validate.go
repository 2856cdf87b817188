package action

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Validate reports whether a is a well-formed action: a known type, every
// coordinate finite and either in [0, 1] or Auto-UI's -1 for "no point",
// and valid UTF-8 text. Every path that accepts actions from outside
// (--prev, history files, server requests) checks them with it, so all forms
// accept exactly the same actions.
//
// It accepts whatever the model's output grammar can produce, because the
// model's own outputs come back as history: a TYPE with a touch point, or
// text on a tap, is odd but is rendered into the prompt as Auto-UI renders
// it, and refusing it would stop an episode the model is still playing.
func (a Action) Validate() error { return a.validate(true) }

// ValidateOutput is Validate for what a model said: its points need only be
// finite. An unconstrained model may say 1.5; the AITW matcher scores it as
// said, and history and devices take it Clamped.
func (a Action) ValidateOutput() error { return a.validate(false) }

// Clamped is the action as a device performs it, and as it joins the
// history: each coordinate in [0, 1], -1 (none) kept.
func (a Action) Clamped() Action {
	for _, v := range []*float64{&a.Touch.Y, &a.Touch.X, &a.Lift.Y, &a.Lift.X} {
		if *v != -1 {
			*v = min(max(*v, 0), 1)
		}
	}
	return a
}

func (a Action) validate(normalized bool) error {
	if !a.Type.Valid() {
		return fmt.Errorf("unknown action type %s", a.Type)
	}
	for _, p := range []struct {
		name string
		pt   Point
	}{{"touch_point", a.Touch}, {"lift_point", a.Lift}} {
		if err := checkCoordinates(p.pt, normalized); err != nil {
			return fmt.Errorf("%s %s: %w", a.Type, p.name, err)
		}
	}
	if !utf8.ValidString(a.Text) {
		return fmt.Errorf("%s typed_text %q is not valid UTF-8", a.Type, a.Text)
	}
	return nil
}

// checkCoordinates accepts a point whose coordinates are each -1 or finite
// and, when normalized, in [0, 1].
func checkCoordinates(p Point, normalized bool) error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"y", p.Y}, {"x", p.X}} {
		if !normalized && (math.IsNaN(c.v) || math.IsInf(c.v, 0)) {
			return fmt.Errorf("%s = %v is not a number", c.name, c.v)
		}
		if normalized && c.v != -1 && !(c.v >= 0 && c.v <= 1) {
			return fmt.Errorf("%s = %v is not a normalized coordinate in [0, 1] (or -1 for none)", c.name, c.v)
		}
	}
	return nil
}
