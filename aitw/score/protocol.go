package score

import (
	"fmt"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// Protocol names a set of scoring rules.
type Protocol string

// The scoring protocols.
const (
	// AITW: AITW's matcher (action.Match, all float32, subnormals read as
	// zero as XLA reads them) against the gold record's own values.
	AITW Protocol = "aitw"
	// AutoUI: the number Auto-GUI's main.py prints (the paper's tables). The
	// gold is first rewritten as Auto-UI renders its training targets
	// (action.Normalize: a tap's touch rounded like Python's round(x, 4) with
	// lift = touch, a swipe replaced by its direction's fixed vector, typed
	// text without \ " ' and with whitespace runs collapsed); the boxes are
	// enlarged from float64 arrays (action.BoxesFloat64); a step without
	// annotations is a miss whatever the types (the real matcher raises on
	// an empty list and main.py counts the exception as a miss); text
	// accuracy is counted over all steps; and an output refused only for a
	// point's length is read as main.py reads it (mainPyPred).
	AutoUI Protocol = "autoui"
)

// ParseProtocol reads a --protocol value ("" is aitw).
func ParseProtocol(s string) (Protocol, error) {
	switch Protocol(s) {
	case "", AITW:
		return AITW, nil
	case AutoUI:
		return AutoUI, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want aitw or autoui)", s)
}

// Options select the scoring rules. The zero value is the aitw protocol.
type Options struct {
	Protocol Protocol
	// ScrollMap is how the autoui protocol rewrites gold swipes: ScrollFixed
	// (the current Auto-GUI) or ScrollLegacy (the map the released
	// checkpoints were trained with).
	ScrollMap action.ScrollMap
}

// rules is a protocol's per-step behaviour.
type rules struct {
	protocol Protocol
	gold     func(action.Action) action.Action
	// pred is the action scored for a prediction and whether the matcher
	// can judge it (false: a miss, whatever the types).
	pred        func(aitw.Prediction) (action.Action, bool)
	match       func(pred, gold action.Action, boxes []action.Box) bool
	textOverAll bool // text accuracy over all steps, not only gold TYPE steps
}

func (o Options) rules() rules {
	if o.Protocol != AutoUI {
		return rules{
			protocol: AITW,
			gold:     func(a action.Action) action.Action { return a },
			pred:     func(p aitw.Prediction) (action.Action, bool) { return p.Action, true },
			match:    xlaMatch(action.Match),
		}
	}
	return rules{
		protocol: AutoUI,
		gold:     func(a action.Action) action.Action { return action.Normalize(a, o.ScrollMap) },
		pred:     mainPyPred,
		match: xlaMatch(func(pred, gold action.Action, boxes []action.Box) bool {
			return len(boxes) > 0 && action.MatchBoxes(pred, gold, boxes, action.BoxesFloat64)
		}),
		textOverAll: true,
	}
}

// mainPyPred is the prediction Auto-GUI's main.py scores. It eval()s each
// point, so an output that ParseOutput refuses only because a point does not
// hold two numbers ("[0.876]", three numbers) parses there: its type counts
// for type accuracy. Its match is what the jnp matcher, which computes every
// branch, makes of the points: a touch that is not [y, x] raises at
// `y, x = yx` (main.py counts a miss, whatever the types); a one-number lift
// broadcasts against the touch, as [v, v]; a lift of another length fails
// to broadcast (a miss). Outputs that do not parse even so stay unparsed
// (type 0): main.py would score its previous step's action, which autoui
// does not copy.
func mainPyPred(p aitw.Prediction) (action.Action, bool) {
	if p.ParseError == "" || p.Raw == "" {
		return p.Action, true
	}
	lo, err := action.ParseOutputLoose(p.Raw)
	if err != nil {
		return p.Action, true
	}
	a := lo.Action
	if len(lo.Touch) != 2 {
		return a, false
	}
	switch len(lo.Lift) {
	case 2:
	case 1:
		a.Lift = action.Point{Y: lo.Lift[0], X: lo.Lift[0]}
	default:
		return a, false
	}
	return a, true
}
