package action

import "testing"

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		a    Action
		want string
	}{
		{Action{Type: DualPoint, Touch: Point{Y: 0.5, X: 0.25}, Lift: Point{Y: 0.5, X: 0.25}}, "tap at y=0.5000 x=0.2500"},
		{Action{Type: DualPoint, Touch: Point{Y: 0.8, X: 0.5}, Lift: Point{Y: 0.2, X: 0.5}}, "swipe from y=0.8000 x=0.5000 to y=0.2000 x=0.5000"},
		{Action{Type: TypeText, Text: `say "hi"`, Touch: NoPoint, Lift: NoPoint}, `type "say \"hi\""`},
		{Action{Type: PressHome, Touch: NoPoint, Lift: NoPoint}, "PRESS_HOME"},
		{Action{}, "unparsed output"},
	} {
		if got := Describe(c.a); got != c.want {
			t.Errorf("Describe(%+v) = %q, want %q", c.a, got, c.want)
		}
	}
}
