package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/aitw/runner"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/outlock"
)

// TestEvalScoreCommand runs `autoui eval score` on the AITW fixtures and
// checks the files it writes and that its JSON equals the committed golden
// report of aitw/score.
func TestEvalScoreCommand(t *testing.T) {
	dir := t.TempDir()
	perStep := filepath.Join(dir, "steps.jsonl")
	html := filepath.Join(dir, "report.html")
	stdout := os.Stdout
	r, w, _ := os.Pipe()
	os.Stdout = w
	err := runEval(context.Background(), []string{"score", "--gold", "../../aitw/testdata/records",
		"--pred", "../../aitw/testdata/predictions.jsonl", "--json", "--per-step", perStep, "--html", html, "--html-samples", "2"})
	w.Close()
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.NewDecoder(r).Decode(&got); err != nil {
		t.Fatal(err)
	}
	// The provenance varies (date, paths); the scores must not.
	about, _ := got["about"].(map[string]any)
	if about == nil || about["date"] == "" || about["run"] != nil {
		t.Errorf("about = %v: want a date and no run (hand-made predictions)", got["about"])
	}
	delete(got, "about")
	b, _ := os.ReadFile("../../aitw/score/testdata/golden_report.json")
	json.Unmarshal(b, &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("eval score --json:\n%s\nwant\n%s", gb, wb)
	}
	steps, _ := os.ReadFile(perStep)
	if n := strings.Count(string(steps), "\n"); n != 55 {
		t.Errorf("per-step lines %d", n)
	}
	page, _ := os.ReadFile(html)
	if strings.Count(string(page), "data:image/png;base64,") != 4 {
		t.Errorf("html report has no screens")
	}
	for _, want := range []string{"protocol: aitw", "model: unknown", "predictions: ../../aitw/testdata/predictions.jsonl", "date: "} {
		if !strings.Contains(string(page), want) {
			t.Errorf("html report does not say %q", want)
		}
	}
}

const fixturePreds = "../../aitw/testdata/predictions.jsonl"

// Every mistake on the command line exits 2 (issue 22's convention); a
// bad merge of predictions is not one (exit 1).
func TestEvalFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"score", "--pred", "x.jsonl"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", fixturePreds, "--split", "test"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", fixturePreds, "--subset", "nope"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--shard", "3/3"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--history", "oracle"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--batch", "-1"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--read-files", "-1"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--read-files", "65"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--shard", "auto"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", "../../aitw/testdata/predictions.jsonl", "--protocol", "paper"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", "../../aitw/testdata/predictions.jsonl", "--protocol", "autoui", "--scroll-map", "diagonal"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", "../../aitw/testdata/predictions.jsonl,../../aitw/testdata/predictions.jsonl"},
		{"frobnicate"},
		{},
		{"score", "--gold", "../../aitw/testdata/records"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", ""},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", fixturePreds, "--html-samples", "-1"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", fixturePreds, "--splits", "../../aitw/testdata/splits/standard.json"},
		{"score", "--gold", "../../aitw/testdata/records", "--pred", fixturePreds, "--splits", "../../aitw/testdata/splits/standard.json", "--split", "holdout"},
		{"score", "--gold", "../../aitw/testdata/corrupt/payload_crc.tfrecord.gz", "--pred", fixturePreds}, // no subset in its path
		{"run", "--data", "../../aitw/testdata/records"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--limit", "-1"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--preset", "paper"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--preset", "autoui", "--truncation", "keep-goal"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--preset", "autoui", "--max-new-tokens", "64"},
		{"run", "--out", t.TempDir()},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--threads", "-1"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--continuous"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--batch", "2000", "--cuda-graph", "--continuous"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--batch", "100000"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--cuda-graph", "--continuous", "--join-min", "-1"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--cuda-graph", "--overlap-joins"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--concurrent-batches", "0"},
		{"run", "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--concurrent-batches", "5"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--concurrent-batches", "2", "--cuda-graph", "--continuous"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--decode-priority"},
		{"run", "--model", tinyBundle, "--data", "../../aitw/testdata/records", "--out", t.TempDir(), "--decode-priority", "--cuda-graph"},
	} {
		err := runEval(context.Background(), args)
		want := exitUsage
		if len(args) > 0 && strings.Contains(args[len(args)-1], ",") {
			want = exitError // the same file twice: a merge error
		}
		if err == nil || exitCode(err) != want {
			t.Errorf("%v: exit %d (%v), want %d", args, exitCode(err), err, want)
		}
	}
}

