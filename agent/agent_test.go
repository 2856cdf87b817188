package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// scripted is a fake predictor that answers from a list (repeating the last
// answer) and records the requests.
type scripted struct {
	mu      sync.Mutex
	answers []predict.Result
	reqs    []predict.Request
	hook    func(i int) // called before answering request i
}

func (s *scripted) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, s, reqs)
}

func (s *scripted) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	s.mu.Lock()
	i := len(s.reqs)
	req.History = append([]action.Action(nil), req.History...)
	s.reqs = append(s.reqs, req)
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		hook(i)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := s.answers[min(i, len(s.answers)-1)]
	return &r, nil
}

func res(a action.Action) predict.Result {
	return predict.Result{Action: a, Plan: []action.Type{a.Type}, Raw: "Action Plan: [" + a.Type.String() + "] ; Action Decision: " + a.String()}
}

var (
	tapA    = action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}
	tapB    = action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.25, X: 0.75}, Lift: action.Point{Y: 0.25, X: 0.75}}
	swipeUp = action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}
	typeA   = action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "coffee & cake; $(reboot)"}
	back    = action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint}
	home    = action.Action{Type: action.PressHome, Touch: action.NoPoint, Lift: action.NoPoint}
	enter   = action.Action{Type: action.PressEnter, Touch: action.NoPoint, Lift: action.NoPoint}
	done    = action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	nope    = action.Action{Type: action.StatusTaskImpossible, Touch: action.NoPoint, Lift: action.NoPoint}
)

