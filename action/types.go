// Package action holds the Auto-UI action vocabulary: AITW action types, the
// target text format the model emits (render and parse), coordinate
// normalization, the AITW action-matching rules and pixel gestures.
//
// It imports nothing else from this module, so every other package can use it.
package action

import (
	"fmt"
	"strconv"
	"strings"
)

// Type is an AITW action type, numbered as in the AITW records.
type Type int

// AITW action types. 0, 1, 2, 8 and 9 are unused by AITW.
const (
	TypeText             Type = 3  // TYPE: type a string
	DualPoint            Type = 4  // DUAL_POINT: tap or swipe
	PressBack            Type = 5  // PRESS_BACK
	PressHome            Type = 6  // PRESS_HOME
	PressEnter           Type = 7  // PRESS_ENTER
	StatusTaskComplete   Type = 10 // STATUS_TASK_COMPLETE
	StatusTaskImpossible Type = 11 // STATUS_TASK_IMPOSSIBLE
)

var typeNames = map[Type]string{
	TypeText:             "TYPE",
	DualPoint:            "DUAL_POINT",
	PressBack:            "PRESS_BACK",
	PressHome:            "PRESS_HOME",
	PressEnter:           "PRESS_ENTER",
	StatusTaskComplete:   "STATUS_TASK_COMPLETE",
	StatusTaskImpossible: "STATUS_TASK_IMPOSSIBLE",
}

// Types lists the valid action types in numeric order.
var Types = []Type{TypeText, DualPoint, PressBack, PressHome, PressEnter, StatusTaskComplete, StatusTaskImpossible}

// Valid reports whether t is one of the AITW action types.
func (t Type) Valid() bool { _, ok := typeNames[t]; return ok }

// String returns the AITW name (e.g. "DUAL_POINT"), or "Type(N)" for unknown numbers.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType accepts an AITW name ("DUAL_POINT", case-insensitive) or number ("4").
func ParseType(s string) (Type, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if t := Type(n); t.Valid() {
			return t, nil
		}
		return 0, fmt.Errorf("unknown action type number %d", n)
	}
	for t, name := range typeNames {
		if strings.EqualFold(name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown action type %q", s)
}

// Point is a normalized screen position, [y, x] in [0, 1], origin top-left,
// in the order AITW and Auto-UI write it.
type Point struct{ Y, X float64 }

// NoPoint is the [-1.0, -1.0] that non-gesture actions carry.
var NoPoint = Point{-1, -1}

// Action is one step: its type, the touch and lift points (DUAL_POINT) and the
// typed text (TYPE). Its String method renders Auto-UI's action text.
type Action struct {
	Type  Type
	Touch Point
	Lift  Point
	Text  string
}

// Box is a UI annotation box, normalized (y, x, height, width) as in AITW's
// image/ui_annotations_positions. float32, as AITW's matching runs in float32.
type Box struct{ Y, X, H, W float32 }
