package action

import (
	"math"
	"strings"
)

// AITW matching constants. AITW's JAX code compares float32 arrays against
// Python scalars, which JAX rounds to float32 first.
var (
	tapThreshold   = float32(0.04) // |lift - touch| <= this: a tap
	matchThreshold = float32(0.14) // two taps this close match
	boxAugment     = float32(1.4)  // annotation boxes grow by 1.4x height/width
)

// dist32 is jnp.linalg.norm(jnp.array(a) - jnp.array(b)) in float32: each
// coordinate rounded to float32, then difference, squares, sum and square root
// each rounded to float32. The explicit conversions stop Go from fusing the
// multiply-add (which would round once instead of twice).
func dist32(a, b Point) float32 {
	dy := float32(a.Y) - float32(b.Y)
	dx := float32(a.X) - float32(b.X)
	sum := float32(dy*dy) + float32(dx*dx)
	// sqrt of a float32 computed in float64 and rounded once is correctly
	// rounded float32 sqrt (53 >= 2*24+2).
	return float32(math.Sqrt(float64(sum)))
}

func tapPoints(touch, lift Point) bool { return dist32(touch, lift) <= tapThreshold }

// IsTap reports whether a is a DUAL_POINT tap: |lift - touch| <= 0.04
// (Euclidean, float32), AITW's and Auto-UI's rule. Other types are not taps.
func IsTap(a Action) bool { return a.Type == DualPoint && tapPoints(a.Touch, a.Lift) }

// Match is AITW's screen-wise action match (check_actions_match), in float32:
//   - if either action is not DUAL_POINT, the types must be equal;
//   - a tap never matches a swipe;
//   - two taps match if their touch points are within 0.14, or both lie in
//     the same annotation box after enlargement (see Enlarge; edges inclusive);
//   - two swipes match if their main axes (argmax |delta|, ties -> y) agree;
//     the direction's sign is ignored.
//
// Empty boxes: AITW's code reduces over the boxes with jnp.max, which fails on
// an empty list (Auto-UI then scores the step as a miss, whatever the types).
// Here an empty list simply means no box can match: taps are judged by the
// distance rule alone, and non-tap rules are unaffected.
func Match(pred, gold Action, boxes []Box) bool {
	return MatchBoxes(pred, gold, boxes, BoxesFloat32)
}

// BoxPrecision is the dtype of the annotation array the matcher is given,
// which decides where the box enlargement rounds.
type BoxPrecision int

const (
	// BoxesFloat32: float32 arrays, as AITW's own pipeline passes them; the
	// enlargement runs in float32 (see Enlarge).
	BoxesFloat32 BoxPrecision = iota
	// BoxesFloat64: float64 numpy arrays, as Auto-UI's main.py passes the
	// positions its fetch_features.py kept (see Enlarge64).
	BoxesFloat64
)

// MatchBoxes is Match with the annotation boxes enlarged in the given
// precision.
func MatchBoxes(pred, gold Action, boxes []Box, prec BoxPrecision) bool {
	if pred.Type != DualPoint || gold.Type != DualPoint {
		return pred.Type == gold.Type
	}
	pt, gt := IsTap(pred), IsTap(gold)
	if pt != gt {
		return false
	}
	if pt {
		if dist32(pred.Touch, gold.Touch) <= matchThreshold {
			return true
		}
		for _, b := range boxes {
			e := b.Enlarge()
			if prec == BoxesFloat64 {
				e = b.Enlarge64()
			}
			if e.Contains(pred.Touch) && e.Contains(gold.Touch) {
				return true
			}
		}
		return false
	}
	return swipeAxisY(pred) == swipeAxisY(gold)
}

func swipeAxisY(a Action) bool {
	return mainAxisY(float32(a.Lift.Y)-float32(a.Touch.Y), float32(a.Lift.X)-float32(a.Touch.X))
}

// MatchTypeOnly is the action-type accuracy test: the types are equal (a tap
// and a swipe are both DUAL_POINT), as Auto-UI counts type_correct.
func MatchTypeOnly(pred, gold Action) bool { return pred.Type == gold.Type }

// TextMatch is Auto-UI's typed-text test: the texts, lowercased as Python's
// str.lower does (PyLower) and the prediction stripped of surrounding
// whitespace, contain one another.
// An empty text is contained in everything. Auto-UI counts text_correct only
// for steps that also Match.
func TextMatch(pred, gold string) bool {
	p := strings.TrimFunc(PyLower(pred), IsPySpace)
	g := PyLower(gold)
	return strings.Contains(g, p) || strings.Contains(p, g)
}

// Enlarge is AITW's annotation box resize, in float32: the top-left corner
// moves up/left by 0.7x the height/width (clamped at 0) and the height/width
// grow by 1.4x (capped at 1). The cap does not undo the shift, so the box
// reaches 1.7x below/right of its original top-left corner, and clamping the
// corner at 0 does not shrink the size.
func (b Box) Enlarge() Box {
	// The conversions round each product to float32 (no fused multiply-add).
	hc := float32(boxAugment * b.H)
	wc := float32(boxAugment * b.W)
	// Go's min/max, like jnp.minimum/maximum, give NaN for a NaN operand.
	return Box{
		Y: max(0, b.Y-hc/2),
		X: max(0, b.X-wc/2),
		H: min(1, b.H+hc),
		W: min(1, b.W+wc),
	}
}

// Enlarge64 is the enlargement when the boxes reach the matcher as float64
// numpy arrays (Auto-UI's main.py): 1.4*h, the halving, the subtraction and
// the sum run in numpy float64, and each result is rounded to float32 once,
// where jnp.maximum/jnp.minimum convert it (JAX without x64); the clamps then
// run in float32. The box's own values are float32 widened exactly, as
// fetch_features.py reads them from the record's float list.
func (b Box) Enlarge64() Box {
	y, x, h, w := float64(b.Y), float64(b.X), float64(b.H), float64(b.W)
	// The conversions keep each product rounded on its own (no fused
	// multiply-add), as numpy computes it.
	hc := float64(1.4 * h)
	wc := float64(1.4 * w)
	return Box{
		Y: max(0, float32(y-hc/2)),
		X: max(0, float32(x-wc/2)),
		H: min(1, float32(h+hc)),
		W: min(1, float32(w+wc)),
	}
}

// Contains reports whether p (rounded to float32) lies in b, edges included.
func (b Box) Contains(p Point) bool {
	y, x := float32(p.Y), float32(p.X)
	bottom, right := b.Y+b.H, b.X+b.W
	return y >= b.Y && y <= bottom && x >= b.X && x <= right
}
