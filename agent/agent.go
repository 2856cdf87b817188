// Package agent plays closed-loop episodes: capture the screen, predict the
// next action with the model's own earlier actions as history, dispatch it,
// wait for the screen to settle, until a stop rule (package stoprule) ends
// the episode. It runs on any Phone: a real one over adb (*device.Device,
// `autoui run`) or a simulated one in process (sim/dataset, `autoui
// simeval`); a trajectory (steps, screenshots, summary, an AndroidWorld
// export) is written when asked.
package agent

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

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/annotate"
	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/stoprule"
)

// Decision is the answer to a confirmation prompt.
type Decision int

// Decisions.
const (
	Proceed Decision = iota // dispatch the action
	Skip                    // do not dispatch it; capture and predict again
	Quit                    // end the episode
)

// Options configure an episode.
type Options struct {
	Goal string
	// MaxSteps is the step budget; 0 means 30.
	MaxSteps int
	// DryRun predicts and reports the commands without sending them.
	DryRun bool
	// Confirm, when set, is asked before every dispatch (not in dry runs).
	Confirm func(ctx context.Context, s *Step) (Decision, error)
	// OutDir receives the trajectory; "" writes nothing. A directory that
	// already holds files is refused unless Overwrite, which clears an
	// earlier trajectory (and refuses a directory with other files).
	OutDir    string
	Overwrite bool
	// Settle is what must stop changing after an action: SettlePixels
	// (screenshots; "" means it) or SettleUI (the UI hierarchy). The
	// settle options below default by mode.
	Settle string
	// SettleMin is the wait after an action before the first settle
	// capture; 0 means 1 s (ui: none), negative means none.
	SettleMin time.Duration
	// SettleTimeout bounds the whole wait for the screen to settle after
	// an action, SettleMin included; 0 means 5 s (ui: 6 s), negative means
	// do not wait nor capture (effects are then unknown).
	SettleTimeout time.Duration
	// SettleInterval is the pause between settle captures; 0 means none
	// (a capture itself takes a few hundred ms on a phone; ui: 0.5 s).
	SettleInterval time.Duration
	// StableFrames is how many consecutive captures must match (within
	// Diff's tolerance) for the screen to count as settled; in the ui mode
	// how many consecutive checks must equal the hierarchy before them; 0
	// means 3.
	StableFrames int
	// Diff tunes screen comparisons (status bar mask, tolerances).
	Diff screendiff.Options
	// OnNoEffect is what to do when the settled screen equals the one the
	// model saw (screendiff.OnNoEffect*); "" means continue.
	OnNoEffect string
	// RepeatLimit stops the episode when the model predicts the same action
	// this many times in a row; 0 means stoprule.DefaultRepeatLimit (3). The
	// last repeat is not sent.
	RepeatLimit int
	// NoAnnotate skips the annotated PNGs.
	NoAnnotate bool
	// Log receives one progress line per step; nil discards them.
	Log io.Writer
	// OnStep, when set, is given each step's record as it is finished.
	OnStep func(*Step)
	// Source, when set, is recorded in the summary: what predicted.
	Source *Source
}

// Agent runs closed-loop episodes on a phone.
type Agent struct {
	phone Phone
	pred  predict.Predictor
	opts  Options
}

// New returns an agent for phone driven by pred.
func New(phone Phone, pred predict.Predictor, opts Options) *Agent {
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = 30
	}
	if opts.Settle == "" {
		opts.Settle = SettlePixels
	}
	ui := opts.Settle == SettleUI
	switch {
	case opts.SettleMin == 0 && ui:
		opts.SettleMin = -1
	case opts.SettleMin == 0:
		opts.SettleMin = time.Second
	}
	switch {
	case opts.SettleTimeout == 0 && ui:
		opts.SettleTimeout = DefaultUISettleTimeout
	case opts.SettleTimeout == 0:
		opts.SettleTimeout = 5 * time.Second
	}
	if opts.SettleInterval == 0 && ui {
		opts.SettleInterval = DefaultUISettleInterval
	}
	if opts.StableFrames <= 0 {
		opts.StableFrames = 3
	}
	if opts.OnNoEffect == "" {
		opts.OnNoEffect = screendiff.OnNoEffectContinue
	}
	if opts.RepeatLimit <= 0 {
		opts.RepeatLimit = stoprule.DefaultRepeatLimit
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	return &Agent{phone: phone, pred: pred, opts: opts}
}

