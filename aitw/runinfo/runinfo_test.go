package runinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func sample() *Info {
	return &Info{
		Format: FormatVersion, Version: "devel",
		Model: Model{Name: "tiny", Dir: "/m/tiny", ManifestSHA256: strings.Repeat("ab", 32)},
		Options: Options{History: "gold", HistoryWindow: 8, Truncation: "keep-goal", MaxNewTokens: 127,
			Decoding: "speculative", Provider: "cpu", GraphOpt: "all", Batch: 8},
		Data:    Data{Files: []DataFile{{Path: "/data/general/a.gz", Size: 10}}, Split: "test", Shard: "0/3"},
		Started: time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC),
	}
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	if in, err := Read(dir); in != nil || err != nil {
		t.Fatalf("missing run.json: %v %v", in, err)
	}
	in := sample()
	if err := in.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(in, got, true); len(d) != 0 || !got.Started.Equal(in.Started) {
		t.Errorf("round trip differs: %v", d)
	}
	os.WriteFile(filepath.Join(dir, File), []byte("{not json"), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "run.json") {
		t.Errorf("corrupt run.json: %v", err)
	}
	os.WriteFile(filepath.Join(dir, File), []byte(`{"format": 9}`), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "format 9") {
		t.Errorf("future format: %v", err)
	}
}

func TestDiff(t *testing.T) {
	a := sample()
	b := sample()
	b.Model.ManifestSHA256 = strings.Repeat("cd", 32)
	b.Options.MaxNewTokens = 64
	b.Data.Shard = "1/3"
	b.Data.Files = []DataFile{{Path: "/elsewhere/general/a.gz", Size: 10}} // same file, other mount
	d := Diff(a, b, true)
	want := []string{"model (manifest sha256): abababababab vs cdcdcdcdcdcd", "max_new_tokens: 127 vs 64", "shard: 0/3 vs 1/3"}
	if strings.Join(d, "|") != strings.Join(want, "|") {
		t.Errorf("Diff = %q, want %q", d, want)
	}
	if d := Diff(a, b, false); len(d) != 2 {
		t.Errorf("Diff without shard = %q", d)
	}
	// TF32 off changes outputs under cuda; a run.json from before the field
	// (absent: TF32 on) agrees with one that has it on
	b = sample()
	b.Options.ExactFP32 = true
	if d := Diff(a, b, false); len(d) != 1 || d[0] != "exact_fp32: false vs true" {
		t.Errorf("TF32 off: %q", d)
	}
	// under cuda with TF32 the batch size changes outputs, so it is compared
	a, b = sample(), sample()
	a.Options.Provider, b.Options.Provider = "cuda", "cuda"
	b.Options.Batch = 64
	if d := Diff(a, b, false); len(d) != 1 || !strings.HasPrefix(d[0], "batch") {
		t.Errorf("cuda with TF32, batches 8 and 64: %q", d)
	}
	// and so are the files read at once, which choose the steps a call has;
	// a run.json without read_files read one file at a time
	b.Options.Batch, b.Options.ReadFiles = a.Options.Batch, 4
	if d := Diff(a, b, false); len(d) != 1 || !strings.HasPrefix(d[0], "read_files") {
		t.Errorf("cuda with TF32, read_files 0 and 4: %q", d)
	}
	if b.Options.ReadFiles = 1; len(Diff(a, b, false)) != 0 {
		t.Errorf("cuda with TF32, read_files 0 and 1: %q", Diff(a, b, false))
	}
	// calls at once choose the steps a call has with predicted history only
	b.Options.ConcurrentBatches = 2
	if d := Diff(a, b, false); len(d) != 0 {
		t.Errorf("cuda with TF32, gold history, concurrent_batches 0 and 2: %q", d)
	}
	a.Options.History, b.Options.History = "predicted", "predicted"
	if d := Diff(a, b, false); len(d) != 1 || !strings.HasPrefix(d[0], "concurrent_batches") {
		t.Errorf("cuda with TF32, predicted history, concurrent_batches 0 and 2: %q", d)
	}
	if b.Options.ConcurrentBatches = 1; len(Diff(a, b, false)) != 0 {
		t.Errorf("cuda with TF32, predicted history, concurrent_batches 0 and 1: %q", Diff(a, b, false))
	}
	b.Options.Batch, b.Options.ReadFiles = 64, 4
	a.Options.ExactFP32, b.Options.ExactFP32 = true, true
	if d := Diff(a, b, false); len(d) != 0 {
		t.Errorf("cuda without TF32, batches 8 and 64, read_files 0 and 4: %q", d)
	}
	a = sample()
	b = sample()
	b.Data.Files[0].Size = 11
	if d := Diff(a, b, false); len(d) != 1 || !strings.HasPrefix(d[0], "data files") {
		t.Errorf("changed data file: %q", d)
	}
}

