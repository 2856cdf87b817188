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

// Streamer is a Predictor that batches continuously: requests join a
// running decode between two of its calls and leave it as each finishes, so
// its rows stay busy however the requests arrive (*engine.Predictor with
// its static decoder).
type Streamer interface {
	// Stream decodes on rows rows until next says no more work will come
	// and every request taken is answered, or ctx ends (then the requests
	// decoding are answered with its error). Between two calls it asks
	// next for work with the number of free rows; wait says no row is
	// busy (next may block until work comes). next returns at most free
	// jobs, and false once nothing more will come.
	Stream(ctx context.Context, rows int, next func(free int, wait bool) ([]Job, bool)) error
}

// Job is a request of a Stream and where its answer goes.
type Job struct {
	// Ctx is the request's own: when it ends, the request leaves the
	// decode with its error.
	Ctx context.Context
	Req Request
	// Done gets the result or the error, once, from the decoding
	// goroutine: it must not block.
	Done func(*Result, error)
}
