package main

import (
	"encoding/json"
	"testing"
)

// --json means one thing in every command: the report as JSON on stdout,
// nothing else there (issue 22: bench took a file name).
func TestBenchJSONOnStdoutCLI(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--model", tinyBundle, "--runs", "1", "--warmup", "0", "--tokens", "4", "--probe=false", "--json"},
		{"bench", "tune", "--model", tinyBundle, "--quick", "--try-threads", "1", "--try-opt", "all", "--json"},
	} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc) == 0 {
			t.Errorf("%v: stdout is not one JSON report (%v): %.200s", args, err, stdout)
		}
	}
	_, stderr, code := runCLI(t, "bench", "--model", tinyBundle, "--json", "--benchstat", "-")
	wantOneLineError(t, "", stderr, code, 2, "both print on stdout")
}
