package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
)

func TestExitCodes(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	badFlag := parseFlags(fs, []string{"--nope"})
	stray := parseFlags(flag.NewFlagSet("y", flag.ContinueOnError), []string{"stray"})
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("device gone"), 1},
		{badFlag, 2},
		{stray, 2},
		{flag.ErrHelp, 0}, // -h asked for help
		{parseRunFlags(t).validate(), 2},
		{parseRunFlags(t, "--goal", "g", "--on-no-effect", "maybe").validate(), 2},
		{fmt.Errorf("eval run: %w", interruptedError{"kept"}), 130},
		{fmt.Errorf("simeval: predict: %w", context.Canceled), 130},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// Ctrl-C during `run` ends with exit status 130 and the trajectory kept.
func TestRunInterruptedExits130(t *testing.T) {
	srv := phonetest.StartServer(t)
	fake := phonetest.New(t, fakephone.Options{})
	phonetest.Connect(t, srv, fake)
	out := filepath.Join(t.TempDir(), "traj")
	rf := parseRunFlags(t, "--goal", "g", "--adb-host", "127.0.0.1", "--adb-port", strconv.Itoa(srv.Port), "--out", out, "--no-annotate")
	dev := connect(t, rf)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tap := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}
	err := runEpisode(ctx, dev, &cannedPredictor{answers: []action.Action{tap}}, rf, strings.NewReader(""), io.Discard, io.Discard)
	if exitCode(err) != 130 || !strings.Contains(err.Error(), out) {
		t.Fatalf("err = %v (exit %d)", err, exitCode(err))
	}
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err != nil {
		t.Fatal(err)
	}
}

// A used --out is refused before the device or the model is touched.
func TestRunRefusesUsedOut(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "steps.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runCmd(context.Background(), []string{"--model", "/nonexistent", "--goal", "g", "--out", out, "--adb-port", "1"})
	if err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("err = %v", err)
	}
}

// `run --adb-port P` stops the adb server it started itself, even when the
// run fails (here: no device attached).
func TestRunStopsTheADBServerItStarted(t *testing.T) {
	if _, err := exec.LookPath("adb"); err != nil {
		t.Skip("adb not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := device.Options{Host: "127.0.0.1", Port: port}
	started := false
	err = withOwnADBServer(opts, io.Discard, func() error {
		_, err := device.Connect(context.Background(), opts)
		started = adbAnswers("127.0.0.1", port)
		return err
	})
	if err == nil || !started {
		t.Fatalf("Connect on a fresh port: err %v, server started %v", err, started)
	}
	if adbAnswers("127.0.0.1", port) {
		stopADBServer(port)
		t.Fatal("the adb server autoui started is still running")
	}
}

// A command's error is printed on one line, whatever line breaks ONNX
// Runtime's message (or a hint, or a page) held.
func TestErrorLine(t *testing.T) {
	err := fmt.Errorf("decoder call 0: %w", errors.New("Got invalid dimensions for output: logits\n index: 2 Got: 2112 Expected: 1000\n Please fix either the inputs/outputs or the model."))
	got := errorLine("predict", err)
	if strings.Contains(got, "\n") || got != "autoui predict: decoder call 0: Got invalid dimensions for output: logits index: 2 Got: 2112 Expected: 1000 Please fix either the inputs/outputs or the model." {
		t.Errorf("%q", got)
	}
}
