package score

import (
	"fmt"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// predictionOf is the line eval run writes for a model output: the parsed
// action, or type 0 at [-1, -1] with the parse error.
func predictionOf(raw string) aitw.Prediction {
	p := aitw.Prediction{EpisodeID: "e", Raw: raw}
	out, err := action.ParseOutput(raw)
	if err != nil {
		p.Action = action.Action{Touch: action.NoPoint, Lift: action.NoPoint}
		p.ParseError = err.Error()
		return p
	}
	p.Action = out.Action
	return p
}

func decision(typ, touch, lift string) string {
	return fmt.Sprintf(`Action Plan: [%s] ; Action Decision: "action_type": "%s", "touch_point": "%s", "lift_point": "%s", "typed_text": ""`, typ, typ, touch, lift)
}

// main.py eval()s the points: an output whose point does not hold two
// numbers still has its type counted, and the jnp matcher decides the match
// (`y, x = yx` raises on a touch of another length; a one-number lift
// broadcasts). The aitw protocol keeps the strict parse: such output is
// unparsed, type wrong.
func TestMainPyMalformedPoints(t *testing.T) {
	for _, c := range []struct {
		name                   string
		gold                   action.Action
		raw                    string
		autouiType, autouiHit  bool
		aitwType, aitwHitMatch bool
	}{
		{"one-number touch, gold tap", tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.876]", "[0.876]"), true, false, false, false},
		{"three-number touch, gold tap", tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.5, 0.5, 0.1]", "[0.5, 0.5]"), true, false, false, false},
		{"empty touch, gold swipe", swipeOf(0.8, 0.5, 0.2, 0.5), decision("DUAL_POINT", "[]", "[0.2, 0.5]"), true, false, false, false},
		// The matcher raises for every type: a right BACK is still a miss.
		{"BACK with a malformed touch", back, decision("PRESS_BACK", "[-1.0]", "[-1.0, -1.0]"), true, false, false, false},
		{"wrong type, malformed touch", back, decision("DUAL_POINT", "[0.5]", "[0.5]"), false, false, false, false},
		// lift [0.5] broadcasts to [0.5, 0.5]: a tap at the gold.
		{"one-number lift broadcasts", tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.5, 0.5]", "[0.5]"), true, true, false, false},
		// [0.2, 0.5] -> [0.8, 0.8] runs down the y axis, as the gold does.
		{"one-number lift makes a swipe", swipeOf(0.2, 0.5, 0.8, 0.5), decision("DUAL_POINT", "[0.2, 0.5]", "0.8"), true, true, false, false},
		{"three-number lift does not broadcast", tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.5, 0.5]", "[0.5, 0.5, 0.5]"), true, false, false, false},
		// Output main.py cannot eval either stays unparsed (autoui does not
		// score it with the previous step's action, as main.py does).
		{"cut output", tapAt(0.5, 0.5), `Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.5`, false, false, false, false},
		{"well-formed", tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.5, 0.5]", "[0.5, 0.5]"), true, true, true, true},
	} {
		ep := aitw.Episode{ID: "e", Subset: "general", Steps: []aitw.Step{{EpisodeID: "e", Action: c.gold, Boxes: farBox}}}
		preds := map[aitw.StepKey]aitw.Prediction{{EpisodeID: "e"}: predictionOf(c.raw)}
		_, res := Score([]aitw.Episode{ep}, preds, Options{Protocol: AutoUI})
		if r := res[0]; r.TypeMatch != c.autouiType || r.Match != c.autouiHit || r.TextMatch && !r.Match {
			t.Errorf("%s: autoui type %v match %v text %v, want type %v match %v", c.name, r.TypeMatch, r.Match, r.TextMatch, c.autouiType, c.autouiHit)
		}
		_, res = Score([]aitw.Episode{ep}, preds, Options{})
		if r := res[0]; r.TypeMatch != c.aitwType || r.Match != c.aitwHitMatch {
			t.Errorf("%s: aitw type %v match %v, want %v %v", c.name, r.TypeMatch, r.Match, c.aitwType, c.aitwHitMatch)
		}
	}
}

// A set in the shape of issue 25's (an undertrained model: most taps come
// out with one number): type accuracy differs between the protocols by the
// malformed outputs of the gold's type, screen accuracy does not.
func TestMainPyTypeAccuracyOnMalformedSet(t *testing.T) {
	ep := aitw.Episode{ID: "e", Subset: "general"}
	preds := map[aitw.StepKey]aitw.Prediction{}
	for i := 0; i < 24; i++ {
		gold, raw := tapAt(0.5, 0.5), decision("DUAL_POINT", "[0.5, 0.5]", "[0.5, 0.5]")
		switch {
		case i < 12: // malformed touch: type right under autoui only
			raw = decision("DUAL_POINT", "[0.876]", "[0.876]")
		case i < 16: // malformed and the wrong type
			gold, raw = back, decision("DUAL_POINT", "[0.1, 0.2, 0.3]", "[0.5, 0.5]")
		case i < 20: // cut output: unparsed in both
			raw = raw[:len(raw)-30]
		}
		ep.Steps = append(ep.Steps, aitw.Step{EpisodeID: "e", StepID: i, Action: gold, Boxes: farBox})
		p := predictionOf(raw)
		p.StepID = i
		preds[aitw.StepKey{EpisodeID: "e", StepID: i}] = p
	}
	type want struct{ screen, typ float64 }
	for proto, w := range map[Protocol]want{AITW: {100 * 4 / 24.0, 100 * 4 / 24.0}, AutoUI: {100 * 4 / 24.0, 100 * 16 / 24.0}} {
		rep, _ := Score([]aitw.Episode{ep}, preds, Options{Protocol: proto})
		if got := rep.Overall; *got.ScreenAccuracy != w.screen || *got.ActionTypeAccuracy != w.typ {
			t.Errorf("%s: screen %.2f type %.2f, want %.2f %.2f", proto, *got.ScreenAccuracy, *got.ActionTypeAccuracy, w.screen, w.typ)
		}
	}
}
