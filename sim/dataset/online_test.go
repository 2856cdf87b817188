package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
	"github.com/autoui/autoui/sim/tasks"
	"github.com/autoui/autoui/stoprule"
)

// replayPredictor replays fixed answers.
type replayPredictor struct {
	raw []string
	i   int
}

func (r *replayPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, r, reqs)
}

func (r *replayPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	if r.i >= len(r.raw) {
		return nil, errors.New("no more answers")
	}
	raw := r.raw[r.i]
	r.i++
	out, err := action.ParseOutput(raw)
	if err != nil {
		return &predict.Result{Raw: raw, ParseErr: err}, nil
	}
	return &predict.Result{Raw: raw, Action: out.Action, Plan: out.Plan}, nil
}

func answer(a action.Action) string { return action.Target([]action.Type{a.Type}, a) }

// The loop performs the model's actions on the phone and reads success
// from the phone's state, whatever the model claims.
func TestRunOnlineReplaysExpert(t *testing.T) {
	task := tasks.Generate(tasks.OpenApp, 5)
	p, err := task.NewPhone(tasks.Options{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	var raw []string
	for _, a := range task.Solve(p, 20) {
		raw = append(raw, answer(a))
	}
	ep, err := RunOnline(context.Background(), &replayPredictor{raw: raw}, task, OnlineOptions{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	if !ep.Success || ep.Stop != stoprule.Complete.Short() || ep.Steps != len(raw) {
		t.Fatalf("expert replay: %+v", ep)
	}
	// Episode files keep their words: "complete", not run's "task_complete".
	if b, err := json.Marshal(ep); err != nil || !strings.Contains(string(b), `"steps":`+strconv.Itoa(len(raw))+`,"stop":"complete","effects":`) {
		t.Fatalf("episode JSON %s, %v", b, err)
	}

	// Claiming completion at once is not success.
	done := answer(action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint})
	ep, err = RunOnline(context.Background(), &replayPredictor{raw: []string{done}}, task, OnlineOptions{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Success || ep.Stop != stoprule.Complete.Short() || ep.Steps != 1 {
		t.Fatalf("premature completion: %+v", ep)
	}
}

func TestRunOnlineStops(t *testing.T) {
	task := tasks.Generate(tasks.Navigate, 2)
	back := answer(action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint})
	ep, err := RunOnline(context.Background(), &replayPredictor{raw: []string{back, back, back}}, task, OnlineOptions{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Stop != stoprule.Repeated.Short() || ep.Steps != 3 {
		t.Fatalf("repeats: %+v", ep)
	}
	ep, err = RunOnline(context.Background(), &replayPredictor{raw: []string{"Action Plan: [DUAL"}}, task, OnlineOptions{Width: testW, Height: testH})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Stop != stoprule.Unparsable.Short() || ep.Success {
		t.Fatalf("unparsable: %+v", ep)
	}
	home := answer(action.Action{Type: action.PressHome, Touch: action.NoPoint, Lift: action.NoPoint})
	ep, err = RunOnline(context.Background(), &replayPredictor{raw: []string{home, back}}, task, OnlineOptions{Width: testW, Height: testH, MaxSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Stop != stoprule.MaxSteps.Short() || ep.Steps != 2 {
		t.Fatalf("max steps: %+v", ep)
	}
}

func TestSummarize(t *testing.T) {
	eps := []Episode{
		{Family: tasks.Search, Success: true, Steps: 4}, {Family: tasks.OpenApp, Success: false, Steps: 2},
		{Family: tasks.OpenApp, Success: true, Steps: 4},
	}
	s := Summarize(eps)
	if len(s) != 3 || s[0].Family != tasks.OpenApp || s[0].Rate != 0.5 || s[0].MeanSteps != 3 || s[1].Family != tasks.Search ||
		s[2].Family != "all" || s[2].Successes != 2 || s[2].Tasks != 3 {
		t.Fatalf("%+v", s)
	}
	var b strings.Builder
	if err := WriteTable(&b, s); err != nil || !strings.Contains(b.String(), "open_app") {
		t.Fatalf("table %q, %v", b.String(), err)
	}
}

// defaultBundleTasks are unseen (test-split) tasks the default bundle
// solves online; see docs/sim.md for its success rate over many.
var defaultBundleTasks = []struct {
	family string
	seed   int64
}{{tasks.Navigate, 17}, {tasks.OpenApp, 34}}

// The committed default bundle, in process against the simulator: an
// unseen test-split task is completed end to end (screen -> vision ->
// prompt -> decode -> parse -> gesture -> new screen -> ... -> success).
func TestDefaultBundleCompletesTask(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "models", "default")
	b, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := engine.NewPredictor(b, engine.Options{Session: engine.SessionOptions{IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range defaultBundleTasks {
		task := tasks.Generate(c.family, c.seed)
		if task.Split != "test" {
			t.Fatalf("%s/%d is not a test task", c.family, c.seed)
		}
		ep, err := RunOnline(context.Background(), p, task, OnlineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ep.Success || ep.Stop != stoprule.Complete.Short() {
			t.Errorf("%s/%d %q: %+v; outputs %q", c.family, c.seed, task.Goal, ep, ep.Raw)
		}
	}
}

// The screen comparison never calls an expert action ineffective: every
// action of the scripted expert changes the screen, on every family.
func TestRunOnlineExpertActionsHaveEffect(t *testing.T) {
	for _, fam := range tasks.Families {
		for _, seed := range tasks.Seeds("test", 0, 3) {
			task := tasks.Generate(fam, seed)
			p, err := task.NewPhone(tasks.Options{Width: testW, Height: testH})
			if err != nil {
				t.Fatal(err)
			}
			var raw []string
			for _, a := range task.Solve(p, 40) {
				raw = append(raw, answer(a))
			}
			ep, err := RunOnline(context.Background(), &replayPredictor{raw: raw}, task, OnlineOptions{Width: testW, Height: testH, RepeatLimit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !ep.Success || ep.Effects.None != 0 || ep.Effects.Unknown != 0 || ep.Effects.Changed != len(raw)-1 {
				t.Errorf("%s/%d: success %v, effects %+v over %d actions", fam, seed, ep.Success, ep.Effects, len(raw)-1)
			}
		}
	}
}

// A tap on nothing changes nothing: counted as no effect; retry sends it
// once more, stop ends the episode there.
func TestRunOnlineNoEffectPolicies(t *testing.T) {
	task := tasks.Generate(tasks.Navigate, 2)
	back := answer(action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint})
	home := answer(action.Action{Type: action.PressHome, Touch: action.NoPoint, Lift: action.NoPoint})
	done := answer(action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint})
	// On the home screen HOME and BACK change nothing.
	script := []string{home, back, home, done}
	for _, c := range []struct {
		policy      string
		steps, none int
		retried     int
		stop        string
	}{
		{"continue", 4, 3, 0, stoprule.Complete.Short()},
		{"retry", 4, 3, 3, stoprule.Complete.Short()},
		{"stop", 1, 1, 0, stoprule.NoEffect.Short()},
	} {
		ep, err := RunOnline(context.Background(), &replayPredictor{raw: script}, task, OnlineOptions{Width: testW, Height: testH, OnNoEffect: c.policy})
		if err != nil {
			t.Fatal(err)
		}
		if ep.Steps != c.steps || ep.Effects.None != c.none || ep.Effects.Retried != c.retried || ep.Stop != c.stop {
			t.Errorf("%s: %+v", c.policy, ep)
		}
	}
}
