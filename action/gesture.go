package action

import (
	"fmt"
	"math"
)

// Android key codes for the key actions.
const (
	KeyHome  = 3
	KeyBack  = 4
	KeyEnter = 66
)

// GestureKind says what a Gesture does on the device.
type GestureKind int

const (
	// GestureNone is the zero value: an action type with no gesture.
	GestureNone  GestureKind = iota
	GestureTap               // tap at (X1, Y1)
	GestureSwipe             // swipe from (X1, Y1) to (X2, Y2)
	GestureText              // type Text
	GestureKey               // press KeyCode
	GestureStop              // the episode ends (STATUS_TASK_COMPLETE / IMPOSSIBLE)
)

func (k GestureKind) String() string {
	switch k {
	case GestureNone:
		return "none"
	case GestureTap:
		return "tap"
	case GestureSwipe:
		return "swipe"
	case GestureText:
		return "text"
	case GestureKey:
		return "key"
	case GestureStop:
		return "stop"
	}
	return fmt.Sprintf("GestureKind(%d)", int(k))
}

// Gesture is an action in device pixels.
type Gesture struct {
	Kind           GestureKind
	X1, Y1, X2, Y2 int // pixels; for a tap (X2, Y2) = (X1, Y1)
	Text           string
	KeyCode        int
}

// ToPixels maps a normalized point to a pixel on a width x height screen:
// x = round(p.X * width), y = round(p.Y * height) (halves away from zero),
// clamped to [0, width-1] x [0, height-1]. Rounding, not flooring, makes
// pixel/size map back to the same pixel despite float error (0.29*100 is
// 28.999...). NaN maps to 0.
func ToPixels(p Point, width, height int) (x, y int) {
	return toPixel(p.X, width), toPixel(p.Y, height)
}

func toPixel(v float64, size int) int {
	hi := size - 1
	if hi < 0 {
		hi = 0
	}
	f := math.Round(v * float64(size))
	switch {
	case f != f || f <= 0:
		return 0
	case f >= float64(hi):
		return hi
	}
	return int(f)
}

// Gesture turns the action into device pixels: a DUAL_POINT tap (IsTap) taps
// the touch point, any other DUAL_POINT swipes touch -> lift, TYPE types its
// text, BACK/HOME/ENTER press key codes 4/3/66, STATUS_* stop. Unknown types
// give GestureNone.
func (a Action) Gesture(width, height int) Gesture {
	switch a.Type {
	case DualPoint:
		x1, y1 := ToPixels(a.Touch, width, height)
		if IsTap(a) {
			return Gesture{Kind: GestureTap, X1: x1, Y1: y1, X2: x1, Y2: y1}
		}
		x2, y2 := ToPixels(a.Lift, width, height)
		return Gesture{Kind: GestureSwipe, X1: x1, Y1: y1, X2: x2, Y2: y2}
	case TypeText:
		return Gesture{Kind: GestureText, Text: a.Text}
	case PressBack:
		return Gesture{Kind: GestureKey, KeyCode: KeyBack}
	case PressHome:
		return Gesture{Kind: GestureKey, KeyCode: KeyHome}
	case PressEnter:
		return Gesture{Kind: GestureKey, KeyCode: KeyEnter}
	case StatusTaskComplete, StatusTaskImpossible:
		return Gesture{Kind: GestureStop}
	}
	return Gesture{Kind: GestureNone}
}
