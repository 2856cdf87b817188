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
