package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/agent"
	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
)

// OnlineOptions configure closed-loop episodes on the simulator.
type OnlineOptions struct {
	Width, Height int // 0 means 360x800, the dataset's default
	// MaxSteps caps an episode; 0 means the task's own budget (MaxSteps).
	MaxSteps int
	// RepeatLimit ends an episode when the model predicts the same action
	// this many times in a row; 0 means stoprule.DefaultRepeatLimit (3), as
	// in `autoui run`.
	RepeatLimit int
	// OnNoEffect is what to do when an action leaves the screen unchanged
	// (screendiff.OnNoEffect*; "" means continue).
	OnNoEffect string
	// Diff tunes the before/after screen comparison.
	Diff screendiff.Options
}

// Episode is the outcome of one online task.
type Episode struct {
	Family  string `json:"family"`
	Seed    int64  `json:"seed"`
	Goal    string `json:"goal"`
	Success bool   `json:"success"` // read from the phone's state
	Steps   int    `json:"steps"`
	// Stop is why the episode ended, as stoprule.Reason.Short words it
	// ("complete", "impossible", "max_steps", "repeated", "unparsable",
	// "no_effect").
	Stop string `json:"stop"`
	// Effects counts what the performed actions visibly did.
	Effects screendiff.Counts `json:"effects"`
	Actions []action.Action   `json:"-"`
	Raw     []string          `json:"-"`
}

// RunOnline plays one task in process with the agent that `autoui run`
// drives a device with (package agent): screenshot -> predict with the
// model's own previous actions as history -> perform the action through the
// same pixel gestures ADB sends, until the model says the task is complete
// (or impossible), repeats itself, emits something unparsable, or runs out
// of steps. The simulated phone has nothing to wait for: the screen after an
// action is the one capture after it. Success is the task's state-based
// check at the end, whatever the model claimed.
func RunOnline(ctx context.Context, pred predict.Predictor, t tasks.Task, o OnlineOptions) (Episode, error) {
	if o.Width == 0 && o.Height == 0 {
		o.Width, o.Height = 360, 800
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = t.MaxSteps
	}
	ep := Episode{Family: t.Family, Seed: t.Seed, Goal: t.Goal}
	p, err := t.NewPhone(tasks.Options{Width: o.Width, Height: o.Height})
	if err != nil {
		return ep, err
	}
	record := func(st *agent.Step) {
		ep.Raw = append(ep.Raw, st.Raw)
		if st.Action != nil {
			ep.Actions = append(ep.Actions, *st.Action)
		}
	}
	sum, err := agent.New(simPhone{p}, pred, agent.Options{
		Goal: t.Goal, MaxSteps: o.MaxSteps, RepeatLimit: o.RepeatLimit, OnNoEffect: o.OnNoEffect, Diff: o.Diff,
		Settle: agent.SettlePixels, SettleMin: -1, StableFrames: 1, NoAnnotate: true, OnStep: record,
	}).Run(ctx)
	ep.Steps, ep.Stop, ep.Effects = sum.Steps, sum.StopReason.Short(), sum.Effects
	switch {
	case err != nil:
		return ep, fmt.Errorf("task %s/%d: %w", t.Family, t.Seed, err)
	case sum.StopReason == agent.StopInterrupted:
		return ep, ctx.Err()
	}
	ep.Success = t.Success(p)
	return ep, nil
}

// simPhone is a simulated phone as the agent sees one: a capture renders
// it, an action is the gesture adb would send (tasks.Perform), and every
// change shows at once.
type simPhone struct{ p *sim.Phone }

func (s simPhone) Serial() string { return "sim" }
func (s simPhone) Model() string  { return "" }

func (s simPhone) Screenshot(context.Context) (*device.Screenshot, error) {
	return &device.Screenshot{Image: s.p.Image()}, nil
}

func (s simPhone) ScreenSize(context.Context) (int, int, error) {
	w, h := s.p.Size()
	return w, h, nil
}

func (s simPhone) PlanAction(a action.Action, w, h int) device.Plan {
	g := a.Gesture(w, h)
	return device.Plan{Gesture: g, Commands: device.Commands(g, tasks.SwipeMs), Width: w, Height: h}
}

func (s simPhone) Dispatch(_ context.Context, p device.Plan) error {
	tasks.Perform(s.p, p.Gesture)
	return nil
}

func (s simPhone) UIElements(context.Context) ([]device.UIElement, error) {
	return nil, errors.New("the simulated phone has no UI hierarchy to read")
}

// FamilyScore is the success rate of one family.
type FamilyScore struct {
	Family    string  `json:"family"`
	Tasks     int     `json:"tasks"`
	Successes int     `json:"successes"`
	Rate      float64 `json:"rate"`
	MeanSteps float64 `json:"mean_steps"`
	// Effects sums what the performed actions visibly did; NoEffectRate is
	// Effects.None over the actions with a known effect.
	Effects      screendiff.Counts `json:"effects"`
	NoEffectRate float64           `json:"no_effect_rate"`
}

// Summarize scores episodes per family (in tasks.Families order) and
// overall (family "all").
func Summarize(eps []Episode) []FamilyScore {
	by := map[string]*FamilyScore{}
	all := &FamilyScore{Family: "all"}
	for _, e := range eps {
		s := by[e.Family]
		if s == nil {
			s = &FamilyScore{Family: e.Family}
			by[e.Family] = s
		}
		for _, x := range []*FamilyScore{s, all} {
			x.Tasks++
			x.MeanSteps += float64(e.Steps)
			x.Effects.Changed += e.Effects.Changed
			x.Effects.None += e.Effects.None
			x.Effects.Unknown += e.Effects.Unknown
			x.Effects.Retried += e.Effects.Retried
			if e.Success {
				x.Successes++
			}
		}
	}
	rank := map[string]int{}
	for i, f := range tasks.Families {
		rank[f] = i
	}
	var out []FamilyScore
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return rank[out[i].Family] < rank[out[j].Family] })
	out = append(out, *all)
	for i := range out {
		if out[i].Tasks > 0 {
			out[i].Rate = float64(out[i].Successes) / float64(out[i].Tasks)
			out[i].MeanSteps /= float64(out[i].Tasks)
		}
		if known := out[i].Effects.Changed + out[i].Effects.None; known > 0 {
			out[i].NoEffectRate = float64(out[i].Effects.None) / float64(known)
		}
	}
	return out
}

// WriteTable prints per-family success rates.
func WriteTable(w io.Writer, scores []FamilyScore) error {
	if _, err := fmt.Fprintf(w, "%-16s %6s %9s %8s %10s %8s %9s\n", "family", "tasks", "successes", "success", "mean steps", "actions", "no effect"); err != nil {
		return err
	}
	for _, s := range scores {
		performed := s.Effects.Changed + s.Effects.None + s.Effects.Unknown
		if _, err := fmt.Fprintf(w, "%-16s %6d %9d %7.1f%% %10.1f %8d %8.1f%%\n", s.Family, s.Tasks, s.Successes, 100*s.Rate, s.MeanSteps, performed, 100*s.NoEffectRate); err != nil {
			return err
		}
	}
	return nil
}
