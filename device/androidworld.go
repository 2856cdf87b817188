package device

import (
	"bytes"
	"encoding/json"

	"github.com/autoui/autoui/action"
)

// AWAction is AndroidWorld's JSONAction (android_world/env/json_action.py)
// in its field order; a line parses (JSONAction(**json.loads(line))) to the
// action AndroidWorld would execute.
type AWAction struct {
	ActionType string `json:"action_type"`
	X          *int   `json:"x,omitempty"`
	Y          *int   `json:"y,omitempty"`
	Text       string `json:"text,omitempty"`
	Direction  string `json:"direction,omitempty"`
	GoalStatus string `json:"goal_status,omitempty"`
}

// awContext carries what the export needs across steps: the last tap, which
// AndroidWorld's input_text wants as the field to focus.
type awContext struct {
	lastTap *[2]int
}

// ScrollDirection is AndroidWorld's scroll direction for a finger swipe:
// the direction the content moves into view, i.e. the opposite of the
// finger (AndroidWorld's "scroll down" drags the finger up).
func ScrollDirection(finger action.Direction) string {
	switch finger {
	case action.Up:
		return "down"
	case action.Down:
		return "up"
	case action.Left:
		return "right"
	case action.Right:
		return "left"
	}
	return ""
}

// convert turns one performed step into an AndroidWorld line. ok is false for actions with
// no AndroidWorld equivalent.
func (c *awContext) convert(a action.Action, g GestureRecord) ([]byte, bool) {
	var out AWAction
	switch a.Type {
	case action.DualPoint:
		if g.Kind == "tap" {
			x, y := g.X1, g.Y1
			out = AWAction{ActionType: "click", X: &x, Y: &y}
			c.lastTap = &[2]int{x, y}
		} else {
			out = AWAction{ActionType: "scroll", Direction: ScrollDirection(action.SwipeDirection(a.Touch, a.Lift))}
		}
	case action.TypeText:
		out = AWAction{ActionType: "input_text", Text: a.Text}
		if c.lastTap != nil {
			// AndroidWorld's input_text taps (x, y) before typing.
			x, y := c.lastTap[0], c.lastTap[1]
			out.X, out.Y = &x, &y
		}
	case action.PressBack:
		out = AWAction{ActionType: "navigate_back"}
	case action.PressHome:
		out = AWAction{ActionType: "navigate_home"}
	case action.PressEnter:
		out = AWAction{ActionType: "keyboard_enter"}
	case action.StatusTaskComplete:
		out = AWAction{ActionType: "status", GoalStatus: "complete"}
	case action.StatusTaskImpossible:
		out = AWAction{ActionType: "status", GoalStatus: "infeasible"}
	default:
		return nil, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // model text with <>& stays readable
	if err := enc.Encode(out); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

func gestureRecord(g action.Gesture) *GestureRecord {
	r := &GestureRecord{Kind: g.Kind.String()}
	switch g.Kind {
	case action.GestureTap:
		r.X1, r.Y1 = g.X1, g.Y1
	case action.GestureSwipe:
		r.X1, r.Y1, r.X2, r.Y2 = g.X1, g.Y1, g.X2, g.Y2
	case action.GestureText:
		r.Text = g.Text
	case action.GestureKey:
		r.KeyCode = g.KeyCode
	}
	return r
}
