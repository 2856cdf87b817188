// Package tasks is a synthetic, AITW-style task suite for the simulated
// phone: parameterized tasks in families (open an app, toggle a setting,
// search, scroll to an item, navigate, multi-step), each with a natural
// language goal, a success check on the phone's state and a scripted expert
// that solves it step by step through the same input path a model's actions
// take.
package tasks

import (
	"fmt"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/sim"
)

// Task families.
const (
	OpenApp       = "open_app"
	ToggleSetting = "toggle_setting"
	Search        = "search"
	ScrollOpen    = "scroll_open"
	Navigate      = "navigate"
	MultiStep     = "multi_step"
)

// Families lists every family, in a fixed order.
var Families = []string{OpenApp, ToggleSetting, Search, ScrollOpen, Navigate, MultiStep}

// Task is one generated task. The phone it runs on is generated from the
// same seed, so (family, seed) fully determines an episode.
type Task struct {
	Family   string
	Seed     int64
	Split    string // train, val or test; see SplitOf
	Goal     string // natural language, as AITW's goal_info
	MaxSteps int    // step budget for agents (about 2x the expert's length)
	setup    []goal // reached by the expert before the episode starts
	goals    []goal // all must hold for success; the expert solves them in order
}

// KnownFamily reports whether name is a task family.
func KnownFamily(name string) bool {
	for _, f := range Families {
		if f == name {
			return true
		}
	}
	return false
}

// Generate makes the task of a family for a seed. The family must be one of
// Families (an unknown family is a programmer error and panics; check user
// input with KnownFamily).
func Generate(family string, seed int64) Task {
	r := newRand(seed, family)
	c := sim.NewContent(seed)
	t := Task{Family: family, Seed: seed, Split: SplitOf(seed)}
	switch family {
	case OpenApp:
		genOpenApp(&t, r, c)
	case ToggleSetting:
		genToggle(&t, r, c)
	case Search:
		genSearch(&t, r, c)
	case ScrollOpen:
		genScrollOpen(&t, r, c)
	case Navigate:
		genNavigate(&t, r, c)
	case MultiStep:
		genMulti(&t, r, c)
	default:
		panic("tasks: unknown family " + family)
	}
	return t
}

// Options for the phone a task runs on; zero means 1080x2400.
type Options struct {
	Width, Height int
	// Animate gives the phone its animations (sim.Options.Animate).
	Animate bool
}

// NewPhone returns the task's phone in its start state.
func (t Task) NewPhone(o Options) (*sim.Phone, error) {
	p := sim.New(sim.Options{Width: o.Width, Height: o.Height, Seed: t.Seed, Animate: o.Animate})
	for _, g := range t.setup {
		for step := 0; ; step++ {
			if step == 40 {
				return nil, fmt.Errorf("task %s/%d: setup did not reach its start state", t.Family, t.Seed)
			}
			a, done := g.next(p)
			if done {
				break
			}
			Apply(p, a)
		}
	}
	return p, nil
}

// Success reports whether the phone's state satisfies the task.
func (t Task) Success(p *sim.Phone) bool {
	for _, g := range t.goals {
		if !g.ok(p) {
			return false
		}
	}
	return true
}

// Expert returns the scripted expert's next action for the phone's current
// state; STATUS_TASK_COMPLETE when it considers the task done.
func (t Task) Expert(p *sim.Phone) action.Action {
	for _, g := range t.goals {
		if a, done := g.next(p); !done {
			return a
		}
	}
	return complete
}

// Solve runs the expert on p until it declares completion or maxSteps
// actions were taken, and returns the actions (the final
// STATUS_TASK_COMPLETE included when reached).
func (t Task) Solve(p *sim.Phone, maxSteps int) []action.Action {
	var out []action.Action
	for len(out) < maxSteps {
		a := t.Expert(p)
		out = append(out, a)
		if a.Type == action.StatusTaskComplete {
			break
		}
		Apply(p, a)
	}
	return out
}

// Device is what Apply drives; *sim.Phone implements it, as does anything
// implementing the fakephone.Phone interface (package device/fakephone).
type Device interface {
	Size() (width, height int)
	Tap(x, y int)
	Swipe(x1, y1, x2, y2, durationMs int)
	Text(s string)
	KeyEvent(code int)
}

// SwipeMs is the swipe duration Apply gives the device, as adb's
// `input swipe` would take it.
const SwipeMs = 300

// Apply performs an action on a device through the same pixel gestures that
// ADB would perform. It reports whether the action ends the episode
// (STATUS_TASK_COMPLETE or STATUS_TASK_IMPOSSIBLE).
func Apply(d Device, a action.Action) (stop bool) {
	w, h := d.Size()
	return Perform(d, a.Gesture(w, h))
}

// Perform performs a gesture in device pixels; stop as Apply's.
func Perform(d Device, g action.Gesture) (stop bool) {
	switch g.Kind {
	case action.GestureTap:
		d.Tap(g.X1, g.Y1)
	case action.GestureSwipe:
		d.Swipe(g.X1, g.Y1, g.X2, g.Y2, SwipeMs)
	case action.GestureText:
		d.Text(g.Text)
	case action.GestureKey:
		d.KeyEvent(g.KeyCode)
	case action.GestureStop:
		return true
	}
	return false
}

// SplitOf assigns a seed to a split by a hash of the seed: about 80% train,
// 10% val, 10% test. Splitting by seed keeps every episode (phone and task)
// of a split out of the others.
func SplitOf(seed int64) string {
	switch mix(uint64(seed)) % 10 {
	case 8:
		return "val"
	case 9:
		return "test"
	}
	return "train"
}

// Seeds returns the first n non-negative seeds of a split, from start on.
func Seeds(split string, start int64, n int) []int64 {
	if split != "train" && split != "val" && split != "test" {
		return nil
	}
	var out []int64
	for s := start; len(out) < n; s++ {
		if SplitOf(s) == split {
			out = append(out, s)
		}
	}
	return out
}
