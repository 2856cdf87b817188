package action

import (
	"fmt"
	"math"
	"strings"
)

// ScrollMap selects how Normalize turns a swipe into one of the fixed vectors.
type ScrollMap int

const (
	// ScrollFixed maps each direction to its own vector:
	// up [0.8, 0.5]->[0.2, 0.5], down [0.2, 0.5]->[0.8, 0.5],
	// left [0.5, 0.8]->[0.5, 0.2], right [0.5, 0.2]->[0.5, 0.8].
	ScrollFixed ScrollMap = iota
	// ScrollLegacy is the map of Auto-UI's first public code, which the released
	// checkpoints were trained with: left is written as the up vector
	// [0.8, 0.5]->[0.2, 0.5] and right as the down vector [0.2, 0.5]->[0.8, 0.5]
	// (cooelf/Auto-GUI utils_data.py load_data, commit 0b37ebad; fixed in 26ea0f2e).
	// Those models therefore never emit horizontal swipes.
	ScrollLegacy
)

// String gives the manifest spelling: "fixed" or "legacy".
func (m ScrollMap) String() string {
	switch m {
	case ScrollFixed:
		return "fixed"
	case ScrollLegacy:
		return "legacy"
	}
	return fmt.Sprintf("ScrollMap(%d)", int(m))
}

// ParseScrollMap reads the manifest spelling ("fixed", "legacy"; "" is fixed).
func ParseScrollMap(s string) (ScrollMap, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "fixed":
		return ScrollFixed, nil
	case "legacy":
		return ScrollLegacy, nil
	}
	return 0, fmt.Errorf("unknown scroll map %q (want fixed or legacy)", s)
}

// Direction is the direction of a swipe: where the finger moves.
type Direction int

// Swipe directions. The zero value is Up, as Auto-UI's code has no "none".
const (
	Up Direction = iota
	Down
	Left
	Right
)

func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Left:
		return "left"
	case Right:
		return "right"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// SwipeDirection is the direction of the touch->lift movement, decided in
// float32 like Auto-UI: main axis = argmax |delta| (ties -> y), then the sign
// (negative y delta = up, negative x delta = left; zero counts as positive).
func SwipeDirection(touch, lift Point) Direction {
	dy := float32(lift.Y) - float32(touch.Y)
	dx := float32(lift.X) - float32(touch.X)
	if mainAxisY(dy, dx) {
		if dy < 0 {
			return Up
		}
		return Down
	}
	if dx < 0 {
		return Left
	}
	return Right
}

// mainAxisY is numpy's argmax over [|dy|, |dx|] == 0: the first maximum wins,
// and a NaN counts as the maximum (numpy returns the first NaN's index).
func mainAxisY(dy, dx float32) bool {
	ay, ax := float32(math.Abs(float64(dy))), float32(math.Abs(float64(dx)))
	if ay != ay { // NaN
		return true
	}
	if ax != ax {
		return false
	}
	return ay >= ax
}

// SwipeVector is the fixed (touch, lift) pair a swipe in direction d is
// written as under map m.
func SwipeVector(d Direction, m ScrollMap) (touch, lift Point) {
	if m == ScrollLegacy {
		switch d {
		case Left:
			d = Up
		case Right:
			d = Down
		}
	}
	switch d {
	case Down:
		return Point{0.2, 0.5}, Point{0.8, 0.5}
	case Left:
		return Point{0.5, 0.8}, Point{0.5, 0.2}
	case Right:
		return Point{0.5, 0.2}, Point{0.5, 0.8}
	}
	return Point{0.8, 0.5}, Point{0.2, 0.5}
}

// Normalize puts an action in the form Auto-UI trains on (and so the form its
// models emit):
//   - DUAL_POINT tap (IsTap): touch rounded to 4 decimals like Python's
//     round(v, 4), lift = touch;
//   - DUAL_POINT swipe: the fixed vector of its direction under m;
//   - every other type: [-1.0, -1.0] for both points;
//   - TYPE keeps its text with \ " ' removed and whitespace runs collapsed to
//     one space (what the target text holds after Auto-UI's cleaning and
//     " ".join(split())); other types carry no text.
func Normalize(a Action, m ScrollMap) Action {
	switch a.Type {
	case DualPoint:
		if tapPoints(a.Touch, a.Lift) {
			t := Point{Y: PyRound4(a.Touch.Y), X: PyRound4(a.Touch.X)}
			return Action{Type: DualPoint, Touch: t, Lift: t}
		}
		touch, lift := SwipeVector(SwipeDirection(a.Touch, a.Lift), m)
		return Action{Type: DualPoint, Touch: touch, Lift: lift}
	case TypeText:
		return Action{Type: TypeText, Touch: NoPoint, Lift: NoPoint, Text: collapseSpace(stripQuotes(a.Text))}
	}
	return Action{Type: a.Type, Touch: NoPoint, Lift: NoPoint}
}

// PlanTypes is the plan Auto-UI trains step i of an episode with: the types of
// steps i, i+1, ... up to 4 in all. Out-of-range i gives nil.
func PlanTypes(steps []Action, i int) []Type {
	if i < 0 || i >= len(steps) {
		return nil
	}
	end := min(i+4, len(steps))
	plan := make([]Type, 0, end-i)
	for _, s := range steps[i:end] {
		plan = append(plan, s.Type)
	}
	return plan
}
