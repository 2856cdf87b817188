package action

import "fmt"

// Describe is a short human reading of an action for terminals and reports:
// "tap at y=0.5 x=0.25", "swipe from ... to ...", `type "hello"`, or the type
// name. An action without a valid type is an output that did not parse.
func Describe(a Action) string {
	switch {
	case !a.Type.Valid():
		return "unparsed output"
	case a.Type == DualPoint && IsTap(a):
		return fmt.Sprintf("tap at y=%.4f x=%.4f", a.Touch.Y, a.Touch.X)
	case a.Type == DualPoint:
		return fmt.Sprintf("swipe from y=%.4f x=%.4f to y=%.4f x=%.4f", a.Touch.Y, a.Touch.X, a.Lift.Y, a.Lift.X)
	case a.Type == TypeText:
		return fmt.Sprintf("type %q", a.Text)
	}
	return a.Type.String()
}
