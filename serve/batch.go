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
		s.gathering.Lock()
		first, ok := <-s.queue
		var batch []*job
		if ok {
			batch = s.gather([]*job{s.took(first)}, s.cfg.MaxBatch)
		}
		s.gathering.Unlock()
		if !ok {
			return
		}
		s.run(e, batch)
	}
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
	seq := s.batchSeq.Add(1)
	n := len(jobs)
	if s.beforeBatch != nil {
		s.beforeBatch(n)
	}
	reqs := make([]predict.Request, n)
	for i, j := range jobs {
		reqs[i] = j.req
	}
	s.metrics.batches.Inc()
	s.metrics.batchRequests.Observe(float64(n))
	start := time.Now()
	s.metrics.running.Inc()
	res, err := e.PredictBatch(s.runCtx, reqs)
	s.metrics.running.Dec()
	if err != nil {
		return err
	}
	for i, j := range jobs {
		s.metrics.observeStages(res[i].Timings)
		j.done <- answer{res: res[i], info: api.ServeInfo{
			QueueMS:   float64(start.Sub(j.arrived).Microseconds()) / 1000,
			BatchSize: n, Batch: seq,
		}}
	}
	return nil
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
