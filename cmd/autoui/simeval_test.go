package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simeval plays tasks with the tiny bundle under each --on-no-effect policy
// and writes each episode's effect counts.
func TestSimEvalOnNoEffect(t *testing.T) {
	for _, policy := range []string{"continue", "retry", "stop"} {
		out := filepath.Join(t.TempDir(), "eps.jsonl")
		err := runSimEval(context.Background(), []string{"--model", tinyBundle, "--tasks", "1", "--families", "open_app,search", "--on-no-effect", policy, "--out", out})
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: %d episodes", policy, len(lines))
		}
		for _, l := range lines {
			var ep struct {
				Stop    string         `json:"stop"`
				Effects map[string]int `json:"effects"`
			}
			if err := json.Unmarshal([]byte(l), &ep); err != nil {
				t.Fatal(err)
			}
			if _, ok := ep.Effects["none"]; !ok {
				t.Fatalf("%s: episode without effects: %s", policy, l)
			}
			if policy != "stop" && ep.Stop == "no_effect" || policy == "stop" && ep.Effects["none"] > 1 {
				t.Errorf("%s: %s", policy, l)
			}
		}
	}
	if err := runSimEval(context.Background(), []string{"--model", tinyBundle, "--on-no-effect", "maybe"}); exitCode(err) != 2 {
		t.Errorf("bad --on-no-effect: %v (exit %d)", err, exitCode(err))
	}
}
