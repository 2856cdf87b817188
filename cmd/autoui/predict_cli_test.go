package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/npy"
	"github.com/autoui/autoui/tokenizer"
)

// cliArgsEnv makes this test binary the autoui command: TestCLIHelperProcess
// runs main with the JSON-encoded arguments in it.
const cliArgsEnv = "AUTOUI_CLI_TEST_ARGS"

func TestCLIHelperProcess(t *testing.T) {
	raw := os.Getenv(cliArgsEnv)
	if raw == "" {
		t.Skip("only runs as the autoui command of runCLI")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		panic(err)
	}
	os.Args = append([]string{"autoui"}, args...)
	main() // exits
}

// runCLI runs `autoui args...` in a child process through main, and returns
// its stdout, stderr and exit status.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIHelperProcess$")
	cmd.Env = append(os.Environ(), cliArgsEnv+"="+string(enc), "ORT_DISABLE_TELEMETRY=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// wantOneLineError checks a failed command: the exit status, one line on
// stderr mentioning want, and no Go panic or stack trace anywhere.
func wantOneLineError(t *testing.T, stdout, stderr string, code, wantCode int, want string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit status %d, want %d; stderr: %s", code, wantCode, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr is not one line: %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q does not mention %q", stderr, want)
	}
	for _, s := range []string{"goroutine ", "panic:", ".go:"} {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("output has %q: %s%s", s, stdout, stderr)
		}
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPredictBadInputsCLI(t *testing.T) {
	// The .npy reader's own refusals are tested in package npy; these show
	// they reach the user as one line.
	npyOf := func(v ...float32) []byte {
		var b bytes.Buffer
		if err := npy.Write(&b, v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	full := npyOf(make([]float32, 1408)...)
	nan := make([]float32, 8)
	nan[5] = float32(math.NaN())
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"zero-byte npy":        {[]string{"--features", writeFile(t, "z.npy", nil)}, 1, "not a .npy file"},
		"truncated npy":        {[]string{"--features", writeFile(t, "t.npy", full[:len(full)-100])}, 1, "truncated"},
		"garbage npy":          {[]string{"--features", writeFile(t, "g.npy", []byte("\x93NUMPY\x01\x00\x04\x00{}}\n"))}, 1, "no descr"},
		"NaN npy":              {[]string{"--features", writeFile(t, "n.npy", npyOf(nan...))}, 1, "at index 5"},
		"Inf JSON":             {[]string{"--features", writeFile(t, "i.json", []byte("[0, 1, 1e39]"))}, 1, "features"},
		"empty JSON":           {[]string{"--features", writeFile(t, "e.json", []byte("[]"))}, 1, "no feature values"},
		"prev NaN":             {[]string{"--screen", sampleScreen, "--prev", "tap:NaN,0.2"}, 2, "normalized coordinate"},
		"prev Inf swipe":       {[]string{"--screen", sampleScreen, "--prev", "swipe:0.1,0.2,0.3,+Inf"}, 2, "normalized coordinate"},
		"prev 1.5":             {[]string{"--screen", sampleScreen, "--prev", "tap:1.5,0"}, 2, "normalized coordinate"},
		"prev JSON [5,5]":      {[]string{"--screen", sampleScreen, "--prev", `{"action_type": "DUAL_POINT", "touch_point": [5, 5], "lift_point": [5, 5]}`}, 2, "normalized coordinate"},
		"prev JSON multi-line": {[]string{"--screen", sampleScreen, "--prev", "{\"action_type\": [\n4]}"}, 2, "neither a name nor a number"},
		"prev point below -1":  {[]string{"--screen", sampleScreen, "--prev", `{"action_type": "PRESS_BACK", "touch_point": [-3, 0]}`}, 2, "not a normalized coordinate"},
		"prev unknown":         {[]string{"--screen", sampleScreen, "--prev", "fly"}, 2, "want tap:Y,X"},
		"history [5,5]": {[]string{"--screen", sampleScreen, "--history", writeFile(t, "h.json",
			[]byte(`[{"action_type": "DUAL_POINT", "touch_point": [5, 5], "lift_point": [5, 5]}]`))}, 1, "history"},
		"history JSONL NaN": {[]string{"--screen", sampleScreen, "--history", writeFile(t, "h.jsonl",
			[]byte("{\"action_type\": \"PRESS_BACK\"}\n{\"action_type\": 4, \"touch_point\": \"[0.5, 1.5]\", \"lift_point\": [0.5, 0.5]}\n"))}, 1, "line 2"},
		"history type 9":      {[]string{"--screen", sampleScreen, "--history", writeFile(t, "h9.json", []byte(`[{"action_type": 9}]`))}, 1, "unknown action type"},
		"spin bogus":          {[]string{"--screen", sampleScreen, "--spin", "maybe"}, 2, "--spin"},
		"threads -1":          {[]string{"--screen", sampleScreen, "--threads", "-1"}, 2, "--threads"},
		"provider bogus":      {[]string{"--screen", sampleScreen, "--provider", "tpu"}, 2, "tpu"},
		"history -2":          {[]string{"--screen", sampleScreen, "--history-window", "-2"}, 2, "--history-window -2"},
		"no goal":             {[]string{"--screen", sampleScreen, "--goal", " "}, 2, "--goal is required"},
		"screen and features": {[]string{"--screen", sampleScreen, "--features", writeFile(t, "f.json", []byte("[0.5]"))}, 2, "not both"},
		"prev unknown field":  {[]string{"--screen", sampleScreen, "--prev", `{"action_type": "PRESS_BACK", "lift_pont": [0.1, 0.2]}`}, 2, `unknown field "lift_pont"`},
		"unknown flag":        {[]string{"--screen", sampleScreen, "--nope"}, 2, "nope"},
		// Limits that bound memory (issue 22: 1e9 tokens ran out of memory).
		"max-new-tokens huge": {[]string{"--screen", sampleScreen, "--max-new-tokens", "1000000000"}, 2, "--max-new-tokens 1000000000: want 0"},
		"max-new-tokens -1":   {[]string{"--screen", sampleScreen, "--max-new-tokens", "-1"}, 2, "--max-new-tokens -1"},
		"prompt-groups 5":     {[]string{"--screen", sampleScreen, "--prompt-groups", "5"}, 2, "--prompt-groups 5: want 0"},
		"max-draft 65":        {[]string{"--screen", sampleScreen, "--max-draft", "65"}, 2, "--max-draft 65: want 0 (12) to 64"},
		"align-positions -1":  {[]string{"--screen", sampleScreen, "--align-positions", "-1"}, 2, "--align-positions -1: want 0 (none) to 64"},
		"capture-rows alone":  {[]string{"--screen", sampleScreen, "--capture-rows", "16"}, 2, "--capture-rows needs --cuda-graph"},
		"capture-rows 129":    {[]string{"--screen", sampleScreen, "--cuda-graph", "--capture-rows", "129"}, 2, "--capture-rows 129: want 0 (the provider's default) to 128"},
		"goal huge":           {[]string{"--screen", sampleScreen, "--goal", strings.Repeat("open ", 2000)}, 2, "goal is 10000 bytes, over the limit of 8192"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"predict", "--model", tinyBundle, "--goal", "Open settings"}, c.args...)
			stdout, stderr, code := runCLI(t, args...)
			wantOneLineError(t, stdout, stderr, code, c.code, c.want)
		})
	}
}

