// Package stoprule decides when a closed-loop episode ends (package agent
// plays them: `autoui run` on a device, `autoui simeval` on the simulator,
// predicting an action from the screen with the model's own earlier actions
// as history). The rules: the model's output does not parse, it predicts the
// same action RepeatLimit times in a row (the last one is not performed), it
// says STATUS_TASK_COMPLETE or STATUS_TASK_IMPOSSIBLE, an action leaves the
// screen unchanged under the --on-no-effect stop policy, or the step budget
// runs out.
package stoprule

import (
	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/screendiff"
)

// Reason is why an episode ended. Its value is the word `autoui run` writes
// to summary.json ("stop_reason"); Short is the one `autoui sim eval` writes
// to its episodes ("stop").
type Reason string

// Stop reasons.
const (
	Complete   Reason = "task_complete"     // the model said STATUS_TASK_COMPLETE
	Impossible Reason = "task_impossible"   // the model said STATUS_TASK_IMPOSSIBLE
	MaxSteps   Reason = "max_steps"         // the step budget ran out
	Repeated   Reason = "repeated_action"   // the same action RepeatLimit times in a row (the last one not performed)
	NoEffect   Reason = "no_effect"         // --on-no-effect stop: an action changed nothing on screen
	Unparsable Reason = "unparsable_output" // the model text is not an Auto-UI action

	// Only `autoui run` ends for these.
	DryRunRepeat Reason = "dry_run_repeat" // a dry run's model repeated itself on the unchanged screen
	Interrupted  Reason = "interrupted"    // the context was cancelled (Ctrl-C)
	UserQuit     Reason = "user_quit"      // --confirm answered q
	Error        Reason = "error"          // device or model failure; the summary's error says which
)

// Short is the reason as `autoui sim eval` writes it in each episode's
// "stop" field: "complete", "impossible", "repeated" and "unparsable" for
// Complete, Impossible, Repeated and Unparsable, the reason itself for the
// others ("max_steps", "no_effect").
func (r Reason) Short() string {
	switch r {
	case Complete:
		return "complete"
	case Impossible:
		return "impossible"
	case Repeated:
		return "repeated"
	case Unparsable:
		return "unparsable"
	}
	return string(r)
}

// DefaultRepeatLimit is Rules.RepeatLimit when it is 0.
const DefaultRepeatLimit = 3

// Rules configure when an episode stops, besides its step budget and an
// unparsable prediction, which always stops it.
type Rules struct {
	// RepeatLimit ends the episode when the model predicts the same action
	// this many times in a row; 0 means DefaultRepeatLimit.
	RepeatLimit int
	// OnNoEffect is what to do when an action leaves the screen unchanged
	// (screendiff.OnNoEffect*); "" means continue.
	OnNoEffect string
}

// Tracker applies Rules to the predictions and effects of one episode.
type Tracker struct {
	rules   Rules
	last    action.Action
	repeats int
}

// NewTracker starts tracking an episode.
func NewTracker(r Rules) *Tracker {
	if r.RepeatLimit <= 0 {
		r.RepeatLimit = DefaultRepeatLimit
	}
	return &Tracker{rules: r}
}

// Predicted judges the next parsed prediction before anything is performed:
// Repeated when it is the RepeatLimit-th identical prediction in a row (it
// must not be performed), Complete or Impossible for a status action, ""
// when the action is to be performed.
func (t *Tracker) Predicted(a action.Action) Reason {
	if t.repeats > 0 && t.last == a {
		t.repeats++
	} else {
		t.last, t.repeats = a, 1
	}
	if t.repeats >= t.rules.RepeatLimit {
		return Repeated
	}
	switch a.Type {
	case action.StatusTaskComplete:
		return Complete
	case action.StatusTaskImpossible:
		return Impossible
	}
	return ""
}

// Repeats is how many times in a row the last prediction was made.
func (t *Tracker) Repeats() int { return t.repeats }

// Skip forgets the last prediction, which was not performed (--confirm
// answered skip): the next one starts a new run of repeats.
func (t *Tracker) Skip() { t.last, t.repeats = action.Action{}, 0 }

// Retry says whether an action with this effect (screendiff.Effect*) is to
// be performed once more: the retry policy and no visible effect.
func (t *Tracker) Retry(effect string) bool {
	return effect == screendiff.EffectNone && t.rules.OnNoEffect == screendiff.OnNoEffectRetry
}

// Performed judges the final effect of a performed action (after any
// retry): NoEffect under the stop policy when the screen did not change, ""
// to go on.
func (t *Tracker) Performed(effect string) Reason {
	if effect == screendiff.EffectNone && t.rules.OnNoEffect == screendiff.OnNoEffectStop {
		return NoEffect
	}
	return ""
}