// dataset and simeval refuse bad flags with exit 2 too.
func TestDatasetAndSimEvalFlagErrors(t *testing.T) {
	for _, c := range []struct {
		run  func(context.Context, []string) error
		args []string
	}{
		{runDataset, []string{"--size", "10x10", "--out", t.TempDir()}},
		{runDataset, []string{"--families", "nope", "--out", t.TempDir()}},
		{runDataset, []string{"--episodes", "0", "--out", t.TempDir()}},
		{runDataset, []string{"stray"}},
		{runSimEval, []string{"--model", tinyBundle, "--size", "wide"}},
		{runSimEval, []string{"--model", tinyBundle, "--families", "nope"}},
		{runSimEval, []string{"--model", tinyBundle, "--split", "holdout"}},
		{runSimEval, []string{"--model", tinyBundle, "--tasks", "-1"}},
		{runSimEval, []string{"--model", tinyBundle, "--tasks", "1000000000"}},
		{runSimEval, []string{"--model", tinyBundle, "--families", "open_app,open_app"}},
		{runDataset, []string{"--families", "navigate,navigate", "--out", t.TempDir()}},
		{runSimEval, []string{"--tasks", "1"}},
	} {
		_, err := captureStdout(t, func() error { return c.run(context.Background(), c.args) })
		if exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", c.args, exitCode(err), err, exitUsage)
		}
	}
}

// A corrupt record stops eval score and eval run with its file and offset
// and says how to go on past it; with --skip-corrupt it is skipped.
func TestCorruptRecordNamesSkipCorrupt(t *testing.T) {
	gold := "../../aitw/testdata/corrupt/payload_crc.tfrecord.gz"
	for _, args := range [][]string{
		{"score", "--gold", gold, "--subset", "general", "--pred", "../../aitw/testdata/predictions.jsonl"},
		{"run", "--model", tinyBundle, "--data", gold, "--subset", "general", "--out", t.TempDir(), "--no-feature-cache"},
	} {
		_, err := captureStdout(t, func() error { return runEval(context.Background(), args) })
		if err == nil || !strings.Contains(err.Error(), "at byte 25294") || !strings.Contains(err.Error(), "--skip-corrupt") {
			t.Errorf("eval %s on a corrupt record: %v", args[0], err)
		}
		_, err = captureStdout(t, func() error { return runEval(context.Background(), append(args, "--skip-corrupt")) })
		if err != nil {
			t.Errorf("eval %s --skip-corrupt: %v", args[0], err)
		}
	}
}

// eval run then eval score, end to end on the fixture records with the real
// tiny bundle; a second run resumes (predicts nothing new) and reuses the
// vision feature cache.
func TestEvalRunThenScoreWithTinyBundle(t *testing.T) {
	out := t.TempDir()
	data := "../../aitw/testdata/records/general"
	run := func() string {
		s, err := captureStdout(t, func() error {
			return runEval(context.Background(), []string{"run", "--model", tinyBundle, "--data", data, "--out", out})
		})
		if err != nil {
			t.Fatalf("eval run: %v\n%s", err, s)
		}
		return s
	}
	run()
	first, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(first), "\n")
	if lines == 0 {
		t.Fatal("no predictions written")
	}
	cached, _ := filepath.Glob(filepath.Join(out, "feature_cache", "*", "*"))
	run()
	second, _ := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if string(second) != string(first) {
		t.Fatalf("re-run changed predictions.jsonl (%d -> %d lines): it should resume", lines, strings.Count(string(second), "\n"))
	}
	report, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"score", "--gold", data, "--pred", filepath.Join(out, "predictions.jsonl"), "--json"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Subsets map[string]struct {
			Steps   int `json:"steps"`
			Missing int `json:"missing"`
		} `json:"subsets"`
	}
	if err := json.Unmarshal([]byte(report), &got); err != nil {
		t.Fatalf("%v: %s", err, report)
	}
	g := got.Subsets["general"]
	if g.Steps != lines || g.Missing != 0 {
		t.Fatalf("score saw %d steps, %d missing; run wrote %d", g.Steps, g.Missing, lines)
	}
	if len(cached) == 0 {
		t.Log("note: no feature cache files found under feature_cache/*/*")
	}
}

