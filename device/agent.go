package device

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/annotate"
	"github.com/autoui/autoui/engine"
)

// Predictor is what the agent needs from the engine; *engine.Predictor
// satisfies it, tests use fakes.
type Predictor interface {
	Predict(ctx context.Context, req engine.Request) (*engine.Result, error)
}

// Decision is the answer to a confirmation prompt.
type Decision int

// Decisions.
const (
	Proceed Decision = iota // dispatch the action
	Skip                    // do not dispatch it; capture and predict again
	Quit                    // end the episode
)

// AgentOptions configure an episode.
type AgentOptions struct {
	Goal string
	// MaxSteps is the step budget; 0 means 30.
	MaxSteps int
	// DryRun predicts and reports the commands without sending them.
	DryRun bool
	// Confirm, when set, is asked before every dispatch (not in dry runs).
	Confirm func(ctx context.Context, s *Step) (Decision, error)
	// OutDir receives the trajectory; "" writes nothing.
	OutDir string
	// SettleTimeout bounds the wait for the screen to stop changing after a
	// dispatch; 0 means 5 s, negative means do not wait.
	SettleTimeout time.Duration
	// SettleInterval is the pause between settle captures; 0 means none
	// (a capture itself takes a few hundred ms on a phone).
	SettleInterval time.Duration
	// RepeatLimit stops the episode when the model predicts the same action
	// this many times in a row; 0 means 3. The last repeat is not sent.
	RepeatLimit int
	// NoAnnotate skips the annotated PNGs.
	NoAnnotate bool
	// Log receives one progress line per step; nil discards them.
	Log io.Writer
}

// Agent runs closed-loop episodes on a device.
type Agent struct {
	dev  *Device
	pred Predictor
	opts AgentOptions
}

// NewAgent returns an agent for dev driven by pred.
func NewAgent(dev *Device, pred Predictor, opts AgentOptions) *Agent {
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = 30
	}
	if opts.SettleTimeout == 0 {
		opts.SettleTimeout = 5 * time.Second
	}
	if opts.RepeatLimit <= 0 {
		opts.RepeatLimit = 3
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return &Agent{dev: dev, pred: pred, opts: opts}
}

// Run plays one episode: capture -> predict (with the agent's own previous
// actions as history) -> dispatch -> wait for the screen to settle, until a
// stop condition. The summary is always returned and written (with
// everything recorded so far) even when the episode ends in an error, which
// is then also returned. Cancelling ctx stops gracefully: the summary says
// "interrupted" and the error is nil.
func (a *Agent) Run(ctx context.Context) (*Summary, error) {
	start := time.Now()
	sum := &Summary{Goal: a.opts.Goal, Serial: a.dev.Serial(), Model: a.dev.Model(), DryRun: a.opts.DryRun, Output: a.opts.OutDir}
	traj, err := newTrajectory(a.opts.OutDir)
	if err != nil {
		return sum, err
	}
	runErr := a.loop(ctx, sum, traj)
	if runErr != nil {
		if ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
			sum.StopReason, runErr = StopInterrupted, nil
		} else {
			sum.StopReason, sum.Error = StopError, runErr.Error()
		}
	}
	sum.Total = time.Since(start)
	if err := traj.close(sum); err != nil && runErr == nil {
		runErr = err
	}
	fmt.Fprintf(a.opts.Log, "stopped after %d steps: %s (%.1fs)\n", sum.Steps, describeStop(sum), sum.Total.Seconds())
	return sum, runErr
}

func describeStop(s *Summary) string {
	if s.Error != "" {
		return s.StopReason + ": " + s.Error
	}
	return s.StopReason
}

