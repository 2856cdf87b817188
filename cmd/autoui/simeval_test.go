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

// TestSimEvalOutAndInterrupt: an existing --out is kept unless --overwrite,
// and an interrupted simeval prints the tasks it played and exits 130.
func TestSimEvalOutAndInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "eps.jsonl")
	if err := os.WriteFile(out, []byte("earlier results\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", tinyBundle, "--tasks", "1", "--families", "open_app", "--out", out}
	_, err := captureStdout(t, func() error { return runSimEval(context.Background(), args) })
	if b, _ := os.ReadFile(out); exitCode(err) != exitUsage || string(b) != "earlier results\n" {
		t.Fatalf("existing --out: %v (exit %d), file now %q", err, exitCode(err), b)
	}
	if _, err := captureStdout(t, func() error { return runSimEval(context.Background(), append(args, "--overwrite")) }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); strings.Count(string(b), "\n") != 1 || strings.Contains(string(b), "earlier") {
		t.Fatalf("--overwrite: %q", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stdout, err := captureStdout(t, func() error { return runSimEval(ctx, append(args, "--overwrite")) })
	if exitCode(err) != 130 || !strings.Contains(stdout, "0 of 1 tasks played") {
		t.Fatalf("interrupted: %v (exit %d), printed %q", err, exitCode(err), stdout)
	}
}

// TestSimRunSimEvalUsage: every usage error of sim, run and simeval exits 2
// with one line naming the flag, before anything slow starts; -h exits 0
// and sim's help names each flag's value correctly.
func TestSimRunSimEvalUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--size", "foo"}, "--size"},
		{[]string{"sim", "--port", "70000"}, "--port"},
		{[]string{"sim", "--port", "0", "--android", "3"}, "--android"},
		{[]string{"sim", "--port", "0", "--task", "nope"}, "--task"},
		{[]string{"sim", "--animate=maybe"}, "animate"},
		{[]string{"sim", "stray"}, "unexpected arguments"},
		{[]string{"run", "--goal", "x"}, "--model"},
		{[]string{"run", "--model", tinyBundle}, "--goal"},
		{[]string{"run", "--goal", "x", "--model", tinyBundle, "--settle", "fast"}, "--settle"},
		{[]string{"run", "--goal", "x", "--model", tinyBundle, "--settle-timeout", "-1s"}, "--settle-timeout"},
		{[]string{"run", "--goal", "x", "--model", tinyBundle, "--settle-min", "soon"}, "settle-min"},
		{[]string{"run", "--goal", "x", "--model", tinyBundle, "--adb-port", "99999"}, "--adb-port"},
		{[]string{"run", "--goal", "x", "--model", tinyBundle, "--threads", "-1"}, "--threads"},
		{[]string{"simeval"}, "--model"},
		{[]string{"simeval", "--model", tinyBundle, "--tasks", "0"}, "--tasks"},
		{[]string{"simeval", "--model", tinyBundle, "--split", "foo"}, "--split"},
		{[]string{"simeval", "--model", tinyBundle, "--families", "zz"}, "--families"},
		{[]string{"simeval", "--model", tinyBundle, "--size", "1x1"}, "--size"},
	}
	for _, c := range cases {
		stdout, stderr, code := runCLI(t, c.args...)
		wantOneLineError(t, stdout, stderr, code, 2, c.want)
	}
	stdout, _, code := runCLI(t, "sim", "-h")
	for _, want := range []string{"-port PORT\n", "-size WxH\n", "-task family\n", "-adbkeyboard\n", "-animate\n"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("sim -h (exit %d) lacks %q:\n%s", code, want, stdout)
		}
	}
}
