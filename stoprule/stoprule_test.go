package stoprule

import (
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/screendiff"
)

// The words are in users' files: summary.json (the reason) and the episodes
// of `autoui sim eval` (Short). They must not change.
func TestWords(t *testing.T) {
	for _, c := range []struct {
		r           Reason
		word, short string
	}{
		{Complete, "task_complete", "complete"},
		{Impossible, "task_impossible", "impossible"},
		{MaxSteps, "max_steps", "max_steps"},
		{Repeated, "repeated_action", "repeated"},
		{NoEffect, "no_effect", "no_effect"},
		{Unparsable, "unparsable_output", "unparsable"},
		{DryRunRepeat, "dry_run_repeat", "dry_run_repeat"},
		{Interrupted, "interrupted", "interrupted"},
		{UserQuit, "user_quit", "user_quit"},
		{Error, "error", "error"},
	} {
		if string(c.r) != c.word || c.r.Short() != c.short {
			t.Errorf("%q: short %q, want %q / %q", c.r, c.r.Short(), c.word, c.short)
		}
	}
}

func TestTracker(t *testing.T) {
	back := action.Action{Type: action.PressBack}
	home := action.Action{Type: action.PressHome}
	tr := NewTracker(Rules{})
	for i, want := range []Reason{"", "", Repeated} {
		if got := tr.Predicted(back); got != want || tr.Repeats() != i+1 {
			t.Fatalf("back #%d: %q (repeats %d), want %q", i+1, got, tr.Repeats(), want)
		}
	}

	tr = NewTracker(Rules{RepeatLimit: 2})
	if tr.Predicted(back) != "" || tr.Predicted(home) != "" || tr.Predicted(back) != "" {
		t.Fatal("alternating actions are no repeat")
	}
	tr.Skip()
	if tr.Predicted(back) != "" || tr.Repeats() != 1 {
		t.Fatal("a skipped prediction still counts")
	}
	if tr.Predicted(back) != Repeated {
		t.Fatal("RepeatLimit 2")
	}

	tr = NewTracker(Rules{})
	if tr.Predicted(action.Action{Type: action.StatusTaskComplete}) != Complete ||
		tr.Predicted(action.Action{Type: action.StatusTaskImpossible}) != Impossible {
		t.Fatal("status actions")
	}

	for _, c := range []struct {
		policy, effect string
		retry          bool
		stop           Reason
	}{
		{"", screendiff.EffectNone, false, ""},
		{screendiff.OnNoEffectContinue, screendiff.EffectNone, false, ""},
		{screendiff.OnNoEffectRetry, screendiff.EffectNone, true, ""},
		{screendiff.OnNoEffectRetry, screendiff.EffectChanged, false, ""},
		{screendiff.OnNoEffectStop, screendiff.EffectNone, false, NoEffect},
		{screendiff.OnNoEffectStop, screendiff.EffectUnknown, false, ""},
	} {
		tr := NewTracker(Rules{OnNoEffect: c.policy})
		if tr.Retry(c.effect) != c.retry || tr.Performed(c.effect) != c.stop {
			t.Errorf("%q/%q: retry %v, stop %q", c.policy, c.effect, tr.Retry(c.effect), tr.Performed(c.effect))
		}
	}
}
