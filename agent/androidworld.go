package agent

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

// awContext carries what the export needs from the step before:
// AndroidWorld's input_text taps its (x, y) to focus the field before
// typing, so it gets the tap performed immediately before (and none
// otherwise: an older tap may point at anything by now); and it presses
// Enter after typing, so an Enter that follows it is already done.
type awContext struct {
	prevTap   *[2]int // the previous performed step, when it was a tap
	prevTyped bool    // the previous performed step typed text
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

// convert turns one performed step into an AndroidWorld line. ok is false
// for a step with no line of its own: an action with no AndroidWorld
// equivalent, or the Enter that AndroidWorld's input_text already pressed.
func (c *awContext) convert(a action.Action, g GestureRecord) ([]byte, bool) {
	prevTap, prevTyped := c.prevTap, c.prevTyped
	c.prevTap, c.prevTyped = nil, false
	out, ok := awAction(a, g, prevTap)
	if !ok || (out.ActionType == "keyboard_enter" && prevTyped) {
		return nil, false
	}
	switch out.ActionType {
	case "click":
		c.prevTap = &[2]int{*out.X, *out.Y}
	case "input_text":
		c.prevTyped = true
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // model text with <>& stays readable
	if err := enc.Encode(out); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

// awAction maps one action; prevTap is the tap performed just before, if
// the step before was one.
func awAction(a action.Action, g GestureRecord, prevTap *[2]int) (AWAction, bool) {
	switch a.Type {
	case action.DualPoint:
		if g.Kind == "tap" {
			x, y := g.X1, g.Y1
			return AWAction{ActionType: "click", X: &x, Y: &y}, true
		}
		return AWAction{ActionType: "scroll", Direction: ScrollDirection(action.SwipeDirection(a.Touch, a.Lift))}, true
	case action.TypeText:
		// the text the device typed (folded to ASCII, say), not the model's
		out := AWAction{ActionType: "input_text", Text: g.Text}
		if prevTap != nil {
			x, y := prevTap[0], prevTap[1]
			out.X, out.Y = &x, &y
		}
		return out, true
	case action.PressBack:
		return AWAction{ActionType: "navigate_back"}, true
	case action.PressHome:
		return AWAction{ActionType: "navigate_home"}, true
	case action.PressEnter:
		return AWAction{ActionType: "keyboard_enter"}, true
	case action.StatusTaskComplete:
		return AWAction{ActionType: "status", GoalStatus: "complete"}, true
	case action.StatusTaskImpossible:
		return AWAction{ActionType: "status", GoalStatus: "infeasible"}, true
	}
	return AWAction{}, false
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
