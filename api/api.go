// Package api is the JSON wire format of a prediction: what `autoui
// predict --json` prints and what `autoui serve` takes and answers on
// POST /v1/predict (docs/serve.md has the OpenAPI description).
package api

import (
	"errors"
	"fmt"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/predict"
)

// PredictRequest is the body of POST /v1/predict. Exactly one of Screen
// and Features is given.
type PredictRequest struct {
	Goal string `json:"goal"`
	// Screen is a PNG or JPEG screenshot (base64 in JSON).
	Screen []byte `json:"screen,omitempty"`
	// Features are precomputed vision features (the bundle's image_dim floats).
	Features []float32 `json:"features,omitempty"`
	// History holds the previous actions, oldest first, as --prev JSON
	// objects ({"action_type": ..., "touch_point": [y, x], ...}).
	History []action.Action `json:"history,omitempty"`
	Options Options         `json:"options"`
}

// Options are a request's own decoding settings.
type Options struct {
	// MaxNewTokens overrides the model's token limit when > 0.
	MaxNewTokens int `json:"max_new_tokens,omitempty"`
	// Constrain decodes under the Auto-UI output grammar (see --constrain).
	Constrain bool `json:"constrain,omitempty"`
}

// Prediction is one predicted action with what produced it.
type Prediction struct {
	ActionType   string          `json:"action_type"`
	TouchPoint   [2]float64      `json:"touch_point"`
	LiftPoint    [2]float64      `json:"lift_point"`
	TypedText    string          `json:"typed_text"`
	Plan         []string        `json:"plan"`
	Raw          string          `json:"raw"`
	Tokens       int             `json:"tokens"`
	Timings      predict.Timings `json:"timings_ms"`
	SourceTokens int             `json:"source_tokens"`
	SourceText   string          `json:"source_text"`
	SourceIDs    []int64         `json:"source_ids"`
	OutputIDs    []int64         `json:"output_ids"`
	// Error says why Raw is not a valid action (then ActionType is empty
	// and both points are [-1, -1]).
	Error string `json:"error,omitempty"`
	// Serve is how the server ran the request (absent from predict --json).
	Serve *ServeInfo `json:"serve,omitempty"`
}

// ServeInfo is how a server ran one request.
type ServeInfo struct {
	// QueueMS is the time from arrival to the start of its batch (under
	// continuous batching: to its joining the running decode).
	QueueMS float64 `json:"queue_ms"`
	// BatchSize is the number of requests in its engine call (under
	// continuous batching: that joined the decode with it).
	BatchSize int `json:"batch_size"`
	// Batch numbers the server's engine calls (joins).
	Batch uint64 `json:"batch"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Kind is a stable word for the error: bad_request, unauthorized,
	// too_large, queue_full, deadline, shutting_down, not_ready, internal.
	Kind string `json:"kind"`
}

// FromResult is the wire form of an engine result.
func FromResult(res *predict.Result) Prediction {
	out := Prediction{
		Raw: res.Raw, Tokens: len(res.TokenIDs), Timings: res.Timings, Plan: []string{},
		SourceTokens: res.SourceTokens, SourceText: res.SourceText,
		SourceIDs: append([]int64{}, res.SourceIDs...), OutputIDs: append([]int64{}, res.TokenIDs...),
	}
	if res.ParseErr != nil {
		// AITW's "no point", never a tap at the origin.
		out.Error = res.ParseErr.Error()
		out.TouchPoint, out.LiftPoint = [2]float64{-1, -1}, [2]float64{-1, -1}
		return out
	}
	a := res.Action
	out.ActionType = a.Type.String()
	out.TouchPoint = [2]float64{a.Touch.Y, a.Touch.X}
	out.LiftPoint = [2]float64{a.Lift.Y, a.Lift.X}
	out.TypedText = a.Text
	for _, t := range res.Plan {
		out.Plan = append(out.Plan, t.String())
	}
	return out
}

// Result is the engine result a prediction describes (without features).
// A prediction whose output did not parse has ParseErr set, as from the
// engine; a malformed action is an error.
func (p Prediction) Result() (*predict.Result, error) {
	res := &predict.Result{
		Raw: p.Raw, TokenIDs: p.OutputIDs, SourceText: p.SourceText, SourceTokens: p.SourceTokens,
		SourceIDs: p.SourceIDs, Timings: p.Timings,
	}
	if p.Error != "" {
		res.ParseErr = errors.New(p.Error)
		res.Action = action.Action{Touch: action.NoPoint, Lift: action.NoPoint}
		return res, nil
	}
	t, err := action.ParseType(p.ActionType)
	if err != nil {
		return nil, fmt.Errorf("prediction: %w", err)
	}
	res.Action = action.Action{Type: t, Touch: action.Point{Y: p.TouchPoint[0], X: p.TouchPoint[1]},
		Lift: action.Point{Y: p.LiftPoint[0], X: p.LiftPoint[1]}, Text: p.TypedText}
	if err := res.Action.ValidateOutput(); err != nil {
		return nil, fmt.Errorf("prediction: %w", err)
	}
	for _, name := range p.Plan {
		t, err := action.ParseType(name)
		if err != nil {
			return nil, fmt.Errorf("prediction plan: %w", err)
		}
		res.Plan = append(res.Plan, t)
	}
	return res, nil
}
