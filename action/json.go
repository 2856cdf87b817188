package action

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// MarshalJSON writes the prediction-JSONL shape, keys in this order:
//
//	{"action_type": "DUAL_POINT", "touch_point": [y, x], "lift_point": [y, x], "typed_text": ""}
//
// Numbers use Python's repr, so the bytes equal Python's json.dumps (except
// that non-ASCII text stays UTF-8; encoding/json compacts the spaces away when
// the action is nested). Non-finite coordinates are an error: JSON has no NaN.
func (a Action) MarshalJSON() ([]byte, error) {
	for _, v := range []float64{a.Touch.Y, a.Touch.X, a.Lift.Y, a.Lift.X} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("marshal action %s: non-finite coordinate %v", a.Type, v)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"action_type": `)
	writeJSONString(&b, a.Type.String())
	b.WriteString(`, "touch_point": `)
	b.WriteString(a.Touch.PyList())
	b.WriteString(`, "lift_point": `)
	b.WriteString(a.Lift.PyList())
	b.WriteString(`, "typed_text": `)
	writeJSONString(&b, a.Text)
	b.WriteString("}")
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}

// UnmarshalJSON reads the prediction-JSONL shape. action_type may be a name
// ("DUAL_POINT", any case) or a number (4); a point may be a [y, x] array or
// Auto-UI's string form "[y, x]". Missing points are [-1.0, -1.0]; a missing
// typed_text is "".
func (a *Action) UnmarshalJSON(data []byte) error {
	var raw struct {
		ActionType json.RawMessage `json:"action_type"`
		Touch      json.RawMessage `json:"touch_point"`
		Lift       json.RawMessage `json:"lift_point"`
		Text       *string         `json:"typed_text"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("unmarshal action: %w", err)
	}
	if len(raw.ActionType) == 0 || string(raw.ActionType) == "null" {
		return fmt.Errorf("unmarshal action: missing action_type")
	}
	var t Type
	var name string
	var num json.Number
	switch {
	case json.Unmarshal(raw.ActionType, &name) == nil:
		pt, err := ParseType(name)
		if err != nil {
			return fmt.Errorf("unmarshal action: %w", err)
		}
		t = pt
	case json.Unmarshal(raw.ActionType, &num) == nil:
		pt, err := ParseType(num.String())
		if err != nil {
			return fmt.Errorf("unmarshal action: %w", err)
		}
		t = pt
	default:
		return fmt.Errorf("unmarshal action: action_type %s is neither a name nor a number", compactJSON(raw.ActionType))
	}
	touch, err := unmarshalPoint(raw.Touch)
	if err != nil {
		return fmt.Errorf("unmarshal action touch_point: %w", err)
	}
	lift, err := unmarshalPoint(raw.Lift)
	if err != nil {
		return fmt.Errorf("unmarshal action lift_point: %w", err)
	}
	if t == DualPoint {
		// AITW records a tap as touch = lift: a gesture given only its touch
		// point is that tap, not a swipe from the touch to [-1, -1].
		switch {
		case absentJSON(raw.Touch):
			return fmt.Errorf("unmarshal action: DUAL_POINT needs touch_point")
		case absentJSON(raw.Lift):
			lift = touch
		}
	}
	*a = Action{Type: t, Touch: touch, Lift: lift}
	if raw.Text != nil {
		a.Text = *raw.Text
	}
	return nil
}

// absentJSON reports a field left out or given as null.
func absentJSON(data json.RawMessage) bool { return len(data) == 0 || string(data) == "null" }

func unmarshalPoint(data json.RawMessage) (Point, error) {
	if absentJSON(data) {
		return NoPoint, nil
	}
	var s string
	if json.Unmarshal(data, &s) == nil {
		return parsePoint(s)
	}
	var v []float64
	if err := json.Unmarshal(data, &v); err != nil {
		return Point{}, fmt.Errorf("%s is not a [y, x] array: %w", compactJSON(data), err)
	}
	if len(v) != 2 {
		return Point{}, fmt.Errorf("%s does not hold two numbers", compactJSON(data))
	}
	return Point{Y: v[0], X: v[1]}, nil
}

// compactJSON drops a JSON value's insignificant whitespace, so that quoting
// it keeps an error message on one line.
func compactJSON(data []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return strings.Join(strings.Fields(string(data)), " ")
	}
	return b.String()
}

// Strict is an Action whose JSON may hold only an action's four fields: for
// what a person or a client writes, where a misspelt key must not be
// dropped silently. Action's own reading ignores other fields, which records
// from other tools carry.
type Strict struct{ Action }

// UnmarshalJSON refuses unknown fields, then reads the action as Action does.
func (a *Strict) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("unmarshal action: %w", err)
	}
	for k := range fields {
		switch k {
		case "action_type", "touch_point", "lift_point", "typed_text":
		default:
			return fmt.Errorf("unmarshal action: unknown field %q (want action_type, touch_point, lift_point, typed_text)", k)
		}
	}
	return a.Action.UnmarshalJSON(data)
}
