package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalScoreCommand runs `autoui eval score` on the AITW fixtures and
// checks the files it writes and that its JSON equals the committed golden
// report of aitw/score.
func TestEvalScoreCommand(t *testing.T) {
	dir := t.TempDir()
	perStep := filepath.Join(dir, "steps.jsonl")
	html := filepath.Join(dir, "report.html")
	stdout := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	err := runEval(context.Background(), []string{"score", "--gold", "../../aitw/testdata/records",
		"--pred", "../../aitw/testdata/predictions.jsonl", "--json", "--per-step", perStep, "--html", html, "--html-samples", "2"})
	w.Close()
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.NewDecoder(r).Decode(&got); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("../../aitw/score/testdata/golden_report.json")
	json.Unmarshal(b, &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("eval score --json:\n%s\nwant\n%s", gb, wb)
	}
	steps, _ := os.ReadFile(perStep)
	if n := strings.Count(string(steps), "\n"); n != 55 {
		t.Errorf("per-step lines %d", n)
	}
	page, _ := os.ReadFile(html)
	if strings.Count(string(page), "data:image/png;base64,") != 4 {
		t.Errorf("html report has no screens")
	}
}

func TestEvalFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"score", "--pred", "x.jsonl"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", "x", "--split", "test"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", "x", "--subset", "nope"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--shard", "3/3"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--history", "oracle"},
		{"frobnicate"},
	} {
		if err := runEval(context.Background(), args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// eval run then eval score, end to end on the fixture records with the real
// tiny bundle; a second run resumes (predicts nothing new) and reuses the
// vision feature cache.
func TestEvalRunThenScoreWithTinyBundle(t *testing.T) {
	out := t.TempDir()
	data := "../../aitw/testdata/records/general"
	run := func() string {
		s, err := captureStdout(t, func() error {
			return runEval(context.Background(), []string{"run", "--model", tinyBundle, "--data", data, "--out", out})
		})
		if err != nil {
			t.Fatalf("eval run: %v\n%s", err, s)
		}
		return s
	}
	run()
	first, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(first), "\n")
	if lines == 0 {
		t.Fatal("no predictions written")
	}
	cached, _ := filepath.Glob(filepath.Join(out, "feature_cache", "*", "*"))
	run()
	second, _ := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if string(second) != string(first) {
		t.Fatalf("re-run changed predictions.jsonl (%d -> %d lines): it should resume", lines, strings.Count(string(second), "\n"))
	}
	report, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"score", "--gold", data, "--pred", filepath.Join(out, "predictions.jsonl"), "--json"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Subsets map[string]struct {
			Steps   int `json:"steps"`
			Missing int `json:"missing"`
		} `json:"subsets"`
	}
	if err := json.Unmarshal([]byte(report), &got); err != nil {
		t.Fatalf("%v: %s", err, report)
	}
	g := got.Subsets["general"]
	if g.Steps != lines || g.Missing != 0 {
		t.Fatalf("score saw %d steps, %d missing; run wrote %d", g.Steps, g.Missing, lines)
	}
	if len(cached) == 0 {
		t.Log("note: no feature cache files found under feature_cache/*/*")
	}
}