// --threads above the CPU count runs, capped, with a one-line warning.
func TestPredictThreadsCapCLI(t *testing.T) {
	stdout, stderr, code := runCLI(t, "predict", "--model", tinyBundle, "--screen", sampleScreen, "--goal", "Open settings", "--threads", "1000", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--threads 1000") || !strings.Contains(stderr, "using") {
		t.Fatalf("want a one-line cap warning, got %q", stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout: %v: %s", err, stdout)
	}
}

func TestThreadsCappedAndSpinDefault(t *testing.T) {
	old := os.Stderr
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	os.Stderr = tmp
	m := &modelFlags{threads: 1000, spin: defaultSpin, provider: "cpu", truncation: "keep-goal", decoding: "greedy"}
	o1, err1 := m.options()
	o2, err2 := m.options()
	os.Stderr = old
	tmp.Close()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if o1.Session.IntraOpThreads != runtime.NumCPU() || o2.Session.IntraOpThreads != runtime.NumCPU() {
		t.Fatalf("threads %d, %d; want the cap %d", o1.Session.IntraOpThreads, o2.Session.IntraOpThreads, runtime.NumCPU())
	}
	warn, _ := os.ReadFile(tmp.Name())
	if strings.Count(string(warn), "\n") != 1 {
		t.Fatalf("want one warning line, got %q", warn)
	}
	if o1.Session.Spin.String() != defaultSpin {
		t.Fatalf("default --spin %s gave Spin %v", defaultSpin, o1.Session.Spin)
	}
	m = &modelFlags{spin: "on", provider: "cpu", truncation: "keep-goal", decoding: "greedy"}
	if o, err := m.options(); err != nil || o.Session.Spin != engine.SpinOn || o.Session.IntraOpThreads != 0 {
		t.Fatalf("--spin on, --threads 0: %+v %v", o.Session, err)
	}
	m.spin = "off"
	if o, err := m.options(); err != nil || o.Session.Spin != engine.SpinOff {
		t.Fatalf("--spin off: %+v %v", o.Session, err)
	}
}

// -h shows the flags, --spin with its default among them.
func TestPredictHelpShowsSpinDefault(t *testing.T) {
	stdout, _, code := runCLI(t, "predict", "-h")
	if code != 0 || !strings.Contains(stdout, "-spin string") || !strings.Contains(stdout, `(default "`+defaultSpin+`")`) {
		t.Fatalf("exit %d, help:\n%s", code, stdout)
	}
}

// --json carries the prompt and output ids; --dump-features writes the
// features used, readable by the .npy reader.
func TestPredictJSONIdsAndDumpFeatures(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "feat.npy")
	stdout, stderr, code := runCLI(t, "predict", "--model", tinyBundle, "--screen", sampleScreen, "--goal", "Open the settings app",
		"--prev", "tap:0.5,0.3", "--json", "--dump-features", dump)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Raw        string   `json:"raw"`
		Tokens     int      `json:"tokens"`
		SourceText *string  `json:"source_text"`
		SourceIDs  *[]int64 `json:"source_ids"`
		OutputIDs  *[]int64 `json:"output_ids"`
		SourceToks int      `json:"source_tokens"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout: %v: %s", err, stdout)
	}
	if got.SourceText == nil || got.SourceIDs == nil || got.OutputIDs == nil {
		t.Fatalf("JSON lacks source_text, source_ids or output_ids: %s", stdout)
	}
	if !strings.Contains(*got.SourceText, "Goal: Open the settings app") || !strings.HasPrefix(*got.SourceText, "Previous Actions:") {
		t.Errorf("source_text %q", *got.SourceText)
	}
	if len(*got.SourceIDs) != got.SourceToks || len(*got.OutputIDs) != got.Tokens || got.Tokens == 0 {
		t.Errorf("%d source ids for %d source tokens, %d output ids for %d tokens", len(*got.SourceIDs), got.SourceToks, len(*got.OutputIDs), got.Tokens)
	}
	b, err := models.Load(tinyBundle, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(b.Path(models.RoleTokenizer))
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := tok.Encode(*got.SourceText); err != nil || !equalIDs(ids, *got.SourceIDs) {
		t.Errorf("source_ids are not the tokenized source_text: %v vs %v (%v)", *got.SourceIDs, ids, err)
	}
	if text := tok.Decode(*got.OutputIDs, tokenizer.DecodeOptions{SkipSpecial: true}); text != got.Raw {
		t.Errorf("output_ids decode to %q, raw is %q", text, got.Raw)
	}

	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	feats, _, err := npy.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(feats) != b.Manifest.Model.ImageDim {
		t.Fatalf("%d dumped features, image_dim %d", len(feats), b.Manifest.Model.ImageDim)
	}
	// The dump is the features used: feeding it back gives the same prediction.
	again, stderr, code := runCLI(t, "predict", "--model", tinyBundle, "--features", dump, "--goal", "Open the settings app",
		"--prev", "tap:0.5,0.3", "--json", "--dump-features", filepath.Join(dir, "again.npy"))
	if code != 0 {
		t.Fatalf("--features the dump: exit %d: %s", code, stderr)
	}
	var got2 struct {
		Raw string `json:"raw"`
	}
	if err := json.Unmarshal([]byte(again), &got2); err != nil || got2.Raw != got.Raw {
		t.Fatalf("prediction from the dumped features %q, from the screen %q (%v)", got2.Raw, got.Raw, err)
	}
	first, _ := os.ReadFile(dump)
	second, _ := os.ReadFile(filepath.Join(dir, "again.npy"))
	if !bytes.Equal(first, second) {
		t.Fatal("features given with --features are not dumped unchanged")
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A history tap given without its lift point is that tap in the prompt, not
// a swipe (issue 22): the same JSON reading as serve's history.
func TestPredictPrevTapWithoutLift(t *testing.T) {
	stdout, stderr, code := runCLI(t, "predict", "--model", tinyBundle, "--goal", "Open settings", "--screen", sampleScreen, "--json",
		"--prev", `{"action_type":4,"touch_point":[0.1,0.2]}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		SourceText string `json:"source_text"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if want := `"touch_point": "[0.1, 0.2]", "lift_point": "[0.1, 0.2]"`; !strings.Contains(out.SourceText, want) {
		t.Errorf("prompt %q lacks the tap %s", out.SourceText, want)
	}
}

// Help asked for exits 0 on stdout; no command is a usage error (2);
// version prints the build (issue 22).
func TestHelpAndVersionCLI(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		stdout, _, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(stdout, "usage: autoui <command>") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
	if _, stderr, code := runCLI(t); code != 2 || !strings.Contains(stderr, "usage:") {
		t.Errorf("no command: exit %d, stderr %q", code, stderr)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, _, code := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(stdout, "autoui ") || !strings.Contains(stdout, "ONNX Runtime 1.29") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
}

// --cuda-graph (here on the cpu provider: the fixed-buffer decode without
// capture) predicts what the default decode does; a bundle without the
// static decoder graph is refused in one line naming the upgrade command.
func TestPredictCUDAGraphCLI(t *testing.T) {
	args := []string{"predict", "--model", tinyBundle, "--screen", sampleScreen, "--goal", "Open the settings app", "--json"}
	plain, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	graph, stderr, code := runCLI(t, append(args, "--cuda-graph")...)
	if code != 0 {
		t.Fatalf("--cuda-graph: exit %d: %s", code, stderr)
	}
	ids := func(out string) string {
		var r struct {
			Raw       string  `json:"raw"`
			OutputIDs []int64 `json:"output_ids"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.OutputIDs) == 0 {
			t.Fatalf("stdout %q: %v", out, err)
		}
		return fmt.Sprint(r.Raw, r.OutputIDs)
	}
	if a, b := ids(plain), ids(graph); a != b {
		t.Errorf("--cuda-graph predicted %s, the default decode %s", b, a)
	}
	// the tiny bundle, its manifest without the static graph
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(tinyBundle, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m["files"].(map[string]any), "decoder_static")
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(tinyBundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "manifest.json" {
			abs, _ := filepath.Abs(filepath.Join(tinyBundle, e.Name()))
			if err := os.Symlink(abs, filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	stdout, stderr, code := runCLI(t, "predict", "--model", dir, "--screen", sampleScreen, "--goal", "Open the settings app", "--cuda-graph")
	wantOneLineError(t, stdout, stderr, code, 1, "scripts.upgrade_bundle")
}
