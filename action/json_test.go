package action

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestMarshalJSON(t *testing.T) {
	for _, c := range []struct {
		a    Action
		want string
	}{
		{Action{Type: DualPoint, Touch: Point{0.7262, 0.4187}, Lift: Point{0.7262, 0.4187}},
			`{"action_type": "DUAL_POINT", "touch_point": [0.7262, 0.4187], "lift_point": [0.7262, 0.4187], "typed_text": ""}`},
		{Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: `say "hi" <b> & café`},
			`{"action_type": "TYPE", "touch_point": [-1.0, -1.0], "lift_point": [-1.0, -1.0], "typed_text": "say \"hi\" <b> & café"}`},
		{Action{Type: DualPoint, Touch: Point{1e-05, 0}, Lift: Point{1e16, -0.0}},
			`{"action_type": "DUAL_POINT", "touch_point": [1e-05, 0.0], "lift_point": [1e+16, 0.0], "typed_text": ""}`},
	} {
		got, err := c.a.MarshalJSON()
		if err != nil || string(got) != c.want {
			t.Errorf("MarshalJSON(%v) = %s, %v\nwant %s", c.a, got, err, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("MarshalJSON(%v) is not valid JSON: %s", c.a, got)
		}
		var back Action
		if err := json.Unmarshal(got, &back); err != nil || back != c.a {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", got, back, err, c.a)
		}
	}
	if _, err := json.Marshal(Action{Type: DualPoint, Touch: Point{math.NaN(), 0}}); err == nil {
		t.Error("marshalled a NaN coordinate")
	}
	// Nested (encoding/json compacts the spaces), by value and by pointer.
	a := Action{Type: PressBack, Touch: NoPoint, Lift: NoPoint}
	for _, v := range []any{struct{ A Action }{a}, struct{ A *Action }{&a}} {
		got, err := json.Marshal(v)
		want := `{"A":{"action_type":"PRESS_BACK","touch_point":[-1.0,-1.0],"lift_point":[-1.0,-1.0],"typed_text":""}}`
		if err != nil || string(got) != want {
			t.Errorf("json.Marshal(%T) = %s, %v", v, got, err)
		}
	}
}

func TestUnmarshalJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Action
	}{
		{`{"action_type": 4, "touch_point": [0.5, 0.2], "lift_point": [0.5, 0.2], "typed_text": ""}`,
			Action{Type: DualPoint, Touch: Point{0.5, 0.2}, Lift: Point{0.5, 0.2}}},
		{`{"action_type": "press_back"}`, Action{Type: PressBack, Touch: NoPoint, Lift: NoPoint}},
		{`{"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": null, "typed_text": "hi", "extra": 1}`,
			Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "hi"}},
		{`{"typed_text": "", "lift_point": [0.2, 0.5], "touch_point": [0.8, 0.5], "action_type": "DUAL_POINT"}`,
			Action{Type: DualPoint, Touch: Point{0.8, 0.5}, Lift: Point{0.2, 0.5}}},
		// A tap given without its lift point is that tap (AITW's touch = lift),
		// not a swipe to [-1, -1] (issue 22).
		{`{"action_type": 4, "touch_point": [0.1, 0.2]}`, Action{Type: DualPoint, Touch: Point{0.1, 0.2}, Lift: Point{0.1, 0.2}}},
		{`{"action_type": "DUAL_POINT", "touch_point": "[0.3, 0.4]", "lift_point": null}`, Action{Type: DualPoint, Touch: Point{0.3, 0.4}, Lift: Point{0.3, 0.4}}},
	} {
		var got Action
		if err := json.Unmarshal([]byte(c.in), &got); err != nil || got != c.want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		`{}`, `{"action_type": null}`, `{"action_type": 2}`, `{"action_type": 4.5}`, `{"action_type": "SCROLL"}`,
		`{"action_type": true}`, `{"action_type": 4, "touch_point": [0.5]}`, `{"action_type": 4, "touch_point": "0.5"}`,
		`{"action_type": 4, "lift_point": {"y": 1}}`, `[]`, `{"action_type": 4, "typed_text": 3}`,
		`{"action_type": 4}`, `{"action_type": 4, "lift_point": [0.1, 0.2]}`,
	} {
		var got Action
		err := json.Unmarshal([]byte(in), &got)
		if err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", in, got)
		} else if !strings.Contains(err.Error(), "action") {
			t.Errorf("Unmarshal(%s) error %q lacks context", in, err)
		}
	}
}

// Strict refuses a field an action does not have (a misspelt key), and
// reads the rest as Action does.
func TestUnmarshalStrict(t *testing.T) {
	var a Strict
	if err := json.Unmarshal([]byte(`{"action_type": 4, "touch_point": [0.1, 0.2], "lift_pont": [0.3, 0.4]}`), &a); err == nil || !strings.Contains(err.Error(), `unknown field "lift_pont"`) {
		t.Errorf("misspelt key: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"action_type": "TYPE", "typed_text": "hi"}`), &a); err != nil || a.Type != TypeText || a.Text != "hi" {
		t.Errorf("good action: %+v, %v", a, err)
	}
	if err := json.Unmarshal([]byte(`[1]`), &a); err == nil {
		t.Error("an array read as an action")
	}
}