func (a *Agent) loop(ctx context.Context, sum *Summary, traj *trajectory) error {
	var (
		history []action.Action
		shot    *Screenshot // the settled screen of the last dispatch, if any
		repeats int
		last    *action.Action
	)
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i >= a.opts.MaxSteps {
			sum.StopReason = StopMaxSteps
			return nil
		}
		stepStart := time.Now()
		st := &Step{Step: i, Goal: a.opts.Goal, History: append([]action.Action{}, history...), DryRun: a.opts.DryRun, Commands: []string{}}
		finish := func(performed bool) error {
			st.Timings.Total = time.Since(stepStart)
			sum.Steps++
			sum.Capture += st.Timings.Capture
			sum.Predict += st.Timings.Predict
			sum.Dispatch += st.Timings.Dispatch
			sum.Settle += st.Timings.Settle
			if st.Dispatched {
				sum.Dispatched++
			}
			return traj.writeStep(st, performed)
		}
		fail := func(err error) error {
			st.Error = err.Error()
			if werr := finish(false); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		}

		if shot == nil {
			t0 := time.Now()
			s, err := a.dev.Screenshot(ctx)
			st.Timings.Capture = time.Since(t0)
			if err != nil {
				return fail(fmt.Errorf("step %d: capture: %w", i, err))
			}
			shot = s
		}
		b := shot.Image.Bounds()
		st.ImageSize = [2]int{b.Dx(), b.Dy()}
		st.ScreenshotVia = shot.Via
		if traj != nil {
			st.Screenshot = fmt.Sprintf("step_%03d.png", i)
			if err := traj.writeFile(st.Screenshot, shot.PNG); err != nil {
				return fail(err)
			}
		}
		w, h, err := a.dev.ScreenSize(ctx)
		if err != nil {
			return fail(fmt.Errorf("step %d: screen size: %w", i, err))
		}
		st.InputSize = [2]int{w, h}

		t0 := time.Now()
		res, err := a.pred.Predict(ctx, engine.Request{Screen: shot.Image, Goal: a.opts.Goal, History: history})
		st.Timings.Predict = time.Since(t0)
		if err != nil {
			return fail(fmt.Errorf("step %d: predict: %w", i, err))
		}
		st.Raw, st.Timings.Engine = res.Raw, res.Timings
		for _, t := range res.Plan {
			st.Plan = append(st.Plan, t.String())
		}
		if res.ParseErr != nil {
			st.ParseError = res.ParseErr.Error()
			sum.StopReason = StopUnparsable
			// The parse error quotes the raw text (shortened); steps.jsonl has all of it.
			sum.Error = fmt.Sprintf("step %d: the model output does not parse as an Auto-UI action: %v", i, res.ParseErr)
			fmt.Fprintf(a.opts.Log, "step %d: unparsable model output %q\n", i, shorten(res.Raw, 160))
			return finish(false)
		}
		act := res.Action
		st.Action = &act
		plan := a.dev.PlanAction(act, w, h)
		st.Gesture = gestureRecord(plan.Gesture)
		st.Commands = append(st.Commands, plan.Commands...)
		if traj != nil && !a.opts.NoAnnotate {
			st.Annotated = fmt.Sprintf("step_%03d_annotated.png", i)
			if err := traj.writeFile(st.Annotated, encodePNG(annotate.Action(shot.Image, act))); err != nil {
				return fail(err)
			}
		}
		shot = nil

		if last != nil && *last == act {
			repeats++
		} else {
			repeats = 1
		}
		last = &act
		fmt.Fprintf(a.opts.Log, "step %d: %s %s\n", i, describeAction(act, plan), strings.Join(plan.Commands, "; "))
		if repeats >= a.opts.RepeatLimit {
			sum.StopReason = StopRepeated
			sum.Error = fmt.Sprintf("the model predicted the same action %d times in a row: %s", repeats, act.String())
			return finish(false)
		}
		switch plan.Gesture.Kind {
		case action.GestureStop:
			sum.StopReason = StopComplete
			if act.Type == action.StatusTaskImpossible {
				sum.StopReason = StopImpossible
			}
			return finish(true)
		case action.GestureNone:
			return fail(fmt.Errorf("step %d: action type %s has no device gesture", i, act.Type))
		}

		if a.opts.DryRun {
			history = append(history, act)
			if err := finish(true); err != nil {
				return err
			}
			continue
		}
		if a.opts.Confirm != nil {
			d, err := a.opts.Confirm(ctx, st)
			if err != nil {
				return fail(fmt.Errorf("step %d: confirm: %w", i, err))
			}
			switch d {
			case Quit:
				sum.StopReason = StopUserQuit
				st.Skipped = true
				return finish(false)
			case Skip:
				st.Skipped = true
				last, repeats = nil, 0
				if err := finish(false); err != nil {
					return err
				}
				continue
			}
		}
		t0 = time.Now()
		err = a.dev.Run(ctx, plan.Commands)
		st.Timings.Dispatch = time.Since(t0)
		if err != nil {
			return fail(fmt.Errorf("step %d: dispatch: %w", i, err))
		}
		st.Dispatched = true
		history = append(history, act)

		t0 = time.Now()
		settled, ok, err := a.settle(ctx)
		st.Timings.Settle = time.Since(t0)
		if err != nil {
			return fail(fmt.Errorf("step %d: wait for the screen to settle: %w", i, err))
		}
		if a.opts.SettleTimeout > 0 {
			st.Settled = &ok
		}
		shot = settled
		if err := finish(true); err != nil {
			return err
		}
	}
}

// settle captures until two consecutive screenshots are identical or the
// timeout passes; it returns the last capture (nil when not waiting).
func (a *Agent) settle(ctx context.Context) (*Screenshot, bool, error) {
	if a.opts.SettleTimeout < 0 {
		return nil, true, nil
	}
	deadline := time.Now().Add(a.opts.SettleTimeout)
	prev, err := a.dev.Screenshot(ctx)
	if err != nil {
		return nil, false, err
	}
	for {
		if a.opts.SettleInterval > 0 {
			select {
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(a.opts.SettleInterval):
			}
		}
		cur, err := a.dev.Screenshot(ctx)
		if err != nil {
			return nil, false, err
		}
		if bytes.Equal(prev.PNG, cur.PNG) {
			return cur, true, nil
		}
		if time.Now().After(deadline) {
			return cur, false, nil
		}
		prev = cur
	}
}

func describeAction(a action.Action, p Plan) string {
	switch p.Gesture.Kind {
	case action.GestureTap:
		return fmt.Sprintf("tap (%d, %d) ->", p.Gesture.X1, p.Gesture.Y1)
	case action.GestureSwipe:
		return fmt.Sprintf("swipe %s (%d, %d)->(%d, %d) ->", action.SwipeDirection(a.Touch, a.Lift), p.Gesture.X1, p.Gesture.Y1, p.Gesture.X2, p.Gesture.Y2)
	case action.GestureText:
		return fmt.Sprintf("type %q ->", a.Text)
	}
	return a.Type.String()
}

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		return nil
	}
	return b.Bytes()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
