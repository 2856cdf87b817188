package dataset

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
	"github.com/autoui/autoui/stoprule"
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

// RunOnline plays one task in process, the way `autoui run` drives a
// device: screenshot -> predict with the model's own previous actions as
// history -> perform the action through the same pixel gestures ADB sends,
// until the model says the task is complete (or impossible), repeats itself,
// emits something unparsable, or runs out of steps, on the stop rules
// `autoui run` shares (package stoprule). Success is the task's state-based
// check at the end, whatever the model claimed.
func RunOnline(ctx context.Context, pred predict.Predictor, t tasks.Task, o OnlineOptions) (Episode, error) {
	if o.Width == 0 && o.Height == 0 {
		o.Width, o.Height = 360, 800
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = t.MaxSteps
	}
	ep := Episode{Family: t.Family, Seed: t.Seed, Goal: t.Goal, Stop: stoprule.MaxSteps.Short()}
	p, err := t.NewPhone(tasks.Options{Width: o.Width, Height: o.Height})
	if err != nil {
		return ep, err
	}
	var history []action.Action
	stops := stoprule.NewTracker(stoprule.Rules{RepeatLimit: o.RepeatLimit, OnNoEffect: o.OnNoEffect})
	for ep.Steps < o.MaxSteps {
		if err := ctx.Err(); err != nil {
			return ep, err
		}
		res, err := pred.Predict(ctx, predict.Request{Screen: p.Image(), Goal: t.Goal, History: history})
		if err != nil {
			return ep, fmt.Errorf("task %s/%d step %d: predict: %w", t.Family, t.Seed, ep.Steps, err)
		}
		ep.Steps++
		ep.Raw = append(ep.Raw, res.Raw)
		if res.ParseErr != nil {
			ep.Stop = stoprule.Unparsable.Short()
			break
		}
		a := res.Action
		ep.Actions = append(ep.Actions, a)
		// A repeat is not performed; a status action has nothing to perform.
		if stop := stops.Predicted(a); stop != "" {
			ep.Stop = stop.Short()
			break
		}
		effect := applyObserved(p, a, stops, o.Diff, &ep.Effects)
		history = append(history, a)
		if stop := stops.Performed(effect); stop != "" {
			ep.Stop = stop.Short()
			break
		}
	}
	ep.Success = t.Success(p)
	return ep, nil
}

// applyObserved performs a on the phone and compares the screen before and
// after, as `autoui run` does with the settled screenshot; under the retry
// policy an action without effect is performed once more. It returns the
// final effect and counts it.
func applyObserved(p *sim.Phone, a action.Action, stops *stoprule.Tracker, diff screendiff.Options, counts *screendiff.Counts) string {
	before := screendiff.NewFrame(p.Image())
	tasks.Apply(p, a)
	effect := screendiff.Effect(before, screendiff.NewFrame(p.Image()), diff)
	if stops.Retry(effect) {
		counts.Retried++
		tasks.Apply(p, a)
		effect = screendiff.Effect(before, screendiff.NewFrame(p.Image()), diff)
	}
	counts.Add(effect)
	return effect
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