func TestVersion(t *testing.T) {
	if v := Version(); v == "" {
		t.Error("empty version")
	}
}

// The batch size is recorded but neither a resume nor a merge compares it:
// predictions are the same at every batch size.
func TestBatchIsNotProvenance(t *testing.T) {
	a, b := sample(), sample()
	b.Options.Batch = 1
	if d := Diff(a, b, true); len(d) != 0 {
		t.Errorf("Diff at another batch = %q, want none", d)
	}
	dir := t.TempDir()
	if err := Start(dir, a); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, PredictionsFile), []byte(`{"episode_id": "1", "step_id": 0, "action_type": 5}`+"\n"), 0o644)
	if err := Start(dir, b); err != nil {
		t.Fatalf("resume at another batch: %v", err)
	}
	if got, _ := Read(dir); got.Options.Batch != 1 {
		t.Errorf("run.json batch %d, want the latest run's 1", got.Options.Batch)
	}
}

// A directory without a single prediction (a run stopped before its first,
// or killed mid-way through writing it) is taken by a run with other
// settings; one prediction is enough to refuse.
func TestStartTakesDirWithoutPredictions(t *testing.T) {
	for _, content := range []string{"", "-", `{"episode_id": "1", "step_id": 0, "act`} {
		dir := t.TempDir()
		a, b := sample(), sample()
		b.Options.MaxNewTokens = 64
		b.Started = a.Started.Add(time.Hour)
		if err := Start(dir, a); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, PredictionsFile)
		if content != "-" {
			os.WriteFile(path, []byte(content), 0o644)
		}
		if err := Start(dir, b); err != nil {
			t.Fatalf("predictions file %q: %v", content, err)
		}
		if got, _ := Read(dir); got.Options.MaxNewTokens != 64 || !got.Started.Equal(b.Started) {
			t.Errorf("run.json not the new run's: %+v", got)
		}
		os.WriteFile(path, []byte(`{"episode_id": "1", "step_id": 0, "action_type": 5}`+"\n"), 0o644)
		if err := Start(dir, a); err == nil || !strings.Contains(err.Error(), "max_new_tokens: 64 vs 127") {
			t.Errorf("a directory with a prediction: %v", err)
		}
	}
	// Without run.json: empty is taken, a prediction refused.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, PredictionsFile), nil, 0o644)
	if err := Start(dir, sample()); err != nil {
		t.Errorf("empty predictions without run.json: %v", err)
	}
	os.Remove(filepath.Join(dir, File))
	os.WriteFile(filepath.Join(dir, PredictionsFile), []byte(`{"episode_id": "1", "step_id": 0, "action_type": 5}`+"\n"), 0o644)
	if err := Start(dir, sample()); err == nil || !strings.Contains(err.Error(), "without a run.json") {
		t.Errorf("predictions without run.json: %v", err)
	}
}

// A run without splits reads as "none" beside one with them, not "." and "".
func TestDiffNamesWhatIsNotSet(t *testing.T) {
	a, b := sample(), sample()
	a.Data.Splits, a.Data.Split = "", ""
	b.Data.Splits, b.Data.Split = "/data/splits.json", "test"
	want := []string{"splits: none vs splits.json", "split: none vs test"}
	if d := Diff(a, b, true); !slices.Equal(d, want) {
		t.Errorf("Diff = %q, want %q", d, want)
	}
}

// Shards of an evaluation scored without one of them say which is missing.
func TestReadPredictionsNamesMissingShards(t *testing.T) {
	var dirs []string
	for _, shard := range []string{"0/3", "2/3"} {
		dir := t.TempDir()
		in := sample()
		in.Data.Shard = shard
		in.Complete = shard == "0/3" // the other's note names it unfinished
		if err := Start(dir, in); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf(`{"episode_id": "e%s", "step_id": 0, "action_type": 5}`+"\n", shard[:1])
		if err := os.WriteFile(filepath.Join(dir, PredictionsFile), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	ps, err := ReadPredictions(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "not given: shard 1/3 of this evaluation; the steps in it count as missing"; !slices.Contains(ps.Notes, want) {
		t.Errorf("notes %q, want %q", ps.Notes, want)
	}
	if ps, _ := ReadPredictions(dirs[:1]); len(ps.Notes) != 1 || !strings.Contains(ps.Notes[0], "shards 1/3, 2/3 of") {
		t.Errorf("one shard of three: notes %q", ps.Notes)
	}
	if !strings.Contains(strings.Join(ps.Notes, "\n"), dirs[1]+"/predictions.jsonl: its eval run has not finished") {
		t.Errorf("an unfinished run is not named: notes %q", ps.Notes)
	}
}

// A predictions.jsonl that is a directory is named as such.
func TestStartRefusesPredictionsThatAreNoFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, PredictionsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Start(dir, sample()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("got %v", err)
	}
}
