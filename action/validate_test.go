package action

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tap := Point{Y: 0.5, X: 0.25}
	good := []Action{
		{Type: DualPoint, Touch: tap, Lift: tap},
		{Type: DualPoint, Touch: Point{0, 0}, Lift: Point{1, 1}},
		{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "wifi"},
		{Type: TypeText, Touch: NoPoint, Lift: NoPoint},
		{Type: PressBack, Touch: NoPoint, Lift: NoPoint},
		{Type: PressHome, Touch: NoPoint, Lift: NoPoint},
		{Type: PressEnter, Touch: NoPoint, Lift: NoPoint},
		{Type: StatusTaskComplete, Touch: NoPoint, Lift: NoPoint},
		{Type: StatusTaskImpossible, Touch: NoPoint, Lift: NoPoint},
		// what the output grammar lets a model say, fed back as history
		{Type: TypeText, Touch: Point{0.25, 0.605}, Lift: NoPoint, Text: "x"},
		{Type: DualPoint, Touch: tap, Lift: tap, Text: "x"},
		{Type: DualPoint, Touch: NoPoint, Lift: Point{-1, 0.5}},
	}
	for _, a := range good {
		if err := a.Validate(); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
	bad := map[string]Action{
		"unknown type":     {Type: 9, Touch: NoPoint, Lift: NoPoint},
		"zero type":        {},
		"NaN y":            {Type: DualPoint, Touch: Point{math.NaN(), 0.2}, Lift: tap},
		"Inf lift":         {Type: DualPoint, Touch: tap, Lift: Point{0.2, math.Inf(1)}},
		"above 1":          {Type: DualPoint, Touch: Point{1.5, 0}, Lift: tap},
		"below 0":          {Type: DualPoint, Touch: tap, Lift: Point{0.5, -0.01}},
		"pixels":           {Type: DualPoint, Touch: Point{5, 5}, Lift: Point{5, 5}},
		"-2":               {Type: PressBack, Touch: Point{-2, -1}, Lift: NoPoint},
		"invalid UTF-8":    {Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "a\xffb"},
		"NaN on non-point": {Type: PressEnter, Touch: Point{math.NaN(), math.NaN()}, Lift: NoPoint},
	}
	for name, a := range bad {
		err := a.Validate()
		if err == nil {
			t.Errorf("%s: %+v accepted", name, a)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", name, err)
		}
	}
}

// A model's output may put a point off the screen: ValidateOutput takes it
// (only non-numbers are refused) and Clamped brings it onto the screen,
// keeping -1 (none).
func TestValidateOutputAndClamped(t *testing.T) {
	off := Action{Type: DualPoint, Touch: Point{1.5, -0.2}, Lift: Point{-1, 0.5}}
	if off.Validate() == nil || off.ValidateOutput() != nil {
		t.Fatalf("Validate %v, ValidateOutput %v", off.Validate(), off.ValidateOutput())
	}
	c := off.Clamped()
	if want := (Action{Type: DualPoint, Touch: Point{1, 0}, Lift: Point{-1, 0.5}}); c != want || c.Validate() != nil {
		t.Errorf("clamped %+v, want %+v", c, want)
	}
	for _, bad := range []Action{
		{Type: DualPoint, Touch: Point{math.NaN(), 0}, Lift: NoPoint},
		{Type: DualPoint, Touch: NoPoint, Lift: Point{0, math.Inf(-1)}},
		{Type: 9, Touch: NoPoint, Lift: NoPoint},
	} {
		if bad.ValidateOutput() == nil {
			t.Errorf("ValidateOutput accepted %+v", bad)
		}
	}
}

// Whatever UnmarshalJSON accepts either validates or is rejected by Validate
// with an error; neither step panics.
func FuzzUnmarshalValidate(f *testing.F) {
	for _, s := range []string{
		`{"action_type": "DUAL_POINT", "touch_point": [0.5, 0.2], "lift_point": [0.5, 0.2], "typed_text": ""}`,
		`{"action_type": 4, "touch_point": "[5, 5]", "lift_point": [5, 5]}`,
		`{"action_type": "TYPE", "typed_text": "hi"}`,
		`{"action_type": "PRESS_BACK", "touch_point": [-1, -1]}`,
		`{"action_type": 9}`, `{}`, `[]`, `{"action_type": "type", "touch_point": "[1e400, 0]"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a Action
		if json.Unmarshal(data, &a) != nil {
			return
		}
		if err := a.Validate(); err == nil {
			if !a.Type.Valid() {
				t.Fatalf("%q: invalid type validated", data)
			}
			if _, err := json.Marshal(a); err != nil {
				t.Fatalf("%q: valid action does not marshal: %v", data, err)
			}
		}
	})
}
