package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/atomicfile"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/stoprule"
)

// Stop reasons in Summary.StopReason: package stoprule's, which `autoui sim
// eval` shares, under the names this package exports.
const (
	StopComplete     = stoprule.Complete
	StopImpossible   = stoprule.Impossible
	StopMaxSteps     = stoprule.MaxSteps
	StopRepeated     = stoprule.Repeated
	StopDryRunRepeat = stoprule.DryRunRepeat
	StopNoEffect     = stoprule.NoEffect
	StopUnparsable   = stoprule.Unparsable
	StopInterrupted  = stoprule.Interrupted
	StopUserQuit     = stoprule.UserQuit
	StopError        = stoprule.Error
)

// GestureRecord is an action in device pixels, as dispatched.
type GestureRecord struct {
	Kind    string `json:"kind"`
	X1      int    `json:"x1"`
	Y1      int    `json:"y1"`
	X2      int    `json:"x2"`
	Y2      int    `json:"y2"`
	Text    string `json:"text,omitempty"`
	KeyCode int    `json:"key_code,omitempty"`
}

// StepTimings are the wall times of one step's stages.
type StepTimings struct {
	Capture  time.Duration
	Predict  time.Duration
	Engine   predict.Timings // the predictor's own breakdown
	Dispatch time.Duration
	Settle   time.Duration
	Total    time.Duration
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MarshalJSON writes milliseconds.
func (t StepTimings) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Capture  float64         `json:"capture_ms"`
		Predict  float64         `json:"predict_ms"`
		Engine   predict.Timings `json:"engine"`
		Dispatch float64         `json:"dispatch_ms"`
		Settle   float64         `json:"settle_ms"`
		Total    float64         `json:"total_ms"`
	}{ms(t.Capture), ms(t.Predict), t.Engine, ms(t.Dispatch), ms(t.Settle), ms(t.Total)})
}

// Step is one line of steps.jsonl.
type Step struct {
	Step    int             `json:"step"`
	Goal    string          `json:"goal"`
	History []action.Action `json:"history"`
	// Screenshot and Annotated are file names inside the output directory.
	Screenshot    string `json:"screenshot,omitempty"`
	Annotated     string `json:"annotated,omitempty"`
	ScreenshotVia string `json:"screenshot_via,omitempty"`
	// ImageSize is the screenshot's size; InputSize the coordinate space
	// the gesture was mapped to (wm size and orientation, or --size).
	ImageSize  [2]int         `json:"image_size"`
	InputSize  [2]int         `json:"input_size"`
	Raw        string         `json:"raw"`
	Plan       []string       `json:"plan,omitempty"`
	Action     *action.Action `json:"action,omitempty"`
	ParseError string         `json:"parse_error,omitempty"`
	Gesture    *GestureRecord `json:"gesture,omitempty"`
	Commands   []string       `json:"commands"`
	Dispatched bool           `json:"dispatched"`
	DryRun     bool           `json:"dry_run,omitempty"`
	Skipped    bool           `json:"skipped,omitempty"`
	Settled    *bool          `json:"settled,omitempty"`
	// SettleCaptures counts the screenshots taken while settling.
	SettleCaptures int `json:"settle_captures,omitempty"`
	// SettleChecks counts the UI hierarchy reads of --settle ui.
	SettleChecks int `json:"settle_checks,omitempty"`
	// BlackFrame says the screen the model saw was black (screen off or a
	// secure window).
	BlackFrame bool `json:"black_frame,omitempty"`
	// Effect compares the settled screen with the one the model saw
	// (screendiff.Effect*); empty when nothing was sent.
	Effect string `json:"effect,omitempty"`
	// Warning says how what is sent differs from the model's action (text
	// folded to ASCII).
	Warning string `json:"warning,omitempty"`
	// Retried says --on-no-effect retry sent the action a second time.
	Retried bool        `json:"retried,omitempty"`
	Error   string      `json:"error,omitempty"`
	Timings StepTimings `json:"timings"`
}

// Source is what predicted an episode's actions, as summary.json's "model"
// records it: a bundle loaded in process (its manifest's name, its
// directory and the manifest's SHA-256, as eval's run.json) or a server.
type Source struct {
	Name           string `json:"name,omitempty"`
	Dir            string `json:"dir,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	// Server is the base URL of the autoui serve that predicted (its API
	// does not say which model it runs).
	Server string `json:"server,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	Goal       string          `json:"goal"`
	Serial     string          `json:"serial"`
	Model      string          `json:"device_model,omitempty"`
	Source     *Source         `json:"model,omitempty"`
	DryRun     bool            `json:"dry_run"`
	Steps      int             `json:"steps"`
	Dispatched int             `json:"dispatched"`
	StopReason stoprule.Reason `json:"stop_reason"`
	Error      string          `json:"error,omitempty"`
	// Effects counts the sent actions by effect; SettleTimeouts the sent
	// actions whose screen was still changing at --settle-timeout;
	// BlackFrames the steps whose screen was black.
	Effects        screendiff.Counts `json:"effects"`
	SettleTimeouts int               `json:"settle_timeouts"`
	BlackFrames    int               `json:"black_frames"`
	// SettleTimes are the settle waits of the sent actions (each step's
	// timings.settle_ms), by the mode that waited.
	SettleTimes settleStats `json:"settle"`
	settleTimes []time.Duration
	// Total and the per-stage sums over all steps.
	Total    time.Duration `json:"-"`
	Capture  time.Duration `json:"-"`
	Predict  time.Duration `json:"-"`
	Dispatch time.Duration `json:"-"`
	Settle   time.Duration `json:"-"`
	Output   string        `json:"-"`
}

