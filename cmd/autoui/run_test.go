package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/agent"
	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

type cannedPredictor struct{ answers []action.Action }

func (c *cannedPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return predicttest.Each(ctx, c, reqs)
}

func (c *cannedPredictor) Predict(_ context.Context, req predict.Request) (*predict.Result, error) {
	a := c.answers[min(len(req.History), len(c.answers)-1)]
	return &predict.Result{Action: a, Raw: a.String()}, nil
}

func parseRunFlags(t *testing.T, args ...string) *runFlags {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	rf := addRunFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return rf
}

// connect connects to the device rf's flags name.
func connect(t *testing.T, rf *runFlags) *device.Device {
	t.Helper()
	opts, err := rf.deviceOptions()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := device.Connect(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func TestRunEpisodeDryRunAndReal(t *testing.T) {
	srv := phonetest.StartServer(t)
	fake := phonetest.New(t, fakephone.Options{})
	phonetest.Connect(t, srv, fake)
	port := srv.Port
	tap := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}
	typ := action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "a b; rm -rf /"}
	done := action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	pred := &cannedPredictor{answers: []action.Action{tap, typ, done}}

	for _, dry := range []bool{true, false} {
		out := filepath.Join(t.TempDir(), "traj")
		args := []string{"--goal", "search", "--adb-host", "127.0.0.1", "--adb-port", strconv.Itoa(port), "--out", out, "--size", "1000x2000", "--no-annotate", "--settle-min", "0"}
		if dry {
			args = append(args, "--dry-run")
		}
		rf := parseRunFlags(t, args...)
		if err := rf.validate(); err != nil {
			t.Fatal(err)
		}
		dev := connect(t, rf)
		var stdout strings.Builder
		if err := runEpisode(context.Background(), dev, pred, rf, strings.NewReader(""), io.Discard, &stdout); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"input tap 500 1000", `input text 'a%sb;%srm%s-rf%s/'`, "task_complete", out} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("dry=%v: output lacks %q:\n%s", dry, want, stdout.String())
			}
		}
		if _, err := os.Stat(filepath.Join(out, "summary.json")); err != nil {
			t.Error(err)
		}
		inputs := fake.Inputs()
		if dry && len(inputs) != 0 {
			t.Fatalf("dry run sent %q", inputs)
		}
		if !dry && (len(inputs) != 2 || strings.Join(inputs[1], "|") != "input|text|a%sb;%srm%s-rf%s/") {
			t.Fatalf("inputs = %q", inputs)
		}
	}
}

func TestRunFlagErrors(t *testing.T) {
	if err := parseRunFlags(t).validate(); err == nil || !strings.Contains(err.Error(), "--goal") {
		t.Errorf("missing goal: %v", err)
	}
	if _, err := parseRunFlags(t, "--goal", "x", "--size", "wide").deviceOptions(); err == nil {
		t.Error("bad --size accepted")
	}
	o, err := parseRunFlags(t, "--goal", "x", "--size", "720x1600", "--swipe-ms", "500").deviceOptions()
	if err != nil || o.Width != 720 || o.Height != 1600 || o.SwipeDuration.Milliseconds() != 500 {
		t.Errorf("options = %+v, %v", o, err)
	}
	if _, err := parseRunFlags(t, "--goal", "x", "--non-ascii", "transliterate").deviceOptions(); err == nil {
		t.Error("bad --non-ascii accepted")
	}
	if _, err := parseRunFlags(t, "--goal", "x", "--adb-timeout", "0s").deviceOptions(); err == nil {
		t.Error("--adb-timeout 0 accepted")
	}
	o, err = parseRunFlags(t, "--goal", "x", "--non-ascii", "refuse", "--adb-timeout", "12s").deviceOptions()
	if err != nil || o.NonASCII != "refuse" || o.CommandTimeout.Seconds() != 12 {
		t.Errorf("options = %+v, %v", o, err)
	}
}

