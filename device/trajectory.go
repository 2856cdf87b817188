package device

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine"
)

// Stop reasons in Summary.StopReason.
const (
	StopComplete    = "task_complete"     // the model said STATUS_TASK_COMPLETE
	StopImpossible  = "task_impossible"   // the model said STATUS_TASK_IMPOSSIBLE
	StopMaxSteps    = "max_steps"         // the step budget ran out
	StopRepeated    = "repeated_action"   // the same action N times in a row (not dispatched the last time)
	StopUnparsable  = "unparsable_output" // the model text is not an Auto-UI action
	StopInterrupted = "interrupted"       // the context was cancelled (Ctrl-C)
	StopUserQuit    = "user_quit"         // --confirm answered q
	StopError       = "error"             // device or model failure; Summary.Error says which
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
	Engine   engine.Timings // the predictor's own breakdown
	Dispatch time.Duration
	Settle   time.Duration
	Total    time.Duration
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MarshalJSON writes milliseconds.
func (t StepTimings) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Capture  float64        `json:"capture_ms"`
		Predict  float64        `json:"predict_ms"`
		Engine   engine.Timings `json:"engine"`
		Dispatch float64        `json:"dispatch_ms"`
		Settle   float64        `json:"settle_ms"`
		Total    float64        `json:"total_ms"`
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
	Error      string         `json:"error,omitempty"`
	Timings    StepTimings    `json:"timings"`
}

// Summary is summary.json.
type Summary struct {
	Goal       string `json:"goal"`
	Serial     string `json:"serial"`
	Model      string `json:"device_model,omitempty"`
	DryRun     bool   `json:"dry_run"`
	Steps      int    `json:"steps"`
	Dispatched int    `json:"dispatched"`
	StopReason string `json:"stop_reason"`
	Error      string `json:"error,omitempty"`
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
// is written, so an interrupted or failed run keeps everything so far.
type trajectory struct {
	dir   string
	steps *os.File
	aw    *os.File
	awCtx awContext
}

func newTrajectory(dir string) (*trajectory, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	steps, err := os.Create(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("create steps.jsonl: %w", err)
	}
	aw, err := os.Create(filepath.Join(dir, "android_world.jsonl"))
	if err != nil {
		steps.Close()
		return nil, fmt.Errorf("create android_world.jsonl: %w", err)
	}
	return &trajectory{dir: dir, steps: steps, aw: aw}, nil
}

func (t *trajectory) writeFile(name string, data []byte) error {
	if t == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(t.dir, name), data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func (t *trajectory) writeStep(s *Step, performed bool) error {
	if t == nil {
		return nil
	}
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode step %d: %w", s.Step, err)
	}
	w := bufio.NewWriter(t.steps)
	w.Write(line)
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write steps.jsonl: %w", err)
	}
	if performed && s.Action != nil && s.Gesture != nil {
		if aw, ok := t.awCtx.convert(*s.Action, *s.Gesture); ok {
			if _, err := t.aw.Write(append(aw, '\n')); err != nil {
				return fmt.Errorf("write android_world.jsonl: %w", err)
			}
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
	errs := []error{t.writeFile("summary.json", append(data, '\n')), t.steps.Close(), t.aw.Close()}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