// MarshalJSON adds the times in milliseconds.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	return json.Marshal(struct {
		plain
		TotalMs float64            `json:"total_ms"`
		StageMs map[string]float64 `json:"stage_ms"`
	}{plain(s), ms(s.Total), map[string]float64{
		"capture": ms(s.Capture), "predict": ms(s.Predict), "dispatch": ms(s.Dispatch), "settle": ms(s.Settle),
	}})
}

// trajectory writes the output directory. Every step line is flushed as it
// is written, so an interrupted or failed run keeps everything so far;
// other files are written whole under a temporary name and renamed.
type trajectory struct {
	dir   string
	steps *os.File
	aw    *os.File // nil in dry runs: nothing was performed
	awCtx awContext
}

// trajectoryFile matches the names a trajectory writes (and atomicfile's
// temporary names for them, left by a crash).
var trajectoryFile = regexp.MustCompile(`^(steps\.jsonl|summary\.json|android_world\.jsonl|step_\d{3,}(_annotated)?\.png)$|^\.(summary\.json|step_\d{3,}(_annotated)?\.png)\.tmp-`)

// CheckOutDir says whether dir may receive a trajectory: it must be absent
// or empty, or, with overwrite, hold nothing but an earlier trajectory's
// files (so --overwrite never deletes anything else).
func CheckOutDir(dir string, overwrite bool) error {
	_, err := outDirFiles(dir, overwrite)
	return err
}

// outDirFiles returns the earlier trajectory's files to remove. The lock
// file `autoui run` holds on the directory (package outlock) is not content:
// it is neither counted nor removed.
func outDirFiles(dir string, overwrite bool) ([]string, error) {
	ents, err := outlock.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if len(ents) == 0 {
		return nil, nil
	}
	if !overwrite {
		return nil, fmt.Errorf("output directory %s is not empty (%d entries): pass --overwrite to replace the trajectory in it, or choose another --out", dir, len(ents))
	}
	var ours, others []string
	for _, e := range ents {
		if e.Type().IsRegular() && trajectoryFile.MatchString(e.Name()) {
			ours = append(ours, e.Name())
		} else {
			others = append(others, e.Name())
		}
	}
	if len(others) > 0 {
		return nil, fmt.Errorf("output directory %s holds files that are not part of a trajectory (%s): --overwrite only replaces a trajectory; choose another --out", dir, strings.Join(firstN(others, 5), ", "))
	}
	return ours, nil
}

func firstN(names []string, n int) []string {
	if len(names) > n {
		return append(names[:n:n], "...")
	}
	return names
}

func newTrajectory(dir string, overwrite, dryRun bool) (*trajectory, error) {
	if dir == "" {
		return nil, nil
	}
	old, err := outDirFiles(dir, overwrite)
	if err != nil {
		return nil, err
	}
	for _, name := range old {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("clear the earlier trajectory: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	steps, err := os.Create(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("create steps.jsonl: %w", err)
	}
	t := &trajectory{dir: dir, steps: steps}
	if dryRun {
		return t, nil
	}
	if t.aw, err = os.Create(filepath.Join(dir, "android_world.jsonl")); err != nil {
		steps.Close()
		return nil, fmt.Errorf("create android_world.jsonl: %w", err)
	}
	return t, nil
}

func (t *trajectory) writeFile(name string, data []byte) error {
	if t == nil {
		return nil
	}
	return atomicfile.WriteBytes(filepath.Join(t.dir, name), data)
}

func (t *trajectory) writeStep(s *Step, performed bool) error {
	if t == nil {
		return nil
	}
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode step %d: %w", s.Step, err)
	}
	if _, err := t.steps.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write steps.jsonl: %w", err)
	}
	if !performed || t.aw == nil || s.Action == nil || s.Gesture == nil {
		return nil
	}
	if aw, ok := t.awCtx.convert(*s.Action, *s.Gesture); ok {
		if _, err := t.aw.Write(append(aw, '\n')); err != nil {
			return fmt.Errorf("write android_world.jsonl: %w", err)
		}
	}
	return nil
}

func (t *trajectory) close(s *Summary) error {
	if t == nil {
		return nil
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	errs := []error{t.writeFile("summary.json", append(data, '\n')), t.steps.Close()}
	if t.aw != nil {
		errs = append(errs, t.aw.Close())
	}
	return errors.Join(errs...)
}
