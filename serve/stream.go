package serve

import (
	"time"

	"github.com/autoui/autoui/predict"
)

// streamer runs the engine's continuous decode (Config.Continuous) on
// MaxBatch rows: requests join it between two decoder calls and are
// answered as each finishes. A decode that fails has answered its requests
// with the error and is started again; one that fails before it took any
// request (the engine cannot stream) leaves every request answered with
// that error, and a shutdown whose drain ran out of time every request
// left with the cancellation.
func (s *Server) streamer(e predict.Streamer) {
	for {
		taken := false
		var waiting time.Time // when too few to join were first seen waiting
		s.metrics.running.Inc()
		err := e.Stream(s.runCtx, s.cfg.MaxBatch, func(free int, wait bool) ([]predict.Job, bool) {
			jobs, more := s.join(free, wait, &waiting)
			taken = taken || len(jobs) > 0
			return jobs, more
		})
		s.metrics.running.Dec()
		if err == nil {
			return // the queue is closed and everything answered
		}
		if cerr := s.runCtx.Err(); cerr != nil {
			err = cerr
		} else if taken {
			continue
		}
		for j := range s.queue {
			s.took(j).done <- answer{err: err}
		}
		return
	}
}

// join is the stream's source of work: up to free queued jobs. With wait
// (no row busy) it waits for a first job and gathers as a batch does;
// otherwise it takes the waiting jobs, but only when at least JoinMin of
// them (or free, when fewer rows are free) are there, since each join
// stops the decode for its prefill, or when fewer have been seen waiting
// for JoinWait (waiting: since when). It says false once the queue is
// closed and empty. Only the stream takes from the queue, so the non-wait
// path needs no s.gathering.
func (s *Server) join(free int, wait bool, waiting *time.Time) ([]predict.Job, bool) {
	var batch []*job
	if wait {
		var ok bool
		if batch, ok = s.nextBatch(free); !ok {
			return nil, false
		}
	} else {
		switch n := len(s.queue); {
		case n == 0:
			*waiting = time.Time{}
			return nil, true
		case n < min(s.cfg.JoinMin, free):
			if waiting.IsZero() {
				*waiting = time.Now()
			}
			if time.Since(*waiting) < s.cfg.JoinWait {
				return nil, true
			}
		}
		*waiting = time.Time{}
	take:
		for len(batch) < free {
			select {
			case j, ok := <-s.queue:
				if !ok {
					break take // said next time, when no row is busy
				}
				batch = append(batch, s.took(j))
			default:
				break take
			}
		}
	}
	n := len(batch)
	if n == 0 {
		return nil, true
	}
	seq := s.startBatch(n)
	s.metrics.rowsBusy.Add(float64(n))
	joined := time.Now()
	jobs := make([]predict.Job, 0, n)
	for _, j := range batch {
		jobs = append(jobs, predict.Job{Ctx: j.ctx, Req: j.req, Done: func(res *predict.Result, err error) {
			s.metrics.rowsBusy.Dec()
			switch {
			case err != nil && j.ctx.Err() != nil:
				s.drop(j, err)
			case err != nil:
				j.done <- answer{err: err}
			default:
				s.answer(j, res, joined, n, seq)
			}
		}})
	}
	return jobs, true
}
