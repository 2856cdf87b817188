package score

import (
	"math"

	"github.com/autoui/autoui/action"
)

// The real matcher (AITW's action_matching.py, which Auto-GUI's main.py
// calls too) runs in jnp on XLA's CPU backend, which sets the FTZ and DAZ
// flags: every float32 operation reads a subnormal operand as a zero of its
// sign. So a gold tap at y = -1.4e-45 lies in a box whose enlarged top was
// clamped to 0 (-0 >= 0), where a plain float32 comparison says it is
// above it. The coordinates and boxes are flushed where they enter jnp:
// after the autoui protocol's Python-side rendering of the gold (float64,
// no flushing), and for float64 annotation arrays before their numpy
// enlargement, which differs from flushing after it only for a box
// dimension in [4.9e-39, 1.2e-38) that 2.4x makes normal. With the inputs
// flushed, an intermediate result can be subnormal only for coordinates
// below about 2.4e-38 (screen positions no data holds); those are not
// modelled.

// minNormal32 is the smallest normal float32.
const minNormal32 = 0x1p-126

// ftz32 is v read as float32 the way XLA reads it: a subnormal becomes a
// zero of its sign. Values that are not float32 subnormals are unchanged.
func ftz32(v float64) float64 {
	if f := float32(v); f != 0 && math.Abs(float64(f)) < minNormal32 {
		return math.Copysign(0, v)
	}
	return v
}

func ftzPoint(p action.Point) action.Point { return action.Point{Y: ftz32(p.Y), X: ftz32(p.X)} }

// ftzAction flushes an action's coordinates.
func ftzAction(a action.Action) action.Action {
	a.Touch, a.Lift = ftzPoint(a.Touch), ftzPoint(a.Lift)
	return a
}

// ftzBoxes flushes annotation boxes, copying them only when one holds a
// subnormal.
func ftzBoxes(boxes []action.Box) []action.Box {
	var out []action.Box
	for i, b := range boxes {
		f := action.Box{Y: ftzBox(b.Y), X: ftzBox(b.X), H: ftzBox(b.H), W: ftzBox(b.W)}
		if f == b && out == nil {
			continue
		}
		if out == nil {
			out = append(make([]action.Box, 0, len(boxes)), boxes[:i]...)
		}
		out = append(out, f)
	}
	if out == nil {
		return boxes
	}
	return out
}

func ftzBox(v float32) float32 { return float32(ftz32(float64(v))) }

// xlaMatch is a matcher given its inputs as XLA reads them.
func xlaMatch(match func(pred, gold action.Action, boxes []action.Box) bool) func(pred, gold action.Action, boxes []action.Box) bool {
	return func(pred, gold action.Action, boxes []action.Box) bool {
		return match(ftzAction(pred), ftzAction(gold), ftzBoxes(boxes))
	}
}
