package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
)

// AndroidWorld's input_text taps its (x, y) before typing and presses Enter
// after: it takes a tap only from the step just before, and the Enter that
// follows it is not written again.
func TestAWExportConventions(t *testing.T) {
	tap := func(x, y int) GestureRecord { return GestureRecord{Kind: "tap", X1: x, Y1: y} }
	none := GestureRecord{Kind: "key"}
	typed := GestureRecord{Kind: "text", Text: typeA.Text}
	// the model's text folded to ASCII on the device: the file says what was typed
	cafe := action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "café crème"}
	steps := []struct {
		a action.Action
		g GestureRecord
	}{
		{tapA, tap(54, 120)}, {typeA, typed}, {enter, none}, // tap, type, enter: enter merged
		{back, none}, {typeA, typed}, // no tap just before: no coordinates
		{enter, none}, {enter, none}, // the second Enter is a real one
		{tapB, tap(81, 60)}, {swipeUp, GestureRecord{Kind: "swipe"}}, {typeA, typed},
		{cafe, GestureRecord{Kind: "text", Text: "cafe creme"}},
		{done, GestureRecord{Kind: "stop"}},
	}
	want := []string{
		`{"action_type":"click","x":54,"y":120}`,
		`{"action_type":"input_text","x":54,"y":120,"text":"coffee & cake; $(reboot)"}`,
		`{"action_type":"navigate_back"}`,
		`{"action_type":"input_text","text":"coffee & cake; $(reboot)"}`,
		`{"action_type":"keyboard_enter"}`,
		`{"action_type":"click","x":81,"y":60}`,
		`{"action_type":"scroll","direction":"down"}`,
		`{"action_type":"input_text","text":"coffee & cake; $(reboot)"}`,
		`{"action_type":"input_text","text":"cafe creme"}`,
		`{"action_type":"status","goal_status":"complete"}`,
	}
	var c awContext
	var got []string
	for _, s := range steps {
		if line, ok := c.convert(s.a, s.g); ok {
			got = append(got, string(line))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// replayAW performs android_world.jsonl on a phone the way AndroidWorld's
// actuation does: click taps; input_text taps its (x, y), types and presses
// Enter; scroll swipes from the screen's center to the edge the content
// comes from; status does nothing.
func replayAW(t *testing.T, path string, p *sim.Phone) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, h := p.Size()
	cx, cy := w/2, h/2
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a AWAction
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch a.ActionType {
		case "click":
			p.Tap(*a.X, *a.Y)
		case "input_text":
			if a.X == nil {
				t.Fatalf("%q: AndroidWorld needs a target to focus", line)
			}
			p.Tap(*a.X, *a.Y)
			p.Text(a.Text)
			p.KeyEvent(66)
		case "scroll":
			ends := map[string][2]int{"down": {cx, 0}, "up": {cx, h}, "right": {0, cy}, "left": {w, cy}}
			e := ends[a.Direction]
			p.Swipe(cx, cy, e[0], e[1], 300)
		case "navigate_back":
			p.KeyEvent(4)
		case "navigate_home":
			p.KeyEvent(3)
		case "keyboard_enter":
			p.KeyEvent(66)
		case "status":
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// An episode played through adb on the simulated phone, exported and
// replayed with AndroidWorld's semantics on a fresh phone, ends in the same
// state. Episodes that scroll are left out: AndroidWorld's scroll is its own
// gesture (center to edge, half a screen) and moves the content by another
// amount than Auto-UI's fixed swipes, which no JSONAction can express.
func TestAWExportReplaysOnSim(t *testing.T) {
	for _, fam := range []string{tasks.Search, tasks.OpenApp, tasks.Navigate, tasks.MultiStep} {
		task := tasks.Generate(fam, 3)
		opts := tasks.Options{Width: 360, Height: 800}
		solver, err := task.NewPhone(opts)
		if err != nil {
			t.Fatal(err)
		}
		var answers []predict.Result
		for _, a := range task.Solve(solver, 40) {
			answers = append(answers, res(a))
		}
		played, err := task.NewPhone(opts)
		if err != nil {
			t.Fatal(err)
		}
		_, d := fakeDevice(t, fakephone.Options{Phone: played})
		out := t.TempDir()
		sum, err := New(d, &scripted{answers: answers}, quick(Options{Goal: task.Goal, OutDir: out, NoAnnotate: true, RepeatLimit: 100})).Run(context.Background())
		if err != nil || sum.StopReason != StopComplete || !task.Success(played) {
			t.Fatalf("%s: %+v, %v, success %v", fam, sum, err, task.Success(played))
		}
		replayed, err := task.NewPhone(opts)
		if err != nil {
			t.Fatal(err)
		}
		replayAW(t, filepath.Join(out, "android_world.jsonl"), replayed)
		if !task.Success(replayed) || replayed.Screen() != played.Screen() {
			t.Errorf("%s: replay ends on %+v (success %v), the episode on %+v", fam, replayed.Screen(), task.Success(replayed), played.Screen())
		}
	}
}
