package score

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

var update = flag.Bool("update", false, "rewrite testdata/golden_report.json")

func loadFixture(t testing.TB) ([]aitw.Episode, *aitw.PredictionSet) {
	t.Helper()
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	eps, _, err := aitw.LoadEpisodes(files, aitw.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := aitw.ReadPredictions("../testdata/predictions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return eps, ps
}

// TestGoldenReport scores the fixture predictions (a known mix of right,
// near, far, wrong-type and missing steps written by scripts.aitw_fixtures)
// and compares the --json report with the committed one.
func TestGoldenReport(t *testing.T) {
	eps, ps := loadFixture(t)
	rep, results := Score(eps, ps.ByStep, Options{})
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "golden_report.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("report differs from %s (run with -update after checking):\n%s", golden, got)
	}
	// Cross-checks independent of the golden file.
	if len(results) != 55 || rep.Overall.Steps != 55 || rep.Overall.Episodes != 15 {
		t.Errorf("%d results, overall %+v", len(results), rep.Overall)
	}
	missing := 0
	for _, r := range results {
		if r.Missing {
			missing++
			if r.Match || r.TypeMatch {
				t.Errorf("missing step %s/%d scored right", r.EpisodeID, r.StepID)
			}
		}
	}
	if missing != rep.Overall.Missing || missing != 55-ps.Lines || missing == 0 {
		t.Errorf("missing %d, report %d, lines %d", missing, rep.Overall.Missing, ps.Lines)
	}
	var buf bytes.Buffer
	if err := WritePerStep(&buf, results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 55 || !strings.HasPrefix(lines[0], `{"episode_id":"`) || !strings.Contains(lines[0], `"type_match":`) {
		t.Errorf("per-step: %d lines, first %s", len(lines), lines[0])
	}
	buf.Reset()
	rep.WriteTable(&buf)
	if !strings.Contains(buf.String(), "web_shopping") || !strings.Contains(buf.String(), "overall") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestScoreRules(t *testing.T) {
	tap := func(y, x float64) action.Action {
		return action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: x}, Lift: action.Point{Y: y, X: x}}
	}
	typ := func(s string) action.Action {
		return action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: s}
	}
	back := action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint}
	eps := []aitw.Episode{
		{ID: "a", Subset: "general", Steps: []aitw.Step{
			{StepID: 0, Action: tap(0.5, 0.5)},
			{StepID: 1, Action: typ("Hello World")},
			{StepID: 2, Action: back},
		}},
		{ID: "b", Subset: "install", Steps: []aitw.Step{{StepID: 0, Action: back}}},
	}
	preds := map[aitw.StepKey]aitw.Prediction{
		{EpisodeID: "a", StepID: 0}: {Action: tap(0.55, 0.5)},
		{EpisodeID: "a", StepID: 1}: {Action: typ("hello")},
		// a/2 missing
		{EpisodeID: "b", StepID: 0}:   {Action: back},
		{EpisodeID: "zzz", StepID: 0}: {Action: back},
	}
	rep, _ := Score(eps, preds, Options{})
	g := rep.Subsets["general"]
	if !near(g.ScreenAccuracy, 100*2.0/3) || !near(g.EpisodeAccuracy, 100*2.0/3) || !near(g.ClickAccuracy, 100) || !near(g.TextAccuracy, 100) ||
		g.ScrollAccuracy != nil || g.Missing != 1 || g.Steps != 3 {
		t.Errorf("general %s", show(g))
	}
	in := rep.Subsets["install"]
	if !near(in.ScreenAccuracy, 100) || in.ClickAccuracy != nil {
		t.Errorf("install %+v", in)
	}
	if !near(rep.Overall.ScreenAccuracy, (100*2.0/3+100)/2) || !near(rep.Overall.ClickAccuracy, 100) || rep.Overall.ScrollAccuracy != nil {
		t.Errorf("overall %s", show(rep.Overall))
	}
	if rep.Unmatched != 1 || rep.Confusion[action.PressBack][0] != 1 || rep.Confusion[action.PressBack][action.PressBack] != 1 {
		t.Errorf("unmatched %d confusion %v", rep.Unmatched, rep.Confusion)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"scroll_accuracy":null`) || strings.Contains(string(b), "Unmatched") {
		t.Errorf("json %s", b)
	}
}

func show(m Metrics) string {
	b, _ := json.Marshal(m)
	return string(b)
}

func near(v *float64, want float64) bool { return v != nil && *v-want < 1e-9 && want-*v < 1e-9 }

// synth writes n steps of gold (in memory) and a predictions file.
func synth(tb testing.TB, n int) ([]aitw.Episode, string) {
	r := rand.New(rand.NewSource(1))
	var eps []aitw.Episode
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := 0; len(eps)*10 < n; i++ {
		ep := aitw.Episode{ID: fmt.Sprintf("%020d", r.Int63()), Subset: aitw.Subsets[i%5]}
		for s := 0; s < 10; s++ {
			y, x := r.Float64(), r.Float64()
			g := action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: x}, Lift: action.Point{Y: y, X: x}}
			boxes := []action.Box{{Y: float32(y) - 0.01, X: float32(x) - 0.01, H: 0.05, W: 0.1}, {Y: 0.1, X: 0.1, H: 0.05, W: 0.3}}
			ep.Steps = append(ep.Steps, aitw.Step{StepID: s, Action: g, Boxes: boxes})
			p := g
			p.Touch.Y = r.Float64()
			p.Lift = p.Touch
			enc.Encode(aitw.Prediction{EpisodeID: ep.ID, StepID: s, Action: p})
		}
		eps = append(eps, ep)
	}
	path := filepath.Join(tb.TempDir(), "pred.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return eps, path
}

// BenchmarkScore100k reads a 100k-line predictions file and scores it
// against 100k gold steps (gold already in memory).
func BenchmarkScore100k(b *testing.B) {
	eps, path := synth(b, 100000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ps, err := aitw.ReadPredictions(path)
		if err != nil {
			b.Fatal(err)
		}
		rep, _ := Score(eps, ps.ByStep, Options{})
		if rep.Overall.Steps != 100000 {
			b.Fatal(rep.Overall.Steps)
		}
	}
	b.ReportMetric(float64(100000*b.N)/b.Elapsed().Seconds(), "steps/s")
}

func TestSynthSmall(t *testing.T) {
	eps, path := synth(t, 100)
	ps, err := aitw.ReadPredictions(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := Score(eps, ps.ByStep, Options{})
	if rep.Overall.Steps != 100 || rep.Overall.Missing != 0 {
		t.Fatalf("%+v", rep.Overall)
	}
}
