package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/stoprule"
)

// clockPhone changes its body on every input and its status bar (the top
// rows, like a clock) on every capture.
type clockPhone struct {
	*fakephone.RecordingPhone
	mu               sync.Mutex
	inputs, captures int
}

func (p *clockPhone) Tap(x, y int) {
	p.mu.Lock()
	p.inputs++
	p.mu.Unlock()
	p.RecordingPhone.Tap(x, y)
}

func (p *clockPhone) Screencap() ([]byte, error) {
	p.mu.Lock()
	p.captures++
	in, capt := p.inputs, p.captures
	p.mu.Unlock()
	img := image.NewRGBA(image.Rect(0, 0, 108, 240))
	for y := 0; y < 240; y++ {
		c := color.RGBA{uint8(60 * in), 120, 200, 255}
		if y < 6 { // inside the 4% status bar mask (10 rows)
			c = color.RGBA{uint8(37 * capt), 255, 0, 255}
		}
		for x := 0; x < 108; x++ {
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	err := png.Encode(&b, img)
	return b.Bytes(), err
}

func TestAgentSettleWaitsAndMasksStatusBar(t *testing.T) {
	phone := &clockPhone{RecordingPhone: phonetest.Recording(t, 108, 240)}
	_, d := fakeDevice(t, fakephone.Options{Phone: phone})
	out := t.TempDir()
	opts := Options{Goal: "g", OutDir: out, SettleMin: 150 * time.Millisecond, StableFrames: 3, SettleTimeout: 5 * time.Second}
	sum, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(done)}}, opts).Run(context.Background())
	if err != nil || sum.StopReason != StopComplete || sum.SettleTimeouts != 0 {
		t.Fatalf("%+v, %v", sum, err)
	}
	st := readLines(t, filepath.Join(out, "steps.jsonl"))[0]
	settleMs := st["timings"].(map[string]any)["settle_ms"].(float64)
	if st["settled"] != true || settleMs < 150 || st["settle_captures"].(float64) < 3 || st["effect"] != screendiff.EffectChanged {
		t.Fatalf("step 0 = %v", st)
	}
}

func TestAgentReportsBlackFrames(t *testing.T) {
	p, err := fakephone.NewRecordingPhone(fakephone.SolidPNG(108, 240, color.RGBA{0, 0, 0, 255}))
	if err != nil {
		t.Fatal(err)
	}
	_, d := fakeDevice(t, fakephone.Options{Phone: p})
	out := t.TempDir()
	var log strings.Builder
	sum, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(done)}}, quick(Options{Goal: "g", OutDir: out, Log: &log})).Run(context.Background())
	if err != nil || sum.BlackFrames != 2 || sum.Effects.Unknown != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	st := readLines(t, filepath.Join(out, "steps.jsonl"))[0]
	if st["black_frame"] != true || st["effect"] != screendiff.EffectUnknown {
		t.Fatalf("step 0 = %v", st)
	}
	if !strings.Contains(log.String(), "secure window") {
		t.Errorf("log = %s", log.String())
	}
	if s := readSummary(t, out); s["black_frames"] != 2.0 {
		t.Errorf("summary = %v", s)
	}
}

// A phone that ignores input: every action has no effect.
func TestAgentNoEffectPolicies(t *testing.T) {
	for _, c := range []struct {
		policy     string
		taps, none int
		retried    int
		stop       stoprule.Reason
	}{
		{screendiff.OnNoEffectContinue, 2, 2, 0, StopComplete},
		{screendiff.OnNoEffectRetry, 4, 2, 2, StopComplete},
		{screendiff.OnNoEffectStop, 1, 1, 0, StopNoEffect},
	} {
		fake, d := fakeDevice(t, fakephone.Options{Phone: phonetest.Recording(t, 108, 240)})
		out := t.TempDir()
		pred := &scripted{answers: []predict.Result{res(tapA), res(tapB), res(done)}}
		sum, err := New(d, pred, quick(Options{Goal: "g", OutDir: out, OnNoEffect: c.policy})).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(phoneOf(fake).Events()); n != c.taps || sum.Effects.None != c.none || sum.Effects.Retried != c.retried || sum.StopReason != c.stop {
			t.Errorf("%s: %d taps, summary %+v", c.policy, n, sum)
		}
		steps := readLines(t, filepath.Join(out, "steps.jsonl"))
		if steps[0]["effect"] != screendiff.EffectNone {
			t.Errorf("%s: step 0 = %v", c.policy, steps[0])
		}
		if s := readSummary(t, out); s["effects"].(map[string]any)["none"] != float64(c.none) {
			t.Errorf("%s: summary.json = %v", c.policy, s)
		}
	}
}

