package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/preprocess/imagetest"
)

// hostileScreen writes a small PNG whose header claims w x h RGBA pixels
// (the decompression-bomb header that used to kill predict with "fatal
// error: runtime: out of memory").
func hostileScreen(t *testing.T, w, h uint32) string {
	t.Helper()
	data := imagetest.HostilePNG(w, h, 1<<20)
	path := filepath.Join(t.TempDir(), "hostile.png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The whole CLI path, as a user runs it: a hostile header ends predict with
// exit status 1 and a one-line error, not a runtime crash and stack dump.
func TestPredictHostileScreenExits(t *testing.T) {
	screen := hostileScreen(t, 200000, 200000)
	stdout, stderr, code := runCLI(t, "predict", "--model", tinyBundle, "--screen", screen, "--goal", "open settings")
	wantOneLineError(t, stdout, stderr, code, 1, "autoui predict: screen: ")
	msg := strings.TrimRight(stderr, "\n")
	for _, want := range []string{"autoui predict: screen: ", screen, "200000x200000", "limit of 40000000", "--max-pixels"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if stdout != "" {
		t.Errorf("stdout: %s", stdout)
	}
}

func TestPredictMaxPixelsFlag(t *testing.T) {
	screen := hostileScreen(t, 1000, 1000)
	run := func(extra ...string) error {
		args := append([]string{"--model", tinyBundle, "--screen", screen, "--goal", "x"}, extra...)
		_, err := captureStdout(t, func() error { return runPredict(context.Background(), args) })
		return err
	}
	// 1 Mpx is under the default cap: the decode runs and fails on the
	// missing pixel data.
	if err := run(); err == nil || errors.Is(err, preprocess.ErrTooLarge) {
		t.Errorf("default cap: %v, want a decode error", err)
	}
	if err := run("--max-pixels", "999999"); !errors.Is(err, preprocess.ErrTooLarge) || !strings.Contains(err.Error(), "limit of 999999") {
		t.Errorf("--max-pixels 999999: %v", err)
	}
	if err := run("--max-pixels", "1000000"); err == nil || errors.Is(err, preprocess.ErrTooLarge) {
		t.Errorf("--max-pixels 1000000: %v, want a decode error", err)
	}
	if err := run("--max-pixels", "-1"); exitCode(err) != exitUsage {
		t.Errorf("--max-pixels -1: %v (exit %d), want a usage error", err, exitCode(err))
	}
}
