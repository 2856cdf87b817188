package device

import (
	"context"
	"time"

	"github.com/autoui/autoui/screendiff"
)

// settleResult is the screen after an action once it stopped changing (or
// the wait gave up).
type settleResult struct {
	shot     *Screenshot
	frame    *screendiff.Frame
	settled  bool // stable before the timeout
	captures int
}

// settle waits for the screen to settle after an action: first the minimum
// wait (a tap's response, a page starting to load, can take a few hundred
// ms to show), then captures until StableFrames consecutive ones match the
// first of them within the tolerance, status bar masked (its clock and
// icons change on their own), at most SettleTimeout after the action.
// Comparing with the first of the run rather than the previous capture
// keeps a slow fade from passing as stable. It returns no screen when
// settling is off.
func (a *Agent) settle(ctx context.Context) (settleResult, error) {
	if a.opts.SettleTimeout < 0 {
		return settleResult{settled: true}, nil
	}
	deadline := time.Now().Add(a.opts.SettleTimeout)
	if err := sleepCtx(ctx, a.opts.SettleMin); err != nil {
		return settleResult{}, err
	}
	res, err := a.capture(ctx)
	if err != nil {
		return res, err
	}
	anchor, stable := res.frame, 1
	for stable < a.opts.StableFrames {
		if time.Now().After(deadline) {
			return res, nil
		}
		if err := sleepCtx(ctx, a.opts.SettleInterval); err != nil {
			return res, err
		}
		next, err := a.capture(ctx)
		next.captures += res.captures
		if err != nil {
			return next, err
		}
		res = next
		if screendiff.Compare(anchor, res.frame, a.opts.Diff).Changed {
			anchor, stable = res.frame, 1
		} else {
			stable++
		}
	}
	res.settled = true
	return res, nil
}

// capture takes one screenshot for settling.
func (a *Agent) capture(ctx context.Context) (settleResult, error) {
	s, err := a.dev.Screenshot(ctx)
	if err != nil {
		return settleResult{captures: 1}, err
	}
	return settleResult{shot: s, frame: screendiff.NewFrame(s.Image), captures: 1}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
