package action

import (
	"slices"
	"testing"
)

func TestNormalizeSwipes(t *testing.T) {
	up := [2]Point{{0.8, 0.5}, {0.2, 0.5}}
	down := [2]Point{{0.2, 0.5}, {0.8, 0.5}}
	left := [2]Point{{0.5, 0.8}, {0.5, 0.2}}
	right := [2]Point{{0.5, 0.2}, {0.5, 0.8}}
	for _, c := range []struct {
		name          string
		a             Action
		fixed, legacy [2]Point
	}{
		{"up", swipe(0.7, 0.4, 0.3, 0.45), up, up},
		{"down", swipe(0.3, 0.4, 0.9, 0.3), down, down},
		{"left", swipe(0.5, 0.9, 0.45, 0.1), left, up},
		{"right", swipe(0.5, 0.1, 0.55, 0.9), right, down},
		{"tie goes to y (down)", swipe(0.2, 0.2, 0.5, 0.5), down, down},
		{"tie goes to y (up)", swipe(0.5, 0.5, 0.2, 0.2), up, up},
	} {
		for _, m := range []struct {
			m    ScrollMap
			want [2]Point
		}{{ScrollFixed, c.fixed}, {ScrollLegacy, c.legacy}} {
			got := Normalize(c.a, m.m)
			want := Action{Type: DualPoint, Touch: m.want[0], Lift: m.want[1]}
			if got != want {
				t.Errorf("%s, %s: Normalize = %v, want %v", c.name, m.m, got, want)
			}
		}
	}
}

func TestNormalizeTapsAndOthers(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Action
		want Action
	}{
		{"tap rounds to 4 places, lift = touch", swipe(0.72625, 0.41874, 0.7270, 0.4190),
			Action{Type: DualPoint, Touch: Point{0.7262, 0.4187}, Lift: Point{0.7262, 0.4187}}},
		{"tap with exact tie rounds half to even", tap(0.03125, 0.09375),
			Action{Type: DualPoint, Touch: Point{0.0312, 0.0938}, Lift: Point{0.0312, 0.0938}}},
		{"type keeps cleaned text", Action{Type: TypeText, Touch: Point{0.1, 0.1}, Lift: Point{0.2, 0.2}, Text: "it's  \"a\"\tb\\c"},
			Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "its a bc"}},
		{"back drops points and text", Action{Type: PressBack, Touch: Point{0.1, 0.1}, Lift: Point{0.1, 0.1}, Text: "x"},
			Action{Type: PressBack, Touch: NoPoint, Lift: NoPoint}},
		{"complete", Action{Type: StatusTaskComplete}, Action{Type: StatusTaskComplete, Touch: NoPoint, Lift: NoPoint}},
	} {
		for _, m := range []ScrollMap{ScrollFixed, ScrollLegacy} {
			if got := Normalize(c.in, m); got != c.want {
				t.Errorf("%s (%s): Normalize(%v) = %v, want %v", c.name, m, c.in, got, c.want)
			}
		}
	}
	got := Normalize(tap(0.5, 0.5), ScrollFixed).String()
	want := `"action_type": "DUAL_POINT", "touch_point": "[0.5, 0.5]", "lift_point": "[0.5, 0.5]", "typed_text": ""`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	got = Normalize(Action{Type: PressHome}, ScrollFixed).String()
	want = `"action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": ""`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestTarget(t *testing.T) {
	got := Target([]Type{DualPoint, TypeText, PressEnter}, Action{Type: DualPoint, Touch: Point{0.7262, 0.4187}, Lift: Point{0.7262, 0.4187}})
	want := `Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.7262, 0.4187]", "lift_point": "[0.7262, 0.4187]", "typed_text": ""`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestPlanTypes(t *testing.T) {
	steps := []Action{tap(0.1, 0.1), {Type: TypeText}, {Type: PressEnter}, tap(0.2, 0.2), {Type: PressBack}, {Type: StatusTaskComplete}}
	for _, c := range []struct {
		i    int
		want []Type
	}{
		{0, []Type{DualPoint, TypeText, PressEnter, DualPoint}},
		{2, []Type{PressEnter, DualPoint, PressBack, StatusTaskComplete}},
		{4, []Type{PressBack, StatusTaskComplete}},
		{5, []Type{StatusTaskComplete}},
		{6, nil},
		{-1, nil},
	} {
		if got := PlanTypes(steps, c.i); !slices.Equal(got, c.want) {
			t.Errorf("PlanTypes(steps, %d) = %v, want %v", c.i, got, c.want)
		}
	}
}

func TestScrollMapNames(t *testing.T) {
	for _, m := range []ScrollMap{ScrollFixed, ScrollLegacy} {
		got, err := ParseScrollMap(m.String())
		if err != nil || got != m {
			t.Errorf("ParseScrollMap(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseScrollMap("sideways"); err == nil {
		t.Error("ParseScrollMap accepted an unknown map")
	}
}

func TestCollapseSpace(t *testing.T) {
	for in, want := range map[string]string{
		"a b": "a b", "a  b": "a b", " a\t\nb ": " a b ", "a\u3000\u00a0b": "a b", "a\x1cb": "a b", "": "",
	} {
		if got := collapseSpace(in); got != want {
			t.Errorf("collapseSpace(%q) = %q, want %q", in, got, want)
		}
	}
}
