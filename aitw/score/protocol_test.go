package score

import (
	"math"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// Conformance of the autoui protocol, built from Auto-GUI's published rules
// (utils_data.py renders the gold as a training target; main.py matches with
// action_matching.check_actions_match on float64 annotation arrays). Each
// case is a one-step episode; want* give the match under each protocol. The
// margins are far above float32 resolution except in the float64-box cases,
// whose expectations were checked once against real JAX 0.4.30.

func tapAt(y, x float32) action.Action {
	p := action.Point{Y: float64(y), X: float64(x)}
	return action.Action{Type: action.DualPoint, Touch: p, Lift: p}
}

func swipeOf(y1, x1, y2, x2 float32) action.Action {
	return action.Action{Type: action.DualPoint,
		Touch: action.Point{Y: float64(y1), X: float64(x1)}, Lift: action.Point{Y: float64(y2), X: float64(x2)}}
}

func typed(text string) action.Action {
	return action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: text}
}

var (
	back    = action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint}
	farBox  = []action.Box{{Y: 0.95, X: 0.95, H: 0.01, W: 0.01}}
	edgeBox = []action.Box{{Y: 0.59419423, X: 0.4, H: 0.18810181, W: 0.2}}
	lowBox  = []action.Box{{Y: 0.10907332, X: 0.4, H: 0.031303853, W: 0.2}}
)

type protoCase struct {
	name                 string
	gold, pred           action.Action
	boxes                []action.Box
	aitw, fixed, legacy  bool // match under aitw, autoui+fixed, autoui+legacy
	textAITW, textAutoUI bool // text match (aitw counts TYPE steps only)
}

var protoCases = []protoCase{
	// round(0.10004, 4) = 0.1: the pred at 0.24003 is 0.13999 from the raw
	// gold (a match) but 0.14003 from the rendered one.
	{name: "rounding moves the gold past 0.14", gold: tapAt(0.10004, 0.5), pred: tapAt(0.24003, 0.5), boxes: farBox,
		aitw: true, textAITW: false},
	// 0.03125 is exactly 1/32: a true tie, which Python rounds to even
	// (0.0312); half-up (0.0313) would put the pred within 0.14.
	{name: "round half to even on an exact tie", gold: tapAt(0.03125, 0.5), pred: tapAt(0.17122, 0.5), boxes: farBox,
		aitw: true},
	// float32(0.12345) is 0.1234500035...: round() sees the widened binary
	// value, so 0.1235 (rounding the decimal "0.12345" to even gives 0.1234,
	// and the pred would be 0.14007 away; from the raw gold it is 0.14002).
	{name: "round the float32 value widened, not its decimal", gold: tapAt(0.12345, 0.5), pred: tapAt(0.26347, 0.5), boxes: farBox,
		fixed: true, legacy: true, textAutoUI: true},
	// A left swipe: the fixed map writes it as [0.5,0.8]->[0.5,0.2] (x axis);
	// the legacy map as the up vector, which a legacy-trained model emits.
	{name: "legacy map: left written as up", gold: swipeOf(0.5, 0.8, 0.5, 0.3), pred: swipeOf(0.8, 0.5, 0.2, 0.5), boxes: farBox,
		legacy: true, textAutoUI: false},
	{name: "fixed map: left stays horizontal", gold: swipeOf(0.5, 0.8, 0.5, 0.3), pred: swipeOf(0.5, 0.8, 0.5, 0.2), boxes: farBox,
		aitw: true, fixed: true, textAutoUI: true},
	// The real matcher raises on an empty annotation list (jnp.max of an
	// empty array), for every action type; main.py counts it as a miss.
	{name: "empty annotations: BACK vs BACK", gold: back, pred: back, boxes: nil, aitw: true},
	{name: "empty annotations: same tap", gold: tapAt(0.5, 0.5), pred: tapAt(0.5, 0.5), boxes: []action.Box{}, aitw: true},
	// The enlarged top is 0.46252295 from float64 positions, 0.46252298 from
	// float32 ones (JAX: the same); the pred lies between.
	{name: "float64 boxes: top edge", gold: tapAt(0.85, 0.5), pred: tapAt(0.46252295, 0.5), boxes: edgeBox,
		fixed: true, legacy: true, textAutoUI: true},
	// The enlarged bottom is 0.16228987 in float64, 0.16228986 in float32.
	{name: "float64 boxes: bottom edge", gold: tapAt(0.09, 0.5), pred: tapAt(0.16228987, 0.5), boxes: lowBox,
		aitw: true, fixed: true, legacy: true, textAutoUI: true},
	// Text: the rendered gold has no \ " ' and collapsed spaces; both sides
	// lower-cased with Python's rules (final sigma).
	{name: "text: quotes removed, final sigma", gold: typed(`Say "Hi"  it's ΣΟΦΟΣ`), pred: typed(" say hi its σοφος "), boxes: farBox,
		aitw: true, fixed: true, legacy: true, textAITW: false, textAutoUI: true},
	{name: "text: containment either way", gold: typed("weather in Paris"), pred: typed("Weather"), boxes: farBox,
		aitw: true, fixed: true, legacy: true, textAITW: true, textAutoUI: true},
	// A wrong type never matches; text accuracy needs the match.
	{name: "wrong type", gold: typed("x"), pred: back, boxes: farBox},
	// XLA reads a subnormal as zero: a tap at y = -1.4e-45 is in a box whose
	// enlarged top is 0 (plain float32: just above it). The pred is 0.3
	// away, so only the box can match. The autoui protocol renders the gold
	// as round(-1.4e-45, 4) = -0.0 first.
	{name: "subnormal gold y on a box's top edge", gold: tapAt(-subnormal, 0.5), pred: tapAt(0.3, 0.5), boxes: topBox,
		aitw: true, fixed: true, legacy: true, textAutoUI: true},
	{name: "subnormal pred y on a box's top edge", gold: tapAt(0.3, 0.5), pred: tapAt(-subnormal, 0.5), boxes: topBox,
		aitw: true, fixed: true, legacy: true, textAutoUI: true},
	// A zero-width box at x = +1.4e-45 is at x = 0 for XLA (from float64
	// arrays too: numpy's x - 0 is rounded to the same float32 subnormal).
	{name: "subnormal box edge", gold: tapAt(0.15, 0), pred: tapAt(0.35, 0), boxes: []action.Box{{Y: 0.2, X: subnormal, H: 0.1, W: 0}},
		aitw: true, fixed: true, legacy: true, textAutoUI: true},
	// Other types and swipes do not read coordinates in a way a subnormal
	// can change.
	{name: "subnormal swipe", gold: swipeOf(0.8, subnormal, 0.2, -subnormal), pred: swipeOf(0.2, 0.5, 0.8, 0.5), boxes: topBox,
		aitw: true, fixed: true, legacy: true, textAutoUI: true},
}