// smallPhone is a 108x240 screen (cheap to encode) that changes color on
// every input, so each step sees a new screen and settling is exercised.
func smallPhone(t *testing.T) *fakephone.RecordingPhone {
	t.Helper()
	p := phonetest.Recording(t, 108, 240)
	n := 0
	p.OnEvent = func(fakephone.Event) {
		n++
		_ = p.SetScreen(fakephone.SolidPNG(108, 240, color.RGBA{uint8(20 * n), 100, 100, 255}))
	}
	return p
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAgentFullEpisode(t *testing.T) {
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	pred := &scripted{answers: []predict.Result{res(tapA), res(swipeUp), res(typeA), res(back), res(home), res(enter), res(done)}}
	out := t.TempDir()
	var log strings.Builder
	sum, err := New(d, pred, quick(Options{Goal: "order coffee", OutDir: out, Log: &log})).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopComplete || sum.Steps != 7 || sum.Dispatched != 6 {
		t.Fatalf("summary = %+v", sum)
	}
	ev := phoneOf(fake).Events()
	want := []fakephone.Event{
		{Kind: fakephone.EventTap, X1: 54, Y1: 120},
		{Kind: fakephone.EventSwipe, X1: 54, Y1: 192, X2: 54, Y2: 48, DurationMs: 300},
		{Kind: fakephone.EventText, Text: "coffee & cake; $(reboot)"},
		{Kind: fakephone.EventKey, KeyCode: 4}, {Kind: fakephone.EventKey, KeyCode: 3}, {Kind: fakephone.EventKey, KeyCode: 66},
	}
	typed := ""
	var got []fakephone.Event
	for _, e := range ev {
		if e.Kind == fakephone.EventText {
			typed += e.Text
			if len(got) > 0 && got[len(got)-1].Kind == fakephone.EventText {
				continue
			}
			e.Text = ""
		}
		got = append(got, e)
	}
	want[2].Text = ""
	if typed != typeA.Text || len(got) != len(want) {
		t.Fatalf("events = %+v", ev)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, sc := range fake.Shell() {
		if len(sc.Hazards) > 0 || len(sc.Commands) != 1 {
			t.Errorf("shell line %q: hazards %q, commands %q", sc.Line, sc.Hazards, sc.Commands)
		}
	}
	// The predictor saw its own previous actions, and each step a new screen.
	for i, r := range pred.reqs {
		if len(r.History) != i || r.Goal != "order coffee" || r.Screen == nil {
			t.Fatalf("request %d: history %d, goal %q", i, len(r.History), r.Goal)
		}
		if i > 0 && r.History[i-1] != pred.answers[i-1].Action {
			t.Errorf("request %d: last history %v", i, r.History[i-1])
		}
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 7 {
		t.Fatalf("%d step lines", len(steps))
	}
	for i, s := range steps {
		for _, k := range []string{"goal", "history", "raw", "action", "commands", "timings", "screenshot", "annotated"} {
			if _, ok := s[k]; !ok {
				t.Errorf("step %d lacks %q: %v", i, k, s)
			}
		}
		for _, k := range []string{"screenshot", "annotated"} {
			if _, err := os.Stat(filepath.Join(out, s[k].(string))); err != nil {
				t.Error(err)
			}
		}
		if i < 6 && s["settled"] != true {
			t.Errorf("step %d not settled: %v", i, s["settled"])
		}
	}
	if c := steps[0]["commands"].([]any); len(c) != 1 || c[0] != "input tap 54 120" {
		t.Errorf("step 0 commands = %v", c)
	}
	aw := readLines(t, filepath.Join(out, "android_world.jsonl"))
	wantAW := []string{
		`{"action_type":"click","x":54,"y":120}`,
		`{"action_type":"scroll","direction":"down"}`,
		`{"action_type":"input_text","text":"coffee & cake; $(reboot)"}`, // a swipe, not a tap, came just before
		`{"action_type":"navigate_back"}`,
		`{"action_type":"navigate_home"}`,
		`{"action_type":"keyboard_enter"}`,
		`{"action_type":"status","goal_status":"complete"}`,
	}
	raw, _ := os.ReadFile(filepath.Join(out, "android_world.jsonl"))
	if strings.TrimSpace(string(raw)) != strings.Join(wantAW, "\n") || len(aw) != 7 {
		t.Errorf("android_world.jsonl =\n%s\nwant\n%s", raw, strings.Join(wantAW, "\n"))
	}
	s := readSummary(t, out)
	if s["stop_reason"] != string(StopComplete) || s["steps"] != 7.0 {
		t.Errorf("summary.json = %v", s)
	}
	for _, k := range []string{"total_ms", "stage_ms"} {
		if _, ok := s[k]; !ok {
			t.Errorf("summary lacks %s", k)
		}
	}
	if !strings.Contains(log.String(), "input tap 54 120") {
		t.Errorf("log = %s", log.String())
	}
}

func TestAgentDryRunSendsNothing(t *testing.T) {
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	pred := &scripted{answers: []predict.Result{res(tapA), res(typeA), res(tapB), res(done)}}
	var log strings.Builder
	out := t.TempDir()
	sum, err := New(d, pred, quick(Options{Goal: "g", DryRun: true, Log: &log, OutDir: out, NoAnnotate: true})).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopComplete || sum.Steps != 4 || sum.Dispatched != 0 || !sum.DryRun {
		t.Fatalf("summary = %+v", sum)
	}
	if len(fake.Inputs()) != 0 || len(phoneOf(fake).Events()) != 0 {
		t.Fatalf("dry run sent input: %q", fake.Inputs())
	}
	for _, want := range []string{"input tap 54 120", "input text 'coffee%s&%scake;%s$(reboot)'", "input tap 81 60"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if len(pred.reqs[3].History) != 3 {
		t.Errorf("dry run history = %v", pred.reqs[3].History)
	}
	if _, err := os.Stat(filepath.Join(out, "android_world.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote android_world.jsonl (%v): nothing was performed", err)
	}
	if strings.Contains(log.String(), "->") {
		t.Errorf("a dry run logged a sent command:\n%s", log.String())
	}
}

func TestAgentStopsOnRepeatedAction(t *testing.T) {
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	pred := &scripted{answers: []predict.Result{res(tapB), res(tapA)}} // then tapA forever
	out := t.TempDir()
	sum, err := New(d, pred, quick(Options{Goal: "g", OutDir: out})).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopRepeated || sum.Steps != 4 || sum.Dispatched != 3 {
		t.Fatalf("summary = %+v", sum)
	}
	if n := len(phoneOf(fake).Events()); n != 3 {
		t.Fatalf("%d taps sent, want 3 (the third identical one is not sent)", n)
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if steps[3]["dispatched"] != false {
		t.Errorf("last step = %v", steps[3])
	}
	if !strings.Contains(sum.Error, "3 times in a row") {
		t.Errorf("error = %q", sum.Error)
	}
}

func TestAgentStopsOnUnparsableOutput(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	bad := predict.Result{Raw: "Action Plan: [DUAL_POINT] ; Action Decision: garbage", ParseErr: errors.New("no action_type")}
	pred := &scripted{answers: []predict.Result{res(tapA), bad}}
	out := t.TempDir()
	sum, err := New(d, pred, quick(Options{Goal: "g", OutDir: out})).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopUnparsable || !strings.Contains(sum.Error, "does not parse") || !strings.Contains(sum.Error, "no action_type") {
		t.Fatalf("summary = %+v", sum)
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 2 || steps[1]["parse_error"] != "no action_type" || steps[1]["raw"] != bad.Raw {
		t.Fatalf("steps = %v", steps)
	}
}

func TestAgentStepBudgetAndImpossible(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	sum, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(tapB)}}, quick(Options{Goal: "g", MaxSteps: 2})).Run(context.Background())
	if err != nil || sum.StopReason != StopMaxSteps || sum.Steps != 2 {
		t.Fatalf("budget: %+v, %v", sum, err)
	}
	sum, err = New(d, &scripted{answers: []predict.Result{res(nope)}}, quick(Options{Goal: "g"})).Run(context.Background())
	if err != nil || sum.StopReason != StopImpossible || sum.Steps != 1 {
		t.Fatalf("impossible: %+v, %v", sum, err)
	}
}

func TestAgentDeviceDisconnectsMidEpisode(t *testing.T) {
	inputs := 0
	var mu sync.Mutex
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t), DropWhen: func(line string) bool {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(line, "input") {
			inputs++
		}
		return inputs == 3 // the phone is unplugged during the third action
	}})
	pred := &scripted{answers: []predict.Result{res(tapA), res(tapB), res(swipeUp), res(tapA)}}
	out := t.TempDir()
	sum, err := New(d, pred, quick(Options{Goal: "g", OutDir: out})).Run(context.Background())
	if err == nil {
		t.Fatalf("no error after the device dropped; summary %+v", sum)
	}
	if !fake.Dropped() || !strings.Contains(err.Error(), fake.Serial()) || !strings.Contains(err.Error(), "step 2") {
		t.Fatalf("err = %v", err)
	}
	if sum.StopReason != StopError || sum.Error != err.Error() {
		t.Fatalf("summary = %+v", sum)
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 3 || steps[0]["dispatched"] != true || steps[1]["dispatched"] != true || steps[2]["error"] == nil {
		t.Fatalf("steps = %v", steps)
	}
	if s := readSummary(t, out); s["stop_reason"] != string(StopError) || s["steps"] != 3.0 {
		t.Fatalf("summary.json = %v", s)
	}
}

func TestAgentInterruptKeepsTrajectory(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pred := &scripted{answers: []predict.Result{res(tapA), res(tapB), res(swipeUp)}, hook: func(i int) {
		if i == 2 {
			cancel() // Ctrl-C while the model thinks
		}
	}}
	out := t.TempDir()
	sum, err := New(d, pred, quick(Options{Goal: "g", OutDir: out})).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopInterrupted || sum.Dispatched != 2 {
		t.Fatalf("summary = %+v", sum)
	}
	if n := len(readLines(t, filepath.Join(out, "steps.jsonl"))); n != 3 {
		t.Fatalf("%d step lines, want 3 (2 done + the interrupted one)", n)
	}
	if s := readSummary(t, out); s["stop_reason"] != string(StopInterrupted) {
		t.Fatalf("summary.json = %v", s)
	}
}

func TestAgentConfirm(t *testing.T) {
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	pred := &scripted{answers: []predict.Result{res(tapA), res(tapB), res(back), res(home)}}
	answers := []Decision{Proceed, Skip, Proceed, Quit}
	var asked []string
	confirm := func(_ context.Context, s *Step) (Decision, error) {
		asked = append(asked, strings.Join(s.Commands, ";"))
		return answers[len(asked)-1], nil
	}
	sum, err := New(d, pred, quick(Options{Goal: "g", Confirm: confirm})).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.StopReason != StopUserQuit || sum.Dispatched != 2 {
		t.Fatalf("summary = %+v", sum)
	}
	if got := strings.Join(asked, " | "); got != "input tap 54 120 | input tap 81 60 | input keyevent 4 | input keyevent 3" {
		t.Fatalf("asked %q", got)
	}
	ev := phoneOf(fake).Events()
	if len(ev) != 2 || ev[0].Kind != fakephone.EventTap || ev[1].KeyCode != 4 {
		t.Fatalf("events = %+v", ev)
	}
	if len(pred.reqs[2].History) != 1 { // the skipped tap is not history
		t.Fatalf("history after a skip = %v", pred.reqs[2].History)
	}
}

// changingPhone returns a different screen on every capture.
type changingPhone struct {
	*fakephone.RecordingPhone
	mu sync.Mutex
	n  int
}

func (p *changingPhone) Screencap() ([]byte, error) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	return fakephone.SolidPNG(108, 240, color.RGBA{uint8(40 * n), 200, uint8(n >> 8), 255}), nil
}

