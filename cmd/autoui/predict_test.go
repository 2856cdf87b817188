package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
)

const tinyBundle = "../../models/testdata/tiny"
const sampleScreen = "../../models/testdata/screens/home_1080x2400.png"

// captureStdout runs f with os.Stdout redirected to a file and returns what it wrote.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = tmp
	ferr := f()
	os.Stdout = old
	tmp.Close()
	out, _ := os.ReadFile(tmp.Name())
	return string(out), ferr
}

func TestPredictJSONAndAnnotate(t *testing.T) {
	annotated := filepath.Join(t.TempDir(), "a.png")
	out, err := captureStdout(t, func() error {
		return runPredict(context.Background(), []string{"--model", tinyBundle, "--screen", sampleScreen,
			"--goal", "Open the settings app", "--prev", "tap:0.5,0.3", "--prev", "type:wifi", "--json", "--annotate", annotated})
	})
	var got map[string]any
	if jerr := json.Unmarshal([]byte(out), &got); jerr != nil {
		t.Fatalf("not JSON (%v): %s", jerr, out)
	}
	for _, k := range []string{"action_type", "touch_point", "lift_point", "typed_text", "plan", "raw", "timings_ms"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	if err != nil {
		t.Fatalf("tiny bundle output did not parse: %v", err)
	}
	f, err := os.Open(annotated)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 1080 {
		t.Fatalf("annotated PNG: %v", err)
	}
}

func TestPredictErrors(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"no model":      {[]string{"--screen", sampleScreen, "--goal", "x"}, "--model is required"},
		"no goal":       {[]string{"--model", tinyBundle, "--screen", sampleScreen}, "--goal is required"},
		"missing model": {[]string{"--model", "/nonexistent", "--screen", sampleScreen, "--goal", "x"}, "/nonexistent"},
		"bad screen":    {[]string{"--model", tinyBundle, "--screen", "predict.go", "--goal", "x"}, "not a PNG or JPEG"},
		"bad prev":      {[]string{"--model", tinyBundle, "--screen", sampleScreen, "--goal", "x", "--prev", "tap:2,0"}, "normalized coordinate"},
		"bad provider":  {[]string{"--model", tinyBundle, "--screen", sampleScreen, "--goal", "x", "--provider", "tpu"}, "tpu"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := captureStdout(t, func() error { return runPredict(context.Background(), c.args) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	_, err := captureStdout(t, func() error { return runPredict(context.Background(), []string{"-h"}) })
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

func TestParseActionArg(t *testing.T) {
	for in, want := range map[string]action.Type{
		"tap:0.5,0.25": action.DualPoint, "swipe:up": action.DualPoint, "swipe:0.1,0.2,0.3,0.4": action.DualPoint,
		"type:hello world": action.TypeText, "back": action.PressBack, "HOME": action.PressHome, "enter": action.PressEnter,
		"complete": action.StatusTaskComplete, "impossible": action.StatusTaskImpossible,
		`{"action_type": "PRESS_BACK", "touch_point": [-1, -1], "lift_point": [-1, -1], "typed_text": ""}`: action.PressBack,
	} {
		a, err := parseActionArg(in)
		if err != nil || a.Type != want {
			t.Errorf("%q -> %v, %v", in, a, err)
		}
	}
	for _, bad := range []string{"tap:0.5", "swipe:diagonal", "fly", "tap:x,y", "{"} {
		if _, err := parseActionArg(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The demo bundle is committed; make sure it is a valid one.
func TestTinyBundleValid(t *testing.T) {
	if _, err := models.Load(tinyBundle, models.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDatasetRejectsUnknownFamily(t *testing.T) {
	err := runDataset(context.Background(), []string{"--out", t.TempDir(), "--families", "open_app,fly_to_moon"})
	if err == nil || !strings.Contains(err.Error(), "fly_to_moon") {
		t.Fatalf("got %v", err)
	}
	if err := runDataset(context.Background(), []string{"stray"}); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Fatalf("stray argument: %v", err)
	}
}

func TestParseSpin(t *testing.T) {
	for in, want := range map[string]engine.Spin{"off": engine.SpinOff, "decoder": engine.SpinDecoder, "on": engine.SpinOn} {
		if got, err := engine.ParseSpin(in); err != nil || got != want || got.String() != in {
			t.Errorf("--spin %s: %v %v, want %v", in, got, err, want)
		}
	}
	m := &modelFlags{spin: "yes", provider: "cpu", truncation: "keep-goal", decoding: "greedy"}
	if _, err := m.options(); err == nil || !strings.Contains(err.Error(), "off, decoder or on") || exitCode(err) != 2 {
		t.Errorf("--spin yes: %v", err)
	}
}
