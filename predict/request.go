package predict

import (
	"encoding/json"
	"fmt"
	"image"
	"time"

	"github.com/autoui/autoui/action"
)

// Request is one prediction: a screen (or its precomputed vision features),
// the goal and the chain of previous actions, oldest first.
type Request struct {
	// Screen is the screenshot. Ignored when Features is set.
	Screen image.Image
	// Features are precomputed vision features (the bundle's image_dim floats),
	// e.g. from Auto-UI's released pickles or a feature cache.
	Features []float32
	Goal     string
	// History holds the previous actions, oldest first. The prompt keeps the
	// last HistoryWindow of them.
	History []action.Action
	// MaxNewTokens overrides the predictor's generated-token limit when > 0.
	MaxNewTokens int
	// Constrained decodes this request under the output grammar, as
	// engine.Options.Constrained does for every request.
	Constrained bool
	// MinNewTokens masks </s> until this many tokens are generated. Benchmarks
	// of random-weight bundles use it to generate a fixed length; it changes
	// the output, so predictions leave it 0.
	MinNewTokens int
	// Replay, for benchmarks only, stands in for the model's choices: every
	// decoder call runs for real, but the token "chosen" at each position is
	// the next of Replay (then </s>), and speculative drafts are accepted
	// exactly when they match it. A random-weight bundle then decodes a
	// realistic action (e.g. a trained model's output) with the number of
	// sequential calls a trained model would need. Without the trailing </s>.
	Replay []int64
}

// Result is the predicted next step.
type Result struct {
	Action action.Action
	Plan   []action.Type
	// Raw is the decoded model text; kept even when it does not parse.
	Raw string
	// ParseErr is non-nil when Raw is not a valid Auto-UI action; Action is
	// then invalid (type 0) with both points [-1, -1], never a usable tap.
	ParseErr error
	// TokenIDs are the generated ids, without the decoder start token,
	// including the final </s> when one was produced.
	TokenIDs []int64
	// SourceText is the prompt after history windowing, truncation and
	// whitespace collapse; SourceTokens its token count.
	SourceText   string
	SourceTokens int
	// SourceIDs are the prompt's token ids as the encoder saw them (with </s>).
	SourceIDs []int64
	// Features are the vision features used (computed or given).
	Features []float32
	Timings  Timings
}

// Timings are per-stage wall times of one prediction.
type Timings struct {
	// Preprocess is resize + normalize (image decode is the caller's); in a
	// batch the batch's, whose screens are resized together, over the cores.
	Preprocess time.Duration
	Vision     time.Duration
	Tokenize   time.Duration
	Encoder    time.Duration
	Fusion     time.Duration
	FirstStep  time.Duration // the cross graph's K/V projection and the first decoder call
	Cross      time.Duration // of FirstStep, the cross graph's K/V projection and the cache's set-up
	LaterSteps time.Duration // all later decoder calls
	Parse      time.Duration
	Total      time.Duration
	// DecoderCalls counts sequential decoder runs.
	DecoderCalls int
	// EncoderRows and EncoderLength are the shape of the encoder and fusion
	// calls the item took part in: a batch's prompts are encoded in groups
	// of similar length, each group's padded to its longest. Bookkeeping
	// for bounds (autoui bench), not written as JSON.
	EncoderRows, EncoderLength int
}

// EncoderShare is the item's share of the encoder and fusion calls it took
// part in: their time over the EncoderRows items that shared them, or over
// batch (the call's items) where the predictor does not say.
func (t Timings) EncoderShare(batch int) time.Duration {
	sharing := t.EncoderRows
	if sharing <= 0 {
		sharing = max(batch, 1)
	}
	return (t.Encoder + t.Fusion) / time.Duration(sharing)
}

// SharedStages is what a batch's results spent on the stages their items
// shared, each taken once: the screens (preprocessing and vision: the
// call's, in every item that had a screen) and the prompts' encoder and
// fusion calls (each group's, EncoderShare).
func SharedStages(res []*Result) (screens, prompts time.Duration) {
	for _, r := range res {
		screens = max(screens, r.Timings.Preprocess+r.Timings.Vision)
		prompts += r.Timings.EncoderShare(len(res))
	}
	return screens, prompts
}

// UnmarshalJSON reads what MarshalJSON writes (to the microsecond).
func (t *Timings) UnmarshalJSON(data []byte) error {
	var ms struct {
		Preprocess   float64 `json:"preprocess_ms"`
		Vision       float64 `json:"vision_ms"`
		Tokenize     float64 `json:"tokenize_ms"`
		Encoder      float64 `json:"encoder_ms"`
		Fusion       float64 `json:"fusion_ms"`
		FirstStep    float64 `json:"first_step_ms"`
		Cross        float64 `json:"cross_ms"`
		LaterSteps   float64 `json:"later_steps_ms"`
		Parse        float64 `json:"parse_ms"`
		Total        float64 `json:"total_ms"`
		DecoderCalls int     `json:"decoder_calls"`
	}
	if err := json.Unmarshal(data, &ms); err != nil {
		return fmt.Errorf("timings: %w", err)
	}
	d := func(v float64) time.Duration { return time.Duration(v*1000) * time.Microsecond }
	*t = Timings{Preprocess: d(ms.Preprocess), Vision: d(ms.Vision), Tokenize: d(ms.Tokenize), Encoder: d(ms.Encoder),
		Fusion: d(ms.Fusion), FirstStep: d(ms.FirstStep), Cross: d(ms.Cross), LaterSteps: d(ms.LaterSteps), Parse: d(ms.Parse), Total: d(ms.Total),
		DecoderCalls: ms.DecoderCalls}
	return nil
}

// MarshalJSON writes the stages in milliseconds, as the CLI and reports show them.
func (t Timings) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.Marshal(map[string]any{
		"preprocess_ms":  ms(t.Preprocess),
		"vision_ms":      ms(t.Vision),
		"tokenize_ms":    ms(t.Tokenize),
		"encoder_ms":     ms(t.Encoder),
		"fusion_ms":      ms(t.Fusion),
		"first_step_ms":  ms(t.FirstStep),
		"cross_ms":       ms(t.Cross),
		"later_steps_ms": ms(t.LaterSteps),
		"parse_ms":       ms(t.Parse),
		"total_ms":       ms(t.Total),
		"decoder_calls":  t.DecoderCalls,
	})
}

// Limits on what one request may hold. The prompt keeps at most
// max_source_tokens (512 for Auto-UI), so text far beyond it only costs
// tokenizer time and memory: a request over a limit is refused, not cut.
const (
	MaxGoalBytes = 8 << 10
	// MaxHistory is the most previous actions; the prompt shows the last
	// history window (8 for Auto-UI) of them.
	MaxHistory = 1000
	// MaxTypedTextBytes bounds each history action's typed text.
	MaxTypedTextBytes = 8 << 10
)

// RequestError is a request the engine refuses (a limit, a bad value): the
// caller's input is at fault, not the model or the runtime.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// CheckSize refuses goals and histories over the limits above.
func (r Request) CheckSize() error {
	if n := len(r.Goal); n > MaxGoalBytes {
		return fmt.Errorf("goal is %d bytes, over the limit of %d", n, MaxGoalBytes)
	}
	if n := len(r.History); n > MaxHistory {
		return fmt.Errorf("history has %d actions, over the limit of %d", n, MaxHistory)
	}
	for i, a := range r.History {
		if n := len(a.Text); n > MaxTypedTextBytes {
			return fmt.Errorf("history action %d: typed_text is %d bytes, over the limit of %d", i, n, MaxTypedTextBytes)
		}
	}
	return nil
}
