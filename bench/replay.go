package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/autoui/autoui/predict"
)

// Replayer has requests decode replayed actions (predict.Request.Replay)
// in place of the model's choices, through real decoder calls, so that a
// random-weight bundle costs what a trained one would: serve --replay and
// eval run --replay (benchmarking only; the answers are not the model's).
type Replayer struct {
	all     [][]int64 // the actions' tokens, taken in turn
	longest []int64
	turn    atomic.Uint64
}

// NewReplayer resolves a --replay value for requests of up to maxNew new
// tokens: "typical" (TypicalAction), "mixed" (MixedActions in turn) or an
// action's text. A replay must fit maxNew with its </s>.
func NewReplayer(tok interface{ EncodeNoEOS(string) ([]int64, error) }, replay string, maxNew int) (*Replayer, error) {
	texts := []string{replay}
	if replay == MixedReplay {
		texts = MixedActions
	}
	r := &Replayer{}
	for _, text := range texts {
		_, ids, err := ReplayTokens(tok, text)
		if err != nil {
			return nil, err
		}
		if len(ids) >= maxNew {
			return nil, fmt.Errorf("%d tokens do not fit the %d-token limit with their </s>", len(ids), maxNew)
		}
		r.all = append(r.all, ids)
	}
	r.longest = slices.MaxFunc(r.all, func(a, b []int64) int { return cmp.Compare(len(a), len(b)) })
	return r, nil
}

// Next is req decoding the next action in turn (as requests reach the
// engine).
func (r *Replayer) Next(req predict.Request) predict.Request {
	return with(req, r.all[(r.turn.Add(1)-1)%uint64(len(r.all))])
}

// Longest is req decoding the longest action, taking no turn: what a check
// of the request (predict.Request's limits) should see.
func (r *Replayer) Longest(req predict.Request) predict.Request { return with(req, r.longest) }

func with(req predict.Request, ids []int64) predict.Request {
	req.Replay = ids
	if req.MaxNewTokens != 0 && req.MaxNewTokens <= len(ids) {
		req.MaxNewTokens = len(ids) + 1 // the replay decides the length
	}
	return req
}

// Wrap is p with every request it is given set by Next; it streams
// (predict.Streamer) when p does.
func (r *Replayer) Wrap(p predict.Predictor) predict.Predictor {
	w := replaying{p, r}
	if st, ok := p.(predict.Streamer); ok {
		return replayingStream{w, st}
	}
	return w
}

type replaying struct {
	predict.Predictor
	r *Replayer
}

func (w replaying) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return w.Predictor.Predict(ctx, w.r.Next(req))
}

func (w replaying) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	out := make([]predict.Request, len(reqs))
	for i, q := range reqs {
		out[i] = w.r.Next(q)
	}
	return w.Predictor.PredictBatch(ctx, out)
}

type replayingStream struct {
	replaying
	st predict.Streamer
}

// Stream is the continuous decode with each job's replay set as it joins.
func (w replayingStream) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	return w.st.Stream(ctx, rows, func(free int, wait bool) ([]predict.Job, bool) {
		jobs, more := next(free, wait)
		for i := range jobs {
			jobs[i].Req = w.r.Next(jobs[i].Req)
		}
		return jobs, more
	})
}