func TestAgentSettleTimeout(t *testing.T) {
	phone := &changingPhone{RecordingPhone: phonetest.Recording(t, 108, 240)}
	_, d := fakeDevice(t, fakephone.Options{Phone: phone})
	out := t.TempDir()
	// A 1 ns budget: the first differing pair ends the wait, unsettled.
	sum, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(done)}}, quick(Options{Goal: "g", OutDir: out, SettleTimeout: 1})).Run(context.Background())
	if err != nil || sum.StopReason != StopComplete {
		t.Fatalf("%+v, %v", sum, err)
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if steps[0]["settled"] != false || sum.SettleTimeouts != 1 || readSummary(t, out)["settle_timeouts"] != 1.0 {
		t.Fatalf("settled = %v, summary %+v", steps[0]["settled"], sum)
	}
}

// quick drops the minimum settle wait and asks for two matching captures,
// so tests on the fake device run fast; tests of settling set their own.
func quick(o Options) Options {
	if o.SettleMin == 0 {
		o.SettleMin = -1
	}
	if o.StableFrames == 0 {
		o.StableFrames = 2
	}
	return o
}

// TestAgentExportsAnActionSentBeforeAFailedSettle: the tap reached the
// phone, then the link fell while waiting for the screen; android_world.jsonl
// must still hold the click (a replay without it would not reach the same
// state).
func TestAgentExportsAnActionSentBeforeAFailedSettle(t *testing.T) {
	var mu sync.Mutex
	tapped := false
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t), DropWhen: func(line string) bool {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(line, "input") {
			tapped = true
		}
		return tapped && strings.Contains(line, "screencap")
	}})
	out := t.TempDir()
	_, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(done)}}, quick(Options{Goal: "g", OutDir: out})).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "settle") {
		t.Fatalf("err = %v", err)
	}
	if !fake.Dropped() {
		t.Fatal("the device did not drop")
	}
	steps := readLines(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 1 || steps[0]["dispatched"] != true || steps[0]["error"] == nil {
		t.Fatalf("steps = %v", steps)
	}
	aw := readLines(t, filepath.Join(out, "android_world.jsonl"))
	if len(aw) != 1 || aw[0]["action_type"] != "click" {
		t.Fatalf("android_world.jsonl = %v, want the click that was sent", aw)
	}
}

// A point the model put off the screen is tapped at the screen's edge, and
// joins the history as tapped: the engine refuses a history point outside
// [0, 1], so the model's own words would have stopped the episode.
func TestAgentHistoryHoldsTheActionPerformed(t *testing.T) {
	fake, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	off := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 1.5, X: -0.2}, Lift: action.Point{Y: 1.5, X: -0.2}}
	pred := &scripted{answers: []predict.Result{res(off), res(done)}}
	sum, err := New(d, pred, quick(Options{Goal: "g", NoAnnotate: true})).Run(context.Background())
	if err != nil || sum.StopReason != StopComplete {
		t.Fatal(sum, err)
	}
	if ev := phoneOf(fake).Events(); len(ev) != 1 || ev[0].Kind != fakephone.EventTap || ev[0].X1 != 0 || ev[0].Y1 != 239 {
		t.Errorf("events %+v", ev)
	}
	h := pred.reqs[1].History
	want := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 1, X: 0}, Lift: action.Point{Y: 1, X: 0}}
	if len(h) != 1 || h[0] != want || h[0].Validate() != nil {
		t.Errorf("history %+v, want %+v", h, want)
	}
}