// eval run --continuous (one continuous decode, here on the cpu provider's
// fixed buffers), and with two batches in flight (--concurrent-batches 2),
// writes the batched run's predictions in the same order, and records the
// setting in run.json.
func TestEvalRunContinuousTiny(t *testing.T) {
	data := "../../aitw/testdata/records/general"
	run := func(extra ...string) (string, []byte) {
		out := t.TempDir()
		args := append([]string{"run", "--model", tinyBundle, "--data", data, "--out", out, "--batch", "4", "--no-feature-cache"}, extra...)
		s, err := captureStdout(t, func() error { return runEval(context.Background(), args) })
		if err != nil {
			t.Fatalf("eval run %v: %v\n%s", extra, err, s)
		}
		b, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return out, b
	}
	_, want := run()
	out, got := run("--cuda-graph", "--continuous")
	if len(want) == 0 || string(got) != string(want) {
		t.Fatalf("--continuous wrote\n%s\nbatches wrote\n%s", got, want)
	}
	if _, got := run("--cuda-graph", "--continuous", "--overlap-joins"); string(got) != string(want) {
		t.Fatalf("--continuous --overlap-joins wrote\n%s\nbatches wrote\n%s", got, want)
	}
	cOut, got := run("--cuda-graph", "--concurrent-batches", "2")
	if string(got) != string(want) {
		t.Fatalf("--concurrent-batches 2 wrote\n%s\nbatches wrote\n%s", got, want)
	}
	if info, err := runinfo.Read(cOut); err != nil || info.Options.ConcurrentBatches != 2 {
		t.Errorf("run.json of --concurrent-batches 2: %+v %v", info.Options, err)
	}
	if _, stderr, code := runCLI(t, "eval", "run", "--model", tinyBundle, "--data", data, "--out", t.TempDir(), "--batch", "4",
		"--no-feature-cache", "--concurrent-batches", "2"); code != 0 || !strings.Contains(stderr, "(batch 4, 2 calls at once)") {
		t.Errorf("--concurrent-batches 2: exit %d, %s", code, stderr)
	}
	info, err := runinfo.Read(out)
	if err != nil || !info.Options.Continuous || info.Options.Batch != 4 {
		t.Fatalf("run.json: %+v %v", info, err)
	}
	// the closing line says where the continuous decode's time went
	_, stderr, code := runCLI(t, "eval", "run", "--model", tinyBundle, "--data", data, "--out", t.TempDir(), "--batch", "4",
		"--no-feature-cache", "--cuda-graph", "--continuous")
	if !regexp.MustCompile(`\nafter the first 4 predictions: [0-9]+ in [0-9.]+ s, [0-9.]+ steps/s\n`).MatchString(stderr) {
		t.Errorf("no pace after the first batch: %s", stderr)
	}
	if code != 0 || !regexp.MustCompile(`continuous decode on 4 rows: [0-9.]+ tokens per action; [1-9][0-9]* joins of [0-9.]+ requests, [1-9][0-9]* decoder calls of [0-9.]+ busy rows on [0-9.]+, [0-9]+ moves, 0 decoder graphs captured; time: joins [0-9.]+ s, decoder calls [0-9.]+ s, moves [0-9.]+ s`).MatchString(stderr) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// eval run --read-files N reads N record files at once: the same
// predictions in another (fixed) order, its setting in run.json, and a run
// resumed with another N adds nothing.
func TestEvalRunReadFiles(t *testing.T) {
	data := "../../aitw/testdata/records"
	runOn := func(data, out string, n int) []string {
		args := []string{"run", "--model", tinyBundle, "--data", data, "--out", out, "--batch", "4", "--no-feature-cache", "--read-files", strconv.Itoa(n)}
		if s, err := captureStdout(t, func() error { return runEval(context.Background(), args) }); err != nil {
			t.Fatalf("eval run --read-files %d: %v\n%s", n, err, s)
		}
		b, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	run := func(out string, n int) []string { return runOn(data, out, n) }
	want := run(t.TempDir(), 1)
	out := t.TempDir()
	got := run(out, 3)
	if slices.Equal(got, want) {
		t.Fatal("--read-files 3 wrote the lines in the order of one file after another: were the files interleaved?")
	}
	if len(got) != len(want) || !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("--read-files 3 wrote %d lines, 1 wrote %d; they differ", len(got), len(want))
	}
	if again := run(t.TempDir(), 3); !slices.Equal(again, got) {
		t.Fatal("--read-files 3 wrote its lines in another order the second time")
	}
	if info, err := runinfo.Read(out); err != nil || info.Options.ReadFiles != 3 {
		t.Fatalf("run.json: %+v %v", info, err)
	}
	// one file: one at a time, whatever was asked
	one := t.TempDir()
	runOn(data+"/general", one, 8)
	if info, err := runinfo.Read(one); err != nil || info.Options.ReadFiles != 1 {
		t.Fatalf("run.json of one file read with --read-files 8: %+v %v", info, err)
	}
	if resumed := run(out, 1); !slices.Equal(resumed, got) {
		t.Fatalf("resumed with --read-files 1: %d lines, was %d", len(resumed), len(got))
	}
}

// eval run --replay (benchmarking): every step decodes the replayed action,
// in batches and in a continuous decode; run.json records it, a resume
// without it is refused, and eval score refuses the predictions.
func TestEvalRunReplay(t *testing.T) {
	data := "../../aitw/testdata/records/general"
	raws := func(out string) []string {
		ps, err := aitw.ReadPredictions(filepath.Join(out, runinfo.PredictionsFile))
		if err != nil {
			t.Fatal(err)
		}
		var r []string
		for _, p := range ps.ByStep {
			r = append(r, p.Raw)
		}
		return r
	}
	for _, extra := range [][]string{{"--replay", "typical"}, {"--replay", "mixed", "--cuda-graph", "--continuous"}} {
		out := t.TempDir()
		args := append([]string{"eval", "run", "--model", tinyBundle, "--data", data, "--out", out, "--batch", "4", "--no-feature-cache"}, extra...)
		_, stderr, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(stderr, "not the model's (benchmarking)") {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		got := raws(out)
		want := map[string]bool{bench.TypicalAction: true}
		if extra[1] == "mixed" {
			for _, a := range bench.MixedActions {
				want[a] = true
			}
		}
		seen := map[string]bool{}
		for _, r := range got {
			if !want[r] {
				t.Errorf("%v: raw %q, not a replayed action", extra, r)
			}
			seen[r] = true
		}
		if len(got) == 0 || (extra[1] == "mixed" && len(seen) < 2) {
			t.Errorf("%v: %d predictions of %d actions", extra, len(got), len(seen))
		}
		// format 2: an autoui that reads format 1 only refuses it rather
		// than taking it for the model's predictions
		if info, err := runinfo.Read(out); err != nil || info.Options.Replay != extra[1] || info.Format != 2 {
			t.Fatalf("%v: run.json %+v %v", extra, info, err)
		}
		_, stderr, code = runCLI(t, "eval", "run", "--model", tinyBundle, "--data", data, "--out", out, "--no-feature-cache")
		if code != exitError || !strings.Contains(stderr, "replay: "+extra[1]+" vs none") {
			t.Errorf("%v: resumed without --replay: exit %d: %s", extra, code, stderr)
		}
		_, stderr, code = runCLI(t, "eval", "score", "--gold", data, "--pred", out)
		if code != exitError || !strings.Contains(stderr, "--replay") || !strings.Contains(stderr, "not scored") {
			t.Errorf("%v: scored: exit %d: %s", extra, code, stderr)
		}
	}
	_, stderr, code := runCLI(t, "eval", "run", "--model", tinyBundle, "--data", data, "--out", t.TempDir(), "--replay", strings.Repeat("tap ", 200))
	if code != exitUsage || !strings.Contains(stderr, "do not fit") {
		t.Errorf("a replay over the token limit: exit %d: %s", code, stderr)
	}
}

// run.json records the run; resuming with another setting (not another
// batch size), into a directory of unknown predictions, or while another run holds --out is
// refused without touching predictions.jsonl.
func TestEvalRunProvenanceAndLock(t *testing.T) {
	out := t.TempDir()
	data := "../../aitw/testdata/records/general"
	run := func(extra ...string) error {
		_, err := captureStdout(t, func() error {
			return runEval(context.Background(), append([]string{"run", "--model", tinyBundle, "--data", data, "--out", out, "--no-feature-cache"}, extra...))
		})
		return err
	}
	if err := run("--limit", "3"); err != nil {
		t.Fatal(err)
	}
	info, err := runinfo.Read(out)
	if err != nil || info == nil {
		t.Fatalf("run.json: %v %v", info, err)
	}
	if info.Model.Name == "" || len(info.Model.ManifestSHA256) != 64 || info.Options.MaxNewTokens <= 0 ||
		info.Options.History != "gold" || info.Options.Batch < 1 || len(info.Data.Files) == 0 || info.Ended == nil || info.Complete {
		t.Errorf("run.json after --limit 3: %+v", info)
	}
	before, _ := os.ReadFile(filepath.Join(out, runinfo.PredictionsFile))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-new-tokens", "20"}, "max_new_tokens"},
		{[]string{"--history", "predicted"}, "history: gold vs predicted"},
		{[]string{"--decoding", "greedy"}, "decoding"},
		{[]string{"--shard", "0/2"}, "shard: all vs 0/2"},
	} {
		err := run(c.args...)
		if err == nil || !strings.Contains(err.Error(), "made differently") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("resume with %v: %v", c.args, err)
		}
	}
	lock, err := outlock.Acquire(out, "autoui eval run")
	if err != nil {
		t.Fatal(err)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", os.Getpid())) {
		t.Errorf("second run on a locked --out: %v", err)
	}
	lock.Release()
	after, _ := os.ReadFile(filepath.Join(out, runinfo.PredictionsFile))
	if string(after) != string(before) {
		t.Fatal("a refused run changed predictions.jsonl")
	}
	if err := run("--batch", "1"); err != nil { // same settings, another batch size: resumes to the end
		t.Fatal(err)
	}
	if info, _ = runinfo.Read(out); !info.Complete {
		t.Errorf("complete run: %+v", info)
	}
	// Predictions without provenance are not appended to.
	os.Remove(filepath.Join(out, runinfo.File))
	if err := run(); err == nil || !strings.Contains(err.Error(), "without a run.json") {
		t.Errorf("predictions without run.json: %v", err)
	}
}