// subnormal is the smallest positive float32, 1.4e-45.
var subnormal = math.Float32frombits(1)

var topBox = []action.Box{{Y: 0, X: 0.4, H: 0.2, W: 0.2}}

func scoreOne(c protoCase, o Options) StepResult {
	ep := aitw.Episode{ID: "e", Subset: "general", Steps: []aitw.Step{{EpisodeID: "e", StepID: 0, Action: c.gold, Boxes: c.boxes}}}
	preds := map[aitw.StepKey]aitw.Prediction{{EpisodeID: "e", StepID: 0}: {EpisodeID: "e", Action: c.pred}}
	_, res := Score([]aitw.Episode{ep}, preds, o)
	return res[0]
}

func TestProtocolConformance(t *testing.T) {
	for _, c := range protoCases {
		// Under aitw the bottom-edge case matches by distance (0.072).
		if got := scoreOne(c, Options{}); got.Match != c.aitw || got.TextMatch != c.textAITW {
			t.Errorf("%s: aitw match %v text %v, want %v %v", c.name, got.Match, got.TextMatch, c.aitw, c.textAITW)
		}
		fixed := scoreOne(c, Options{Protocol: AutoUI, ScrollMap: action.ScrollFixed})
		if fixed.Match != c.fixed || fixed.TextMatch != (c.fixed && c.textAutoUI) {
			t.Errorf("%s: autoui/fixed match %v text %v, want %v %v", c.name, fixed.Match, fixed.TextMatch, c.fixed, c.fixed && c.textAutoUI)
		}
		legacy := scoreOne(c, Options{Protocol: AutoUI, ScrollMap: action.ScrollLegacy})
		if legacy.Match != c.legacy {
			t.Errorf("%s: autoui/legacy match %v, want %v", c.name, legacy.Match, c.legacy)
		}
		// Type accuracy is the plain type test in both protocols, even
		// where the matcher raised.
		if want := c.gold.Type == c.pred.Type; fixed.TypeMatch != want {
			t.Errorf("%s: type match %v, want %v", c.name, fixed.TypeMatch, want)
		}
	}
}

// Text accuracy: aitw divides by the gold TYPE steps, autoui by all steps
// (main.py's text_correct / len(targets)), where a matching non-TYPE step
// counts as right (empty texts contain each other).
func TestTextAccuracyDenominator(t *testing.T) {
	ep := aitw.Episode{ID: "e", Subset: "general", Steps: []aitw.Step{
		{EpisodeID: "e", StepID: 0, Action: typed("hello"), Boxes: farBox},
		{EpisodeID: "e", StepID: 1, Action: back, Boxes: farBox},
		{EpisodeID: "e", StepID: 2, Action: tapAt(0.5, 0.5), Boxes: farBox},
		{EpisodeID: "e", StepID: 3, Action: back, Boxes: farBox},
	}}
	preds := map[aitw.StepKey]aitw.Prediction{
		{EpisodeID: "e", StepID: 0}: {Action: typed("Hello")},
		{EpisodeID: "e", StepID: 1}: {Action: back},
		{EpisodeID: "e", StepID: 2}: {Action: tapAt(0.9, 0.1)},
		// step 3 has no prediction: wrong everywhere
	}
	rep, _ := Score([]aitw.Episode{ep}, preds, Options{})
	if v := rep.Overall.TextAccuracy; v == nil || *v != 100 {
		t.Errorf("aitw text accuracy %v, want 100 (1 of 1 TYPE step)", v)
	}
	rep, _ = Score([]aitw.Episode{ep}, preds, Options{Protocol: AutoUI})
	if v := rep.Overall.TextAccuracy; v == nil || *v != 50 {
		t.Errorf("autoui text accuracy %v, want 50 (2 of 4 steps)", v)
	}
	if rep.Protocol != AutoUI || rep.ScrollMap != "fixed" {
		t.Errorf("report says protocol %q scroll map %q", rep.Protocol, rep.ScrollMap)
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]Protocol{"": AITW, "aitw": AITW, "autoui": AutoUI} {
		if got, err := ParseProtocol(in); err != nil || got != want {
			t.Errorf("ParseProtocol(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseProtocol("paper"); err == nil {
		t.Error("accepted an unknown protocol")
	}
}
