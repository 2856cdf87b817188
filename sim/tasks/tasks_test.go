package tasks

import (
	"testing"

	"github.com/autoui/autoui/action"
)

// small renders cheaply; the layout is resolution independent.
var small = Options{Width: 360, Height: 800}

func TestExpertSolvesEveryFamily(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 15
	}
	for _, fam := range Families {
		t.Run(fam, func(t *testing.T) {
			total := 0
			for seed := int64(0); seed < int64(n); seed++ {
				task := Generate(fam, seed)
				p, err := task.NewPhone(small)
				if err != nil {
					t.Fatal(err)
				}
				if task.Success(p) {
					t.Errorf("seed %d %q: already solved at the start", seed, task.Goal)
					continue
				}
				acts := task.Solve(p, 60)
				total += len(acts)
				last := acts[len(acts)-1]
				if last.Type != action.StatusTaskComplete {
					t.Errorf("seed %d %q: expert did not finish in 60 steps; screen %+v", seed, task.Goal, p.Screen())
					continue
				}
				if !task.Success(p) {
					t.Errorf("seed %d %q: expert finished but the task is not solved; screen %+v", seed, task.Goal, p.Screen())
				}
				if len(acts) > task.MaxSteps {
					t.Errorf("seed %d %q: expert took %d steps, budget %d", seed, task.Goal, len(acts), task.MaxSteps)
				}
			}
			t.Logf("%s: %d tasks, %.1f steps on average", fam, n, float64(total)/float64(n))
		})
	}
}

// One seed, one task, every time: across many seeds, since a draw in Go's
// random map order (a browser query with two parts) differs only sometimes.
func TestGenerateIsDeterministic(t *testing.T) {
	for _, fam := range Families {
		for seed := int64(0); seed < 300; seed++ {
			a := Generate(fam, seed)
			for range 3 {
				if b := Generate(fam, seed); a.Goal != b.Goal || a.Split != b.Split || a.MaxSteps != b.MaxSteps {
					t.Fatalf("%s seed %d: %q then %q", fam, seed, a.Goal, b.Goal)
				}
			}
		}
	}
}

func TestGoalsVary(t *testing.T) {
	for _, fam := range Families {
		seen := map[string]bool{}
		for s := int64(0); s < 40; s++ {
			seen[Generate(fam, s).Goal] = true
		}
		min := 20
		if fam == Navigate { // goals without parameters, like AITW's "Go to the home screen"
			min = 10
		}
		if len(seen) < min {
			t.Errorf("%s: only %d distinct goals in 40 seeds", fam, len(seen))
		}
	}
}

func TestSplits(t *testing.T) {
	count := map[string]int{}
	for s := int64(0); s < 10000; s++ {
		count[SplitOf(s)]++
	}
	if count["train"] < 7600 || count["val"] < 800 || count["test"] < 800 {
		t.Errorf("split sizes %v", count)
	}
	for _, split := range []string{"train", "val", "test"} {
		for _, s := range Seeds(split, 0, 50) {
			if SplitOf(s) != split || Generate(OpenApp, s).Split != split {
				t.Errorf("seed %d not in %s", s, split)
			}
		}
	}
	if Seeds("nope", 0, 3) != nil {
		t.Error("unknown split gave seeds")
	}
}

func TestSuccessIsStateBased(t *testing.T) {
	// A toggle task is solved by flipping the switch, however it is reached.
	task := Generate(ToggleSetting, 7)
	p, err := task.NewPhone(small)
	if err != nil {
		t.Fatal(err)
	}
	if task.Success(p) {
		t.Fatal("solved at start")
	}
	task.Solve(p, 40)
	if !task.Success(p) {
		t.Fatal("not solved after expert")
	}
	// Undo by tapping the same switch: no longer solved.
	for _, e := range p.Annotations() {
		if len(e.ID) > 7 && e.ID[:7] == "toggle:" && !e.Partial {
			g := task.goals[0].(settingIs)
			if e.ID == "toggle:"+g.id {
				Apply(p, tap(e))
			}
		}
	}
	if task.Success(p) {
		t.Fatal("still solved after flipping back")
	}
}

func TestKnownFamily(t *testing.T) {
	if !KnownFamily(Search) || KnownFamily("fly") {
		t.Fatal("KnownFamily")
	}
}