// Run plays one episode: capture -> predict (with the agent's own previous
// actions as history) -> dispatch -> wait for the screen to settle, until a
// stop condition. The summary is always returned and written (with
// everything recorded so far) even when the episode ends in an error, which
// is then also returned. Cancelling ctx stops gracefully: the summary says
// "interrupted" and the error is nil.
func (a *Agent) Run(ctx context.Context) (*Summary, error) {
	start := time.Now()
	sum := &Summary{Goal: a.opts.Goal, Serial: a.phone.Serial(), Model: a.phone.Model(), Source: a.opts.Source, DryRun: a.opts.DryRun, Output: a.opts.OutDir}
	if !screendiff.ValidOnNoEffect(a.opts.OnNoEffect) {
		return sum, fmt.Errorf("on-no-effect %q: want continue, retry or stop", a.opts.OnNoEffect)
	}
	if err := ValidateSettle(a.opts.Settle); err != nil {
		return sum, fmt.Errorf("settle mode %w", err)
	}
	traj, err := newTrajectory(a.opts.OutDir, a.opts.Overwrite, a.opts.DryRun)
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
	sum.SettleTimes = newSettleStats(a.opts.Settle, sum.settleTimes)
	if err := traj.close(sum); err != nil && runErr == nil {
		runErr = err
	}
	if st := sum.SettleTimes; st.Actions > 0 {
		fmt.Fprintf(a.opts.Log, "settling (%s) after %d actions: median %.2fs, p90 %.2fs, max %.2fs, %d timeouts\n", st.Mode, st.Actions, st.MedianMs/1000, st.P90Ms/1000, st.MaxMs/1000, sum.SettleTimeouts)
	}
	fmt.Fprintf(a.opts.Log, "stopped after %d steps: %s (%.1fs)\n", sum.Steps, describeStop(sum), sum.Total.Seconds())
	return sum, runErr
}

func describeStop(s *Summary) string {
	if s.Error != "" {
		return string(s.StopReason) + ": " + s.Error
	}
	return string(s.StopReason)
}

// episode is the state carried from step to step.
type episode struct {
	a       *Agent
	sum     *Summary
	traj    *trajectory
	history []action.Action
	// shot is the screen the next step starts from: the settled capture of
	// the last action, or nil to capture afresh.
	shot  *device.Screenshot
	frame *screendiff.Frame
	// ui is the hierarchy the last action settled on (--settle ui): the
	// next wait starts from it, as AndroidWorld's does.
	ui []device.UIElement
	// stops applies the stop rules `autoui sim eval` shares: repeats,
	// STATUS_*, --on-no-effect.
	stops *stoprule.Tracker
}

func (a *Agent) loop(ctx context.Context, sum *Summary, traj *trajectory) error {
	e := &episode{a: a, sum: sum, traj: traj,
		stops: stoprule.NewTracker(stoprule.Rules{RepeatLimit: a.opts.RepeatLimit, OnNoEffect: a.opts.OnNoEffect})}
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i >= a.opts.MaxSteps {
			sum.StopReason = StopMaxSteps
			return nil
		}
		done, err := e.step(ctx, i)
		if err != nil || done {
			return err
		}
	}
}

// stepRun is one step being played: its record and the helpers that end it.
type stepRun struct {
	e     *episode
	st    *Step
	start time.Time
}

// finish records the step; performed says whether it belongs in the
// AndroidWorld export.
func (r *stepRun) finish(performed bool) error {
	st, sum := r.st, r.e.sum
	st.Timings.Total = time.Since(r.start)
	sum.Steps++
	sum.Capture += st.Timings.Capture
	sum.Predict += st.Timings.Predict
	sum.Dispatch += st.Timings.Dispatch
	sum.Settle += st.Timings.Settle
	if st.Dispatched {
		sum.Dispatched++
	}
	if st.Settled != nil {
		sum.settleTimes = append(sum.settleTimes, st.Timings.Settle)
		if !*st.Settled {
			sum.SettleTimeouts++
		}
	}
	if st.BlackFrame {
		sum.BlackFrames++
	}
	sum.Effects.Add(st.Effect)
	if st.Retried {
		sum.Effects.Retried++
	}
	if r.e.a.opts.OnStep != nil {
		r.e.a.opts.OnStep(st)
	}
	return r.e.traj.writeStep(st, performed)
}

