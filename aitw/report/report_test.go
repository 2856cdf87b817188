package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/score"
)

func TestHTMLReport(t *testing.T) {
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
	rep, results := score.Score(eps, ps.ByStep, score.Options{})
	right, wrong := Sample(results, 3, 1)
	if len(right) != 3 || len(wrong) != 3 {
		t.Fatalf("sample %d right %d wrong", len(right), len(wrong))
	}
	r2, w2 := Sample(results, 3, 1)
	if r2[0] != right[0] || w2[2] != wrong[2] {
		t.Error("sampling not reproducible")
	}
	rs, ws, err := Screens(files, aitw.ReadOptions{}, right, wrong)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(rs, ws...) {
		if s.Image == nil || s.Goal == "" {
			t.Fatalf("no screen for %s/%d", s.Result.EpisodeID, s.Result.StepID)
		}
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep, rs, ws, Options{Title: "fixture <report>", Notes: []string{"gold: fixtures"}}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"<!DOCTYPE html>", "fixture &lt;report&gt;", "web_shopping", "overall", "DUAL_POINT",
		"missing / unparsed", `class="diag"`, "<style>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(html, `src="data:image/png;base64,`); n != 6 {
		t.Errorf("%d inline screens, want 6", n)
	}
	// Self-contained: no external references.
	for _, bad := range []string{"http://", "https://", `src="/`, "<link", "<script"} {
		if strings.Contains(html, bad) {
			t.Errorf("report references %q", bad)
		}
	}
}