func TestAgentOutDirNeverLosesATrajectory(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	out := t.TempDir()
	run := func(overwrite bool, answers ...predict.Result) error {
		_, err := New(d, &scripted{answers: answers}, quick(Options{Goal: "g", OutDir: out, Overwrite: overwrite})).Run(context.Background())
		return err
	}
	if err := run(false, res(tapA), res(tapB), res(done)); err != nil {
		t.Fatal(err)
	}
	if err := run(false, res(done)); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("a used --out was not refused: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "step_002.png")); err != nil {
		t.Fatalf("the refused run touched the trajectory: %v", err)
	}
	if err := run(true, res(done)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "step_002.png")); !os.IsNotExist(err) {
		t.Fatalf("--overwrite kept an old screenshot: %v", err)
	}
	if n := len(readLines(t, filepath.Join(out, "steps.jsonl"))); n != 1 {
		t.Fatalf("%d step lines after --overwrite", n)
	}
	notes := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(true, res(done)); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("--overwrite into a directory with other files: %v", err)
	}
	if err := CheckOutDir(out, true); err == nil {
		t.Fatal("CheckOutDir accepted a directory with other files")
	}
	if _, err := os.Stat(notes); err != nil {
		t.Fatal(err)
	}
}

// The lock `autoui run` holds on --out is not part of the directory's
// content: a directory holding only it is empty, and --overwrite neither
// counts it as a foreign file nor removes it.
func TestAgentOutDirLeavesTheLockFile(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	out := t.TempDir()
	lock, err := outlock.Acquire(out, "autoui run")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	if err := CheckOutDir(out, false); err != nil {
		t.Fatalf("a directory holding only the lock file: %v", err)
	}
	run := func(overwrite bool) error {
		_, err := New(d, &scripted{answers: []predict.Result{res(tapA), res(done)}}, quick(Options{Goal: "g", OutDir: out, Overwrite: overwrite})).Run(context.Background())
		return err
	}
	if err := run(false); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	if err := run(false); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("(%d entries)", len(ents)-1)) { // the lock file not counted
		t.Fatalf("a used --out: %v", err)
	}
	if err := run(true); err != nil {
		t.Fatalf("--overwrite with the lock file there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, outlock.File)); err != nil {
		t.Fatalf("--overwrite removed the lock file: %v", err)
	}
	if _, err := outlock.Acquire(out, "autoui run"); !errors.Is(err, outlock.ErrLocked) {
		t.Fatalf("the lock was lost: %v", err)
	}
}

// The log shows "-> command" only for what was sent.
func TestAgentLogsOnlySentCommands(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	var log strings.Builder
	pred := &scripted{answers: []predict.Result{res(tapB), res(tapA)}} // then tapA forever
	if _, err := New(d, pred, quick(Options{Goal: "g", Log: &log})).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "-> input tap 54 120"); n != 2 {
		t.Errorf("the tap was sent twice, logged as sent %d times:\n%s", n, log.String())
	}
	answers := []Decision{Proceed, Skip, Quit}
	i := 0
	confirm := func(context.Context, *Step) (Decision, error) { i++; return answers[i-1], nil }
	log.Reset()
	pred = &scripted{answers: []predict.Result{res(tapA), res(tapB), res(back)}}
	if _, err := New(d, pred, quick(Options{Goal: "g", Log: &log, Confirm: confirm})).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "-> input tap 54 120") || strings.Contains(log.String(), "-> input tap 81 60") || strings.Contains(log.String(), "-> input keyevent") {
		t.Errorf("log:\n%s", log.String())
	}
}

// A dry run's screen never changes; a repeat ends it without an error.
func TestAgentDryRunRepeatIsNotAFailure(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{Phone: smallPhone(t)})
	sum, err := New(d, &scripted{answers: []predict.Result{res(tapA)}}, quick(Options{Goal: "g", DryRun: true})).Run(context.Background())
	if err != nil || sum.StopReason != StopDryRunRepeat || sum.Error != "" || sum.Steps != 3 {
		t.Fatalf("%+v, %v", sum, err)
	}
}