// Shards scored together equal one run; shards of different runs, or the
// same shard twice, are refused.
func TestEvalScoreMergesShards(t *testing.T) {
	data := "../../aitw/testdata/records/general"
	base := t.TempDir()
	run := func(dir string, extra ...string) {
		t.Helper()
		_, err := captureStdout(t, func() error {
			return runEval(context.Background(), append([]string{"run", "--model", tinyBundle, "--data", data, "--out", filepath.Join(base, dir), "--no-feature-cache"}, extra...))
		})
		if err != nil {
			t.Fatalf("eval run %s: %v", dir, err)
		}
	}
	run("all")
	run("s0", "--shard", "0/2")
	run("s1", "--shard", "1/2")
	run("other", "--shard", "1/2", "--max-new-tokens", "20")
	score := func(preds ...string) (map[string]any, error) {
		args := []string{"score", "--gold", data, "--json"}
		for _, p := range preds {
			args = append(args, "--pred", filepath.Join(base, p))
		}
		s, err := captureStdout(t, func() error { return runEval(context.Background(), args) })
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		return m, nil
	}
	one, err := score("all")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := score("s0", "s1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(one["overall"])
	b, _ := json.Marshal(merged["overall"])
	if string(a) != string(b) {
		t.Errorf("merged shards score %s, one run %s", b, a)
	}
	run0 := merged["about"].(map[string]any)["run"].(map[string]any)
	if run0["model"].(map[string]any)["manifest_sha256"] == "" {
		t.Errorf("merged report has no model: %v", run0)
	}
	if _, err := score("s0", "other"); err == nil || !strings.Contains(err.Error(), "max_new_tokens") {
		t.Errorf("merging runs with different options: %v", err)
	}
	if _, err := score("s1", "s1"); err == nil || !strings.Contains(err.Error(), "predicted in both") {
		t.Errorf("merging a shard with itself: %v", err)
	}
}

// --protocol autoui scores the fixtures under Auto-GUI's rules and says so.
func TestEvalScoreProtocolFlag(t *testing.T) {
	out, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"score", "--gold", "../../aitw/testdata/records",
			"--pred", "../../aitw/testdata/predictions.jsonl", "--protocol", "autoui", "--scroll-map", "legacy"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "protocol: autoui (gold swipes rewritten with the legacy scroll map)\n") || !strings.Contains(out, "overall") {
		t.Errorf("text report:\n%s", out)
	}
}