// fail records the step with its error and returns the error. An action
// that was sent before the failure (say, while waiting for the screen) is
// still what happened to the device, so it stays in the AndroidWorld export.
func (r *stepRun) fail(err error) error {
	r.st.Error = err.Error()
	if werr := r.finish(r.st.Dispatched); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

func (r *stepRun) logf(format string, args ...any) {
	fmt.Fprintf(r.e.a.opts.Log, "step %d: "+format+"\n", append([]any{r.st.Step}, args...)...)
}

// step plays step i; done says the episode ended (with sum.StopReason set).
func (e *episode) step(ctx context.Context, i int) (done bool, err error) {
	o := e.a.opts
	r := &stepRun{e: e, start: time.Now(), st: &Step{Step: i, Goal: o.Goal, History: append([]action.Action{}, e.history...), DryRun: o.DryRun, Commands: []string{}}}
	st := r.st
	w, h, err := e.observe(ctx, r)
	if err != nil {
		return true, r.fail(err)
	}
	t0 := time.Now()
	res, err := e.a.pred.Predict(ctx, predict.Request{Screen: e.shot.Image, Goal: o.Goal, History: e.history})
	st.Timings.Predict = time.Since(t0)
	if err != nil {
		return true, r.fail(fmt.Errorf("step %d: predict: %w", i, err))
	}
	st.Raw, st.Timings.Engine = res.Raw, res.Timings
	for _, t := range res.Plan {
		st.Plan = append(st.Plan, t.String())
	}
	if res.ParseErr != nil {
		st.ParseError = res.ParseErr.Error()
		e.sum.StopReason = StopUnparsable
		// The parse error quotes the raw text (shortened); steps.jsonl has all of it.
		e.sum.Error = fmt.Sprintf("step %d: the model output does not parse as an Auto-UI action: %v", i, res.ParseErr)
		r.logf("unparsable model output %.160q", res.Raw) // at most 160 runes of it
		return true, r.finish(false)
	}
	act := res.Action
	st.Action = &act
	plan := e.a.phone.PlanAction(act, w, h)
	st.Gesture = gestureRecord(plan.Gesture)
	st.Commands = append(st.Commands, plan.Commands...)
	if st.Warning = plan.TextWarning; st.Warning != "" {
		r.logf("warning: %s", st.Warning)
	}
	if err := e.annotate(r, act); err != nil {
		return true, r.fail(err)
	}
	before := e.frame
	e.shot, e.frame = nil, nil
	return e.act(ctx, r, act, plan, before)
}

// observe makes sure there is a screen to predict on (capturing one when
// the last action left none), writes it and reads the input size.
func (e *episode) observe(ctx context.Context, r *stepRun) (int, int, error) {
	st, i := r.st, r.st.Step
	if e.shot == nil {
		t0 := time.Now()
		s, err := e.a.phone.Screenshot(ctx)
		st.Timings.Capture = time.Since(t0)
		if err != nil {
			return 0, 0, fmt.Errorf("step %d: capture: %w", i, err)
		}
		e.shot, e.frame = s, screendiff.NewFrame(s.Image)
	}
	b := e.shot.Image.Bounds()
	st.ImageSize = [2]int{b.Dx(), b.Dy()}
	st.ScreenshotVia = e.shot.Via
	if e.frame.Black() {
		st.BlackFrame = true
		r.logf("the screen is black: the screen is off or locked, or the app shows a secure window (FLAG_SECURE: banking, passwords, DRM video) that screenshots cannot read; the model sees a black image")
	}
	if e.traj != nil {
		st.Screenshot = fmt.Sprintf("step_%03d.png", i)
		if err := e.traj.writeFile(st.Screenshot, e.shot.PNG); err != nil {
			return 0, 0, err
		}
	}
	w, h, err := e.a.phone.ScreenSize(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("step %d: screen size: %w", i, err)
	}
	st.InputSize = [2]int{w, h}
	return w, h, nil
}

func (e *episode) annotate(r *stepRun, act action.Action) error {
	if e.traj == nil || e.a.opts.NoAnnotate {
		return nil
	}
	r.st.Annotated = fmt.Sprintf("step_%03d_annotated.png", r.st.Step)
	return e.traj.writeFile(r.st.Annotated, encodePNG(annotate.Action(e.shot.Image, act)))
}

// act decides what happens to the predicted action: a stop, a repeat, a
// dry run, the --confirm prompt, or sending it.
func (e *episode) act(ctx context.Context, r *stepRun, act action.Action, plan device.Plan, before *screendiff.Frame) (bool, error) {
	o, st, i := e.a.opts, r.st, r.st.Step
	what := describeAction(act, plan)
	switch stop := e.stops.Predicted(act); stop {
	case StopRepeated:
		return true, e.stopRepeated(r, act, what)
	case StopComplete, StopImpossible:
		e.sum.StopReason = stop
		r.logf("%s", what)
		return true, r.finish(true)
	}
	if plan.Gesture.Kind == action.GestureNone {
		return true, r.fail(fmt.Errorf("step %d: action type %s has no device gesture", i, act.Type))
	}
	if o.DryRun {
		r.logf("%s; dry run, not sent: %s", what, strings.Join(plan.Commands, "; "))
		e.history = append(e.history, act.Clamped())
		return false, r.finish(false)
	}
	if o.Confirm != nil {
		d, err := o.Confirm(ctx, st)
		if err != nil {
			return true, r.fail(fmt.Errorf("step %d: confirm: %w", i, err))
		}
		switch d {
		case Quit:
			e.sum.StopReason = StopUserQuit
			st.Skipped = true
			r.logf("%s; not sent (quit)", what)
			return true, r.finish(false)
		case Skip:
			st.Skipped = true
			e.stops.Skip()
			r.logf("%s; skipped, not sent", what)
			return false, r.finish(false)
		}
	}
	return e.perform(ctx, r, act, plan, before, what)
}

// stopRepeated ends the episode on the RepeatLimit-th identical action,
// which is not sent. In a dry run the screen never changes, so a repeat is
// expected rather than a failure: it ends the run as dry_run_repeat.
func (e *episode) stopRepeated(r *stepRun, act action.Action, what string) error {
	if e.a.opts.DryRun {
		e.sum.StopReason = StopDryRunRepeat
		r.logf("%s; dry run: the model repeats itself on the unchanged screen, stopping", what)
		return r.finish(false)
	}
	e.sum.StopReason = StopRepeated
	e.sum.Error = fmt.Sprintf("the model predicted the same action %d times in a row: %s", e.stops.Repeats(), act.String())
	r.logf("%s; not sent: predicted %d times in a row", what, e.stops.Repeats())
	return r.finish(false)
}

// perform sends the action, waits for the screen to settle and judges its
// effect, applying the --on-no-effect policy.
func (e *episode) perform(ctx context.Context, r *stepRun, act action.Action, plan device.Plan, before *screendiff.Frame, what string) (bool, error) {
	o, st, i := e.a.opts, r.st, r.st.Step
	if err := e.sendAndSettle(ctx, r, plan); err != nil {
		return true, r.fail(err)
	}
	e.history = append(e.history, act.Clamped()) // as performed
	st.Effect = screendiff.Effect(before, e.frame, o.Diff)
	if e.stops.Retry(st.Effect) {
		r.logf("%s -> %s: no visible effect, sending it again", what, strings.Join(plan.Commands, "; "))
		st.Retried = true
		if err := e.sendAndSettle(ctx, r, plan); err != nil {
			return true, r.fail(err)
		}
		st.Effect = screendiff.Effect(before, e.frame, o.Diff)
	}
	r.logf("%s -> %s%s", what, strings.Join(plan.Commands, "; "), describeSettle(st))
	if stop := e.stops.Performed(st.Effect); stop != "" {
		e.sum.StopReason = stop
		e.sum.Error = fmt.Sprintf("step %d: %s had no visible effect (--on-no-effect stop)", i, act.String())
		return true, r.finish(true)
	}
	return false, r.finish(true)
}

// sendAndSettle dispatches the commands and waits for the screen; the
// settled capture becomes the next step's screen.
func (e *episode) sendAndSettle(ctx context.Context, r *stepRun, plan device.Plan) error {
	st, i := r.st, r.st.Step
	t0 := time.Now()
	err := e.a.phone.Dispatch(ctx, plan)
	st.Timings.Dispatch += time.Since(t0)
	if err != nil {
		return fmt.Errorf("step %d: dispatch: %w", i, err)
	}
	st.Dispatched = true
	t0 = time.Now()
	res, err := e.a.settle(ctx, e.ui)
	st.Timings.Settle += time.Since(t0)
	st.SettleCaptures += res.captures
	st.SettleChecks += res.checks
	if err != nil {
		return fmt.Errorf("step %d: wait for the screen to settle: %w", i, err)
	}
	if e.a.opts.SettleTimeout >= 0 {
		ok := res.settled
		st.Settled = &ok
	}
	e.shot, e.frame, e.ui = res.shot, res.frame, res.ui
	return nil
}

// describeSettle is the log's note on the wait and the effect.
func describeSettle(st *Step) string {
	if st.Settled == nil {
		return ""
	}
	state := fmt.Sprintf("settled in %.1fs", st.Timings.Settle.Seconds())
	if !*st.Settled {
		state = fmt.Sprintf("still changing after %.1fs", st.Timings.Settle.Seconds())
	}
	checks := ""
	if st.SettleChecks > 0 {
		checks = fmt.Sprintf("%d hierarchy checks, ", st.SettleChecks)
	}
	return fmt.Sprintf(" (%s, %s%d captures; effect: %s)", state, checks, st.SettleCaptures, st.Effect)
}

func describeAction(a action.Action, p device.Plan) string {
	switch p.Gesture.Kind {
	case action.GestureTap:
		return fmt.Sprintf("tap (%d, %d)", p.Gesture.X1, p.Gesture.Y1)
	case action.GestureSwipe:
		return fmt.Sprintf("swipe %s (%d, %d)->(%d, %d)", action.SwipeDirection(a.Touch, a.Lift), p.Gesture.X1, p.Gesture.Y1, p.Gesture.X2, p.Gesture.Y2)
	case action.GestureText:
		return fmt.Sprintf("type %q", a.Text)
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
