package action

import (
	"math"
	"testing"
)

func TestToPixels(t *testing.T) {
	for _, c := range []struct {
		p          Point
		w, h       int
		wantX, wan int
	}{
		{Point{0.5, 0.5}, 1080, 2400, 540, 1200},
		{Point{0, 0}, 1080, 2400, 0, 0},
		{Point{1, 1}, 1080, 2400, 1079, 2399}, // clamped to the last pixel
		{Point{0.29, 0.29}, 100, 100, 29, 29}, // 0.29*100 = 28.999...: rounding, not flooring
		{Point{0.7262, 0.4187}, 1080, 2400, 452, 1743},
		{Point{0.10025, 0.10025}, 1000, 1000, 100, 100},
		{Point{0.1005, 0.1005}, 1000, 1000, 101, 101}, // halves away from zero
		{Point{-0.2, -1}, 1080, 2400, 0, 0},
		{Point{1.7, 3}, 1080, 2400, 1079, 2399},
		{Point{math.NaN(), math.Inf(1)}, 1080, 2400, 1079, 0},
		{Point{0.5, 0.5}, 0, 0, 0, 0},
	} {
		x, y := ToPixels(c.p, c.w, c.h)
		if x != c.wantX || y != c.wan {
			t.Errorf("ToPixels(%v, %d, %d) = (%d, %d), want (%d, %d)", c.p, c.w, c.h, x, y, c.wantX, c.wan)
		}
	}
}

func TestGesture(t *testing.T) {
	const w, h = 1080, 2400
	for _, c := range []struct {
		a    Action
		want Gesture
	}{
		{tap(0.5, 0.25), Gesture{Kind: GestureTap, X1: 270, Y1: 1200, X2: 270, Y2: 1200}},
		{swipe(0.5, 0.25, 0.52, 0.26), Gesture{Kind: GestureTap, X1: 270, Y1: 1200, X2: 270, Y2: 1200}},
		{swipe(0.8, 0.5, 0.2, 0.5), Gesture{Kind: GestureSwipe, X1: 540, Y1: 1920, X2: 540, Y2: 480}},
		{Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: "hello world"}, Gesture{Kind: GestureText, Text: "hello world"}},
		{Action{Type: PressBack}, Gesture{Kind: GestureKey, KeyCode: 4}},
		{Action{Type: PressHome}, Gesture{Kind: GestureKey, KeyCode: 3}},
		{Action{Type: PressEnter}, Gesture{Kind: GestureKey, KeyCode: 66}},
		{Action{Type: StatusTaskComplete}, Gesture{Kind: GestureStop}},
		{Action{Type: StatusTaskImpossible}, Gesture{Kind: GestureStop}},
		{Action{Type: 9}, Gesture{Kind: GestureNone}},
	} {
		if got := c.a.Gesture(w, h); got != c.want {
			t.Errorf("Gesture(%v) = %+v, want %+v", c.a, got, c.want)
		}
	}
	if GestureSwipe.String() != "swipe" || GestureKind(42).String() != "GestureKind(42)" {
		t.Error("GestureKind.String")
	}
}
