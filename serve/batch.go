package serve

import (
	"context"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/predict"
)

// batcher is a goroutine that runs the engine (Config.ConcurrentBatches
// of them): it takes the first waiting job, gathers more (those already
// waiting, then those arriving within BatchWait) up to MaxBatch, and runs
// them in one engine call. One batcher gathers at a time (s.gathering):
// two would take turns at the queue and split its arrivals into two small
// batches. It returns when Shutdown has closed the queue and everything in
// it is answered.
func (s *Server) batcher(e predict.Predictor) {
	if st, ok := e.(predict.Streamer); ok && s.cfg.Continuous {
		s.streamer(st)
		return
	}
	for {
		batch, ok := s.nextBatch(s.cfg.MaxBatch)
		if !ok {
			return
		}
		s.run(e, batch)
	}
}

// nextBatch waits for a first job and gathers more with it, up to limit, under
// s.gathering; false when the queue is closed and empty.
func (s *Server) nextBatch(limit int) ([]*job, bool) {
	s.gathering.Lock()
	defer s.gathering.Unlock()
	first, ok := <-s.queue
	if !ok {
		return nil, false
	}
	return s.gather([]*job{s.took(first)}, limit), true
}

// gather adds waiting and soon-arriving jobs to batch, up to limit.
func (s *Server) gather(batch []*job, limit int) []*job {
	var timeout <-chan time.Time
	if s.cfg.BatchWait > 0 {
		t := time.NewTimer(s.cfg.BatchWait)
		defer t.Stop()
		timeout = t.C
	}
	for len(batch) < limit {
		select { // already waiting
		case j, ok := <-s.queue:
			if !ok {
				return batch
			}
			batch = append(batch, s.took(j))
			continue
		default:
		}
		if timeout == nil {
			return batch
		}
		select {
		case j, ok := <-s.queue:
			if !ok {
				return batch
			}
			batch = append(batch, s.took(j))
		case <-timeout:
			return batch
		}
	}
	return batch
}

// run drops the jobs nobody waits for any more and predicts the rest in one
// engine call. If that call fails for a batch of several, each job is
// retried alone, so a request the engine refuses fails only itself.
func (s *Server) run(e predict.Predictor, batch []*job) {
	live := batch[:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			s.drop(j, err)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	err := s.call(e, live)
	if err == nil {
		return
	}
	if len(live) == 1 || s.runCtx.Err() != nil {
		for _, j := range live {
			j.done <- answer{err: err}
		}
		return
	}
	for _, j := range live {
		if err := j.ctx.Err(); err != nil {
			s.drop(j, err)
			continue
		}
		if err := s.call(e, []*job{j}); err != nil {
			j.done <- answer{err: err}
		}
	}
}

// call runs one engine call and answers its jobs when it succeeds.
func (s *Server) call(e predict.Predictor, jobs []*job) error {
	n := len(jobs)
	seq := s.startBatch(n)
	reqs := make([]predict.Request, n)
	for i, j := range jobs {
		reqs[i] = j.req
	}
	start := time.Now()
	s.metrics.running.Inc()
	res, err := e.PredictBatch(s.runCtx, reqs)
	s.metrics.running.Dec()
	if err != nil {
		return err
	}
	for i, j := range jobs {
		s.answer(j, res[i], start, n, seq)
	}
	return nil
}

// startBatch numbers and counts an engine call (under Continuous, a join)
// of n requests.
func (s *Server) startBatch(n int) uint64 {
	seq := s.batchSeq.Add(1)
	if s.beforeBatch != nil {
		s.beforeBatch(n)
	}
	s.metrics.batches.Inc()
	s.metrics.batchRequests.Observe(float64(n))
	return seq
}

// answer answers j with its result, from an engine call (batch seq, of n
// requests) that started at start.
func (s *Server) answer(j *job, res *predict.Result, start time.Time, n int, seq uint64) {
	s.metrics.observeStages(res.Timings)
	j.done <- answer{res: res, info: api.ServeInfo{
		QueueMS:   float64(start.Sub(j.arrived).Microseconds()) / 1000,
		BatchSize: n, Batch: seq,
	}}
}

func (s *Server) drop(j *job, err error) {
	s.metrics.dropped.Inc()
	if s.onDrop != nil {
		s.onDrop()
	}
	if err == nil {
		err = context.Canceled
	}
	j.done <- answer{err: err}
}
