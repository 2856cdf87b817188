// Package predict holds what a caller of the model deals in: a Request (a
// screen or its features, the goal, the previous actions), its Result and
// Timings, the request limits, and the Predictor that turns one into the
// other. It is plain Go, with no ONNX Runtime behind it, so that the code
// that only asks for predictions (the HTTP client, the agent, evaluation
// and benchmark drivers, the wire format in api) builds without cgo; the
// engine implements Predictor, and so does serve/client against a server.
package predict

import "context"

// Predictor predicts the next action of a screen. *engine.Predictor
// (in-process) and *client.Client (on an autoui server) are ones; the
// agent, the evaluation runner, the server and the benchmarks drive one.
type Predictor interface {
	// Predict predicts one request.
	Predict(ctx context.Context, req Request) (*Result, error)
	// PredictBatch predicts several requests together; the results are in
	// request order, and a bad request fails the whole batch.
	PredictBatch(ctx context.Context, reqs []Request) ([]*Result, error)
}