// `autoui dataset` output goes to eval run and eval score without
// --subset: dataset.json says general, run.json records it, and eval score
// reads it from run.json when the gold files are elsewhere. A dataset
// interrupted by Ctrl-C exits 130, keeps its episodes and is finished by
// the same command.
func TestDatasetToEvalWithoutSubset(t *testing.T) {
	data := filepath.Join(t.TempDir(), "simdata")
	args := []string{"--out", data, "--episodes", "4", "--seed", "6", "--size", "90x200", "--families", "open_app,navigate"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := captureStdout(t, func() error { return runDataset(cancelled, args) })
	if exitCode(err) != exitInterrupted || !strings.Contains(err.Error(), "run the same command again") {
		t.Fatalf("interrupted dataset: exit %d, %v", exitCode(err), err)
	}
	if _, err := captureStdout(t, func() error { return runDataset(context.Background(), args) }); err != nil {
		t.Fatalf("finishing the dataset: %v", err)
	}
	out := t.TempDir()
	_, err = captureStdout(t, func() error {
		return runEval(context.Background(), []string{"run", "--model", tinyBundle, "--data", data, "--out", out, "--no-feature-cache", "--limit", "3"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := runinfo.Read(out); info == nil || info.Data.Subset != "general" {
		t.Fatalf("run.json subset: %+v", info)
	}
	// The gold copied where no dataset.json says its subset.
	gold := filepath.Join(t.TempDir(), "copy.tfrecord.gz")
	b, _ := os.ReadFile(filepath.Join(data, "train", "open_app.tfrecord.gz"))
	os.WriteFile(gold, b, 0o644)
	report, err := captureStdout(t, func() error {
		return runEval(context.Background(), []string{"score", "--gold", gold, "--pred", out, "--json"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, `"general"`) {
		t.Errorf("report without the general subset:\n%s", report)
	}
}

// captureStderr returns what f writes to stderr: captureStdout's file
// takes stderr's place while stdout is left as it was.
func captureStderr(t *testing.T, f func() error) (string, error) {
	t.Helper()
	stdout, stderr := os.Stdout, os.Stderr
	defer func() { os.Stderr = stderr }()
	return captureStdout(t, func() error {
		os.Stderr, os.Stdout = os.Stdout, stdout
		return f()
	})
}

// eval run --preset autoui predicts as main.py does and says so in run.json;
// eval score --protocol autoui is quiet on such a run and warns (one line,
// and in every report form) on a run made otherwise.
func TestEvalPresetAutoUIAndPaperWarning(t *testing.T) {
	data := "../../aitw/testdata/autoui/general_blip_test.obj" // main.py's input: features and split
	base := t.TempDir()
	run := func(dir string, extra ...string) *runinfo.Info {
		t.Helper()
		out := filepath.Join(base, dir)
		_, err := captureStdout(t, func() error {
			_, err := captureStderr(t, func() error {
				return runEval(context.Background(), append([]string{"run", "--model", tinyBundle, "--data", data, "--out", out, "--no-feature-cache", "--limit", "3"}, extra...))
			})
			return err
		})
		if err != nil {
			t.Fatalf("eval run %v: %v", extra, err)
		}
		info, err := runinfo.Read(out)
		if err != nil || info == nil {
			t.Fatalf("run.json: %v", err)
		}
		return info
	}
	paper := run("paper", "--preset", "autoui", "--history-window", "8") // repeating the preset's value is fine
	want := runinfo.AutoUIPreset
	want.Decoding, want.Provider, want.GraphOpt, want.Batch, want.ScrollMap = paper.Options.Decoding, paper.Options.Provider, paper.Options.GraphOpt, paper.Options.Batch, "fixed"
	want.ReadFiles, want.ConcurrentBatches = runner.DefaultReadFilesCPU, 1
	if paper.Options != want {
		t.Errorf("run.json options %+v, want %+v", paper.Options, want)
	}
	if def := run("default"); def.Options.Preset != "" || def.Options.Truncation != "keep-goal" {
		t.Errorf("default run options %+v", def.Options)
	}
	score := func(dir string, extra ...string) (stdout, stderr string) {
		t.Helper()
		var err error
		stdout, err = captureStdout(t, func() error {
			stderr, err = captureStderr(t, func() error {
				return runEval(context.Background(), append([]string{"score", "--gold", data, "--pred", filepath.Join(base, dir), "--protocol", "autoui"}, extra...))
			})
			return err
		})
		if err != nil {
			t.Fatalf("eval score %s: %v", dir, err)
		}
		return stdout, stderr
	}
	if out, errs := score("paper"); strings.Contains(errs, "warning") || strings.Contains(out, "not Auto-GUI") || !strings.Contains(out, "preset autoui") {
		t.Errorf("preset run: stderr %q\nreport:\n%s", errs, out)
	}
	html := filepath.Join(base, "report.html")
	out, errs := score("default", "--json", "--html", html)
	// (the runs stopped at --limit 3: a note says each has not finished)
	if !strings.Contains(errs, "has not finished") {
		t.Errorf("a run cut by --limit is not named unfinished: %q", errs)
	}
	errs = errs[strings.Index(errs, "\n")+1:]
	if strings.Count(errs, "warning") != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "truncation keep-goal (main.py: right)") {
		t.Errorf("default run: stderr %q, want one warning line naming the truncation", errs)
	}
	var rep struct {
		PaperDifferences []string `json:"paper_differences"`
		About            struct {
			Notes []string `json:"notes"`
		} `json:"about"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.About.Notes) != 1 || !strings.Contains(rep.About.Notes[0], "has not finished") {
		t.Errorf("the JSON report's notes: %q (%v)", rep.About.Notes, err)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.PaperDifferences) != 1 {
		t.Errorf("JSON paper_differences %q (%v)", rep.PaperDifferences, err)
	}
	if page, _ := os.ReadFile(html); !strings.Contains(string(page), "truncation keep-goal (main.py: right)") {
		t.Error("the HTML report does not say the run is not main.py's")
	}
	if out, _ := score("default"); !strings.Contains(out, "not Auto-GUI's main.py setup") {
		t.Errorf("text report:\n%s", out)
	}
	// Scoring with another map than the prompts': not main.py's either.
	if _, errs := score("paper", "--scroll-map", "legacy"); !strings.Contains(errs, "legacy scroll map, prompts written with the fixed one") {
		t.Errorf("legacy scoring of a fixed-map run: stderr %q", errs)
	}
}
