package api

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/predict"
)

func TestPredictionRoundTrip(t *testing.T) {
	results := []*predict.Result{
		{Action: action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.25, X: 0.5}, Lift: action.Point{Y: 0.25, X: 0.5}},
			Plan: []action.Type{action.DualPoint, action.TypeText}, Raw: "r", TokenIDs: []int64{5, 1}, SourceIDs: []int64{3, 1},
			SourceText: "Goal: x", SourceTokens: 2, Timings: predict.Timings{Total: 1500 * time.Microsecond, DecoderCalls: 2}},
		{Raw: "garbage", ParseErr: errors.New("no action"), TokenIDs: []int64{9}, Action: action.Action{Touch: action.NoPoint, Lift: action.NoPoint}},
		// what an unconstrained model may say: served and taken as said
		{Action: action.Action{Type: action.DualPoint, Touch: action.Point{Y: 1.5, X: 0.5}, Lift: action.Point{Y: 1.5, X: 0.5}}, Raw: "off"},
	}
	for _, in := range results {
		raw, err := json.Marshal(FromResult(in))
		if err != nil {
			t.Fatal(err)
		}
		var p Prediction
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		out, err := p.Result()
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != in.Action || !slices.Equal(out.Plan, in.Plan) || out.Raw != in.Raw || !slices.Equal(out.TokenIDs, in.TokenIDs) ||
			!slices.Equal(out.SourceIDs, in.SourceIDs) || out.Timings != in.Timings || (out.ParseErr == nil) != (in.ParseErr == nil) {
			t.Errorf("%s\n-> %+v\nwant %+v", raw, out, in)
		}
	}
	// An output that did not parse is no tap at the origin (issue 22).
	unparsed := FromResult(&predict.Result{Raw: "{", ParseErr: errors.New("no action")})
	if unparsed.ActionType != "" || unparsed.TouchPoint != [2]float64{-1, -1} || unparsed.LiftPoint != [2]float64{-1, -1} || unparsed.Error == "" {
		t.Errorf("unparsed output: %+v", unparsed)
	}
	bad := Prediction{ActionType: "DUAL_POINT", TouchPoint: [2]float64{math.NaN(), 0}}
	if _, err := bad.Result(); err == nil {
		t.Error("a point that is not a number accepted")
	}
}

func TestRequestJSON(t *testing.T) {
	var r PredictRequest
	body := `{"goal": "open settings", "screen": "iVBORw0K", "history": [{"action_type": "PRESS_BACK"}], "options": {"max_new_tokens": 40, "constrain": true}}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Goal != "open settings" || string(r.Screen[:4]) != "\x89PNG" || len(r.History) != 1 || r.History[0].Type != action.PressBack ||
		r.Options.MaxNewTokens != 40 || !r.Options.Constrain {
		t.Fatalf("%+v", r)
	}
}
