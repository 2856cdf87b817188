package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
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

// --batch N measures N screens per PredictBatch and reports screens/s;
// --probe-on device runs the device probe (the GPU's under cuda) through the
// CPU provider here, labelled as such.
func TestBenchBatchDeviceProbeCLI(t *testing.T) {
	stdout, stderr, code := runCLI(t, "bench", "--model", tinyBundle, "--runs", "2", "--warmup", "0", "--tokens", "4",
		"--batch", "3", "--probe-on", "device", "--probe-mb", "4", "--threads", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Batch       int                `json:"batch"`
		ScreensPerS map[string]float64 `json:"screens_per_s"`
		Batches     []map[string]any   `json:"batches"`
		Actions     []map[string]any   `json:"actions"`
		Machine     map[string]any     `json:"machine"`
		Limits      []map[string]any   `json:"limits"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v: %.300s", err, stdout)
	}
	if doc.Batch != 3 || len(doc.Batches) != 2 || len(doc.Actions) != 6 || doc.ScreensPerS["median"] <= 0 {
		t.Fatalf("batch %d, %d batches, %d actions, screens/s %v", doc.Batch, len(doc.Batches), len(doc.Actions), doc.ScreensPerS)
	}
	if doc.Machine["probe"] != "device" || doc.Machine["provider"] != "cpu" || len(doc.Limits) == 0 {
		t.Fatalf("machine %v, limits %v", doc.Machine, doc.Limits)
	}
	if !strings.Contains(stderr, "device probe, through ONNX Runtime's cpu provider") || !strings.Contains(stderr, "batch: 3 screens per PredictBatch") {
		t.Fatalf("table: %s", stderr)
	}
	_, stderr, code = runCLI(t, "bench", "--model", tinyBundle, "--probe-on", "gpu")
	wantOneLineError(t, "", stderr, code, 2, "--probe-on")
}

// bench serve --json too: the levels as JSON on stdout, the table on stderr.
func TestBenchServeJSONOnStdoutCLI(t *testing.T) {
	url, stop := startServe(t, "127.0.0.1:0")
	defer stop()
	stdout, stderr, code := runCLI(t, "bench", "serve", "--server", url, "--concurrency", "1", "--duration", "300ms", "--warmup", "0s",
		"--screen", sampleScreen, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Levels []map[string]any `json:"levels"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.Levels) != 1 {
		t.Errorf("stdout is not the levels' JSON (%v): %.300s", err, stdout)
	}
	if !strings.Contains(stderr, "concurrency") {
		t.Errorf("no table on stderr: %q", stderr)
	}
}

// --ort-profile writes one ORT profile per graph and says where; a prefix
// in a directory that does not exist is refused before anything runs (ORT
// would drop the profiles silently).
func TestBenchORTProfileCLI(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "p")
	_, stderr, code := runCLI(t, "bench", "--model", tinyBundle, "--runs", "1", "--warmup", "0", "--tokens", "4", "--probe=false", "--ort-profile", prefix)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if files, _ := filepath.Glob(prefix + "-*.json"); len(files) != 5 || !strings.Contains(stderr, "5 ORT profiles") {
		t.Fatalf("%d profiles: %v\n%s", len(files), files, stderr)
	}
	_, stderr, code = runCLI(t, "bench", "--model", tinyBundle, "--ort-profile", filepath.Join(prefix, "missing", "p"))
	wantOneLineError(t, "", stderr, code, 2, "--ort-profile")
}

// --concurrent-batches needs --batch and at least 1.
// Flags that would measure nothing, less than asked, or crash, and output
// files that could not be written at the end, are refused before the run.
func TestBenchFlagBounds(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--model", tinyBundle, "--warmup", "-1"}, "--warmup"},
		{[]string{"bench", "--model", tinyBundle, "--runs", "0"}, "--runs"},
		{[]string{"bench", "--model", tinyBundle, "--tokens", "0"}, "--tokens"},
		{[]string{"bench", "--model", tinyBundle, "--probe-mb", "-1"}, "--probe-mb"},
		{[]string{"bench", "--model", tinyBundle, "--batch", "1000000"}, "--batch"},
		{[]string{"bench", "--model", tinyBundle, "--benchstat", filepath.Join(dir, "no", "such.txt")}, "--benchstat"},
		{[]string{"bench", "--model", tinyBundle, "--peer-inputs", dir}, "--peer-inputs"},
		{[]string{"bench", "tune", "--model", tinyBundle, "--warmup", "-3"}, "--warmup"},
		{[]string{"bench", "tune", "--model", tinyBundle, "--benchstat", dir}, "--benchstat"},
	} {
		stdout, stderr, code := runCLI(t, c.args...)
		wantOneLineError(t, stdout, stderr, code, exitUsage, c.want)
	}
}

func TestBenchConcurrentBatchesUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--model", "x", "--concurrent-batches", "2"},
		{"bench", "--model", "x", "--batch", "4", "--concurrent-batches", "0"},
	} {
		stdout, stderr, code := runCLI(t, args...)
		wantOneLineError(t, stdout, stderr, code, exitUsage, "--concurrent-batches")
	}
}

// --pipeline resizes the next batch's screens while the engine predicts
// this one and reports the screens/s over the run (the engine's features of
// screens resized ahead: aitw/runner's TestShrinkAheadTiny); it needs --batch
// and one batch at a time.
func TestBenchPipelineCLI(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		args := []string{"bench", "--model", tinyBundle, "--runs", "2", "--warmup", "0", "--tokens", "4",
			"--batch", "3", "--probe=false", "--threads", "1", "--json"}
		if pipelined {
			args = append(args, "--pipeline")
		}
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var doc struct {
			Pipelined bool             `json:"pipelined"`
			Run       float64          `json:"run_screens_per_s"`
			Actions   []map[string]any `json:"actions"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%v: %.300s", err, stdout)
		}
		if doc.Pipelined != pipelined || doc.Run <= 0 || len(doc.Actions) != 6 {
			t.Fatalf("%v: pipelined %v, %v screens/s over the run, %d actions", args, doc.Pipelined, doc.Run, len(doc.Actions))
		}
		if pipelined != strings.Contains(stderr, "pipelined (") {
			t.Errorf("%v: table: %s", args, stderr)
		}
	}
	for _, args := range [][]string{
		{"bench", "--model", "x", "--pipeline"},
		{"bench", "--model", "x", "--batch", "4", "--concurrent-batches", "2", "--pipeline"},
	} {
		stdout, stderr, code := runCLI(t, args...)
		wantOneLineError(t, stdout, stderr, code, exitUsage, "--pipeline")
	}
}

// An interruption with results measured is reported, then exits 130; with
// none, or another error, the error stands.
func TestKeepMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := fmt.Errorf("case h4 run 3: %w", context.Canceled)
	if intr, err := keepMeasured(ctx, stopped, 10, "actions"); err != nil || exitCode(intr) != 130 {
		t.Errorf("interrupted with 10 measured: %v, %v", intr, err)
	}
	if intr, err := keepMeasured(ctx, stopped, 0, "actions"); intr != nil || err != stopped {
		t.Errorf("interrupted with none measured: %v, %v", intr, err)
	}
	boom := errors.New("boom")
	if intr, err := keepMeasured(context.Background(), boom, 10, "actions"); intr != nil || err != boom {
		t.Errorf("failed: %v, %v", intr, err)
	}
}
