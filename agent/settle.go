package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/screendiff"
)

// Settle modes (Options.Settle): what must stop changing after an
// action before the next capture.
const (
	// SettlePixels compares screenshots.
	SettlePixels = "pixels"
	// SettleUI compares the UI hierarchy (`uiautomator dump`), as
	// AndroidWorld does: a blinking cursor, a spinner or a video do not
	// hold it up, a page still sliding in or loading does.
	SettleUI = "ui"
)

// SettleModes lists the settle modes.
var SettleModes = []string{SettlePixels, SettleUI}

// ValidateSettle checks a settle mode.
func ValidateSettle(mode string) error {
	if !slices.Contains(SettleModes, mode) {
		return fmt.Errorf("%q: want %s", mode, strings.Join(SettleModes, " or "))
	}
	return nil
}

// The ui mode's defaults are AndroidWorld's (_get_stable_state): 3 checks
// 0.5 s apart, 6 s at most; it needs no minimum wait, as the first check
// is compared with the hierarchy the last step settled on.
const (
	DefaultUISettleTimeout  = 6 * time.Second
	DefaultUISettleInterval = 500 * time.Millisecond
)

// settleResult is the screen after an action once it stopped changing (or
// the wait gave up).
type settleResult struct {
	shot     *device.Screenshot
	frame    *screendiff.Frame
	settled  bool // stable before the timeout
	captures int
	// checks counts the hierarchy reads of the ui mode; ui is the
	// hierarchy it settled on (or last saw).
	checks int
	ui     []device.UIElement
}

// settle waits for the screen to settle after an action: first the minimum
// wait (a tap's response, a page starting to load, can take a few hundred
// ms to show), then captures until StableFrames consecutive ones match the
// first of them within the tolerance, status bar masked (its clock and
// icons change on their own), at most SettleTimeout after the action.
// Comparing with the first of the run rather than the previous capture
// keeps a slow fade from passing as stable. It returns no screen when
// settling is off.
func (a *Agent) settle(ctx context.Context, prior []device.UIElement) (settleResult, error) {
	if a.opts.SettleTimeout < 0 {
		return settleResult{settled: true}, nil
	}
	if a.opts.Settle == SettleUI {
		return a.settleUI(ctx, prior)
	}
	deadline := time.Now().Add(a.opts.SettleTimeout)
	if err := device.Sleep(ctx, a.opts.SettleMin); err != nil {
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
		if err := device.Sleep(ctx, a.opts.SettleInterval); err != nil {
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

// settleUI waits for the UI hierarchy to settle, as AndroidWorld does:
// StableFrames consecutive checks, SettleInterval apart, must equal the
// hierarchy before them, starting from prior (what the last step settled
// on; nil at the first step, where a first read takes its place). Unlike
// AndroidWorld, which counts only its sleeps, SettleTimeout bounds the
// wall time: a dump takes a second or more on some phones. Then one
// screenshot is taken for the model.
func (a *Agent) settleUI(ctx context.Context, prior []device.UIElement) (settleResult, error) {
	deadline := time.Now().Add(a.opts.SettleTimeout)
	var res settleResult
	if err := device.Sleep(ctx, a.opts.SettleMin); err != nil {
		return res, err
	}
	cur, err := a.checkUI(ctx, &res)
	if err != nil {
		return res, err
	}
	if prior == nil {
		prior = cur
		if cur, err = a.checkUI(ctx, &res); err != nil {
			return res, err
		}
	}
	for stable := 0; ; {
		if cur != nil && prior != nil && slices.Equal(prior, cur) {
			if stable++; stable >= a.opts.StableFrames {
				res.settled = true
				break
			}
		} else {
			stable, prior = 0, cur
		}
		if time.Now().Add(a.opts.SettleInterval).After(deadline) {
			break
		}
		if err := device.Sleep(ctx, a.opts.SettleInterval); err != nil {
			return res, err
		}
		if cur, err = a.checkUI(ctx, &res); err != nil {
			return res, err
		}
	}
	res.ui = cur
	shot, err := a.capture(ctx)
	shot.checks, shot.ui, shot.settled = res.checks, res.ui, res.settled
	return shot, err
}

// checkUI reads the hierarchy once; a UI too busy to be dumped reads as
// nil (a change).
func (a *Agent) checkUI(ctx context.Context, res *settleResult) ([]device.UIElement, error) {
	res.checks++
	els, err := a.phone.UIElements(ctx)
	if errors.Is(err, device.ErrUIBusy) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--settle ui: %w", err)
	}
	return els, nil
}

// settleStats are the settle times of the sent actions, in summary.json.
type settleStats struct {
	Mode     string  `json:"mode"`
	Actions  int     `json:"actions"`
	MedianMs float64 `json:"median_ms"`
	P90Ms    float64 `json:"p90_ms"`
	MaxMs    float64 `json:"max_ms"`
}

func newSettleStats(mode string, times []time.Duration) settleStats {
	s := settleStats{Mode: mode, Actions: len(times)}
	if len(times) == 0 {
		return s
	}
	t := slices.Clone(times)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	at := func(q float64) float64 { return ms(t[int(q*float64(len(t)-1)+0.5)]) }
	s.MedianMs, s.P90Ms, s.MaxMs = at(0.5), at(0.9), ms(t[len(t)-1])
	return s
}

// capture takes one screenshot for settling.
func (a *Agent) capture(ctx context.Context) (settleResult, error) {
	s, err := a.phone.Screenshot(ctx)
	if err != nil {
		return settleResult{captures: 1}, err
	}
	return settleResult{shot: s, frame: screendiff.NewFrame(s.Image), captures: 1}, nil
}