func TestTerminalConfirm(t *testing.T) {
	in := bufio.NewReader(strings.NewReader("maybe\ny\nn\nq\n"))
	ask := terminalConfirm(in, io.Discard)
	st := &agent.Step{Commands: []string{"input tap 1 2"}}
	for _, want := range []agent.Decision{agent.Proceed, agent.Skip, agent.Quit, agent.Quit} {
		got, err := ask(context.Background(), st)
		if err != nil || got != want {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	}
}

// A whole episode with the real tiny bundle: real adb server, fake device
// showing the sample home screen, predictor from the model flags.
func TestRunEpisodeWithTinyBundle(t *testing.T) {
	// The tiny model only knows first steps: on the unchanged screen its later
	// outputs may not parse, which must end the episode cleanly with that reason.
	phone, out, err := runSampleEpisode(t, nil, "--model", tinyBundle)
	if err != nil && !strings.Contains(err.Error(), "does not parse") {
		t.Fatal(err)
	}
	// the trained tiny model taps Settings (y 0.405, x 0.155 of 2400x1080) first
	events := phone.Events()
	if len(events) == 0 || events[0].Kind != fakephone.EventTap || events[0].X1 != 167 || events[0].Y1 != 972 {
		t.Fatalf("first input %+v, want a tap at 167,972 (Settings)", events)
	}
	for _, f := range []string{"steps.jsonl", "summary.json", "android_world.jsonl", "step_000.png", "step_000_annotated.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// summary.json says which model predicted, as eval's run.json does.
	var sum struct {
		Model map[string]string `json:"model"`
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	man, err := os.ReadFile(filepath.Join(tinyBundle, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var named struct{ Name string }
	json.Unmarshal(man, &named)
	sha := sha256.Sum256(man)
	dir, _ := filepath.Abs(tinyBundle)
	if err := json.Unmarshal(raw, &sum); err != nil || sum.Model["name"] != named.Name || named.Name == "" ||
		sum.Model["dir"] != dir || sum.Model["manifest_sha256"] != hex.EncodeToString(sha[:]) {
		t.Fatalf("summary.json model %v (%v), want %s in %s", sum.Model, err, named.Name, dir)
	}
}

// unwritableOut is an --out that cannot be created, even by root.
func unwritableOut(t *testing.T) string {
	if runtime.GOOS != "linux" {
		t.Skip("uses /proc")
	}
	return "/proc/autoui-no-such-dir"
}

// An --out that cannot be written is refused before the device is reached
// (here: no adb server answers).
func TestRunUnwritableOut(t *testing.T) {
	out := unwritableOut(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	err = runCmd(context.Background(), []string{"--model", tinyBundle, "--goal", "g", "--out", out, "--adb-host", "127.0.0.1", "--adb-port", port})
	if err == nil || !strings.HasPrefix(err.Error(), "--out: ") || !strings.Contains(err.Error(), out) {
		t.Fatalf("err = %v, want an --out error", err)
	}
}

// An episode that could not write its trajectory does not say it wrote one.
func TestRunEpisodeUnwritableOut(t *testing.T) {
	out := unwritableOut(t)
	srv := phonetest.StartServer(t)
	phonetest.Connect(t, srv, phonetest.New(t, fakephone.Options{}))
	rf := parseRunFlags(t, "--goal", "g", "--adb-host", "127.0.0.1", "--adb-port", strconv.Itoa(srv.Port), "--out", out, "--no-annotate")
	dev := connect(t, rf)
	var stdout strings.Builder
	done := action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	err := runEpisode(context.Background(), dev, &cannedPredictor{answers: []action.Action{done}}, rf, strings.NewReader(""), io.Discard, &stdout)
	if err == nil || strings.Contains(stdout.String(), "trajectory:") {
		t.Fatalf("err %v, output:\n%s", err, stdout.String())
	}
}

// While another process holds --out, `autoui run` is refused before the
// device is reached, naming the holder, and the trajectory there is left
// alone, --overwrite or not; its own lock is held until the episode ends
// and --overwrite keeps the lock file.
func TestRunRefusesAHeldOut(t *testing.T) {
	out := t.TempDir()
	steps := filepath.Join(out, "steps.jsonl")
	os.WriteFile(steps, []byte("{}\n"), 0o644)
	lock, err := outlock.Acquire(out, "autoui run")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, extra := range [][]string{nil, {"--overwrite"}} {
		args := append([]string{"--model", tinyBundle, "--goal", "g", "--out", out, "--adb-host", "127.0.0.1", "--adb-port", "1"}, extra...)
		err := runCmd(context.Background(), args)
		want := fmt.Sprintf("%s is in use by pid %d on %s (another autoui run); wait for it to finish or use another --out", out, os.Getpid(), host)
		if !errors.Is(err, outlock.ErrLocked) || err.Error() != want {
			t.Fatalf("run %v on a held --out: %v\nwant: %s", extra, err, want)
		}
	}
	if b, _ := os.ReadFile(steps); string(b) != "{}\n" {
		t.Fatal("a refused run changed steps.jsonl")
	}
	lock.Release()
	held, err := prepareOutDir(out, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepareOutDir(out, true); !errors.Is(err, outlock.ErrLocked) {
		t.Fatalf("prepareOutDir while the first holds it: %v", err)
	}
	srv := phonetest.StartServer(t)
	phonetest.Connect(t, srv, phonetest.New(t, fakephone.Options{}))
	rf := parseRunFlags(t, "--goal", "g", "--adb-host", "127.0.0.1", "--adb-port", strconv.Itoa(srv.Port), "--out", out, "--overwrite", "--no-annotate")
	done := action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	if err := runEpisode(context.Background(), connect(t, rf), &cannedPredictor{answers: []action.Action{done}}, rf, strings.NewReader(""), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, outlock.File)); err != nil {
		t.Fatalf("--overwrite removed the lock file: %v", err)
	}
	if _, err := prepareOutDir(out, true); !errors.Is(err, outlock.ErrLocked) {
		t.Fatalf("the lock was not held through the episode: %v", err)
	}
	held.Release()
	if l, err := prepareOutDir(out, true); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		l.Release()
	}
}
