// Package bench measures the autoui pipeline stage by stage on fixed inputs,
// and sets the measurements beside this machine's physical limits (package
// bench/probe) and beside other runtimes (scripts/peers).
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

// Stage names, shared with the peers' JSON (scripts/peers) and the report.
const (
	StageDecodeImage = "decode_image" // PNG/JPEG bytes -> image
	StagePreprocess  = "preprocess"   // resize + normalize
	StageVision      = "vision"
	StageTokenize    = "tokenize"
	StageEncoder     = "encoder"
	StageFusion      = "fusion"
	StageCross       = "cross"       // the cross graph's K/V projection and the cache's set-up (part of first_step)
	StageFirstStep   = "first_step"  // first decoder call (cross K/V computed)
	StageDecodeStep  = "decode_step" // one later decoder call (mean over the action's later calls)
	StageLaterSteps  = "later_steps" // all later decoder calls of the action
	StageParse       = "parse"       // detokenize + parse the action
	StageTextPath    = "text_path"   // tokenize .. parse: the part every peer runs
	StageTotal       = "total"       // decode_image + everything: one action end to end
)

// Stages lists the stage names in pipeline order.
var Stages = []string{
	StageDecodeImage, StagePreprocess, StageVision, StageTokenize, StageEncoder, StageFusion,
	StageCross, StageFirstStep, StageDecodeStep, StageLaterSteps, StageParse, StageTextPath, StageTotal,
}

// Options say how much to measure.
type Options struct {
	// Runs is the number of measured passes over the cases; Warmup passes
	// run first and are discarded.
	Runs, Warmup int
	// Tokens is the fixed generated length: </s> is masked until Tokens
	// tokens exist and generation stops there (random weights never emit a
	// meaningful </s>, trained ones would at ~60-80 tokens).
	Tokens int
	// Replay, when set, is the action every case decodes (predict.Request.Replay,
	// without </s>): real decoder calls with a realistic output, so speculative
	// decoding needs the calls a trained model would. Tokens must be
	// len(Replay)+1.
	Replay []int64
	// ReplayText is Replay's text, for reports.
	ReplayText string
	// Batch, when above 0, is the number of screens per PredictBatch call
	// (RunBatch): copies of the cases, round-robin.
	Batch int
	// Concurrent is how many of RunBatch's measured batches run at once
	// (0: 1), as `serve --concurrent-batches` runs them.
	Concurrent int
	// Pipeline has RunBatch decode the next batch's screens and resize
	// them with Shrink (to the vision input) while the engine predicts
	// this batch, one batch in the engine at a time: `eval run`'s
	// read-ahead.
	Pipeline bool
	Shrink   func(image.Image) image.Image
}

// TypicalAction is a typical Auto-UI output (a tap on a search result with a
// four-step plan), what --replay typical decodes.
const TypicalAction = `Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER,STATUS_TASK_COMPLETE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]", "lift_point": "[0.1852, 0.4979]", "typed_text": ""`

// MixedReplay is the --replay value (serve's) under which requests decode
// MixedActions in turn.
const MixedReplay = "mixed"

// MixedActions are Auto-UI outputs of several lengths, which `serve --replay
// mixed` has its requests decode in turn, so that the rows of a decode end
// at different calls as a trained model's answers do: half of them taps (57%
// of the default model's answers on its test split are), then a typed
// query, a scroll, a back press and the task's end.
var MixedActions = []string{
	TypicalAction,
	action.Target([]action.Type{action.TypeText, action.PressEnter, action.StatusTaskComplete},
		action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "weather in paris tomorrow"}),
	TypicalAction,
	action.Target([]action.Type{action.DualPoint, action.DualPoint, action.StatusTaskComplete},
		action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}),
	TypicalAction,
	action.Target([]action.Type{action.PressBack, action.StatusTaskComplete},
		action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint}),
	TypicalAction,
	action.Target([]action.Type{action.StatusTaskComplete},
		action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}),
}

// ReplayTokens resolves a --replay value: "typical" is TypicalAction, any
// other text itself. It returns the text and its tokens (without </s>).
// "mixed" is several actions (MixedActions: serve's), refused here.
func ReplayTokens(tok interface{ EncodeNoEOS(string) ([]int64, error) }, replay string) (string, []int64, error) {
	switch replay {
	case "typical":
		replay = TypicalAction
	case MixedReplay:
		return "", nil, errors.New(`"mixed" is several actions of different lengths (serve --replay mixed); a bench case decodes one`)
	}
	ids, err := tok.EncodeNoEOS(replay)
	return replay, ids, err
}

// Action is one measured prediction.
type Action struct {
	Case         string `json:"case"`
	Run          int    `json:"run"`
	SourceTokens int    `json:"source_tokens"`
	SourceText   string `json:"-"`
	Tokens       int    `json:"tokens"`
	DecoderCalls int    `json:"decoder_calls"`
	// EncoderRows and EncoderLength are the shape of the encoder and fusion
	// calls the action took part in (predict.Timings); 0 where unknown.
	EncoderRows   int                      `json:"encoder_rows,omitempty"`
	EncoderLength int                      `json:"encoder_length,omitempty"`
	IDs           []int64                  `json:"-"`
	Stages        map[string]time.Duration `json:"-"`
}

// Run predicts every case opts.Warmup + opts.Runs times and returns the
// measured actions (warm-up excluded), in order. On an error (Ctrl-C) it
// returns the actions measured before it too.
func Run(ctx context.Context, p predict.Predictor, cases []Case, opts Options) ([]Action, error) {
	if err := check(cases, opts); err != nil {
		return nil, err
	}
	var out []Action
	for r := -opts.Warmup; r < opts.Runs; r++ {
		for _, c := range cases {
			a, err := runOne(ctx, p, c, opts)
			if err != nil {
				return out, fmt.Errorf("case %s run %d: %w", c.ID, r, err)
			}
			if r >= 0 {
				a.Run = r
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// check refuses options and cases that cannot be measured.
func check(cases []Case, opts Options) error {
	if len(cases) == 0 {
		return fmt.Errorf("no benchmark cases")
	}
	if opts.Runs < 1 || opts.Warmup < 0 {
		return fmt.Errorf("runs = %d, warm-up = %d: need at least 1 run, and no negative warm-up", opts.Runs, opts.Warmup)
	}
	if opts.Tokens < 1 {
		return fmt.Errorf("tokens = %d: need at least 1", opts.Tokens)
	}
	if opts.Replay != nil && opts.Tokens != len(opts.Replay)+1 {
		return fmt.Errorf("tokens = %d with a %d-token replay: want %d (the replay and </s>)", opts.Tokens, len(opts.Replay), len(opts.Replay)+1)
	}
	return nil
}

func runOne(ctx context.Context, p predict.Predictor, c Case, opts Options) (Action, error) {
	t := time.Now()
	img, err := decodeScreen(c)
	if err != nil {
		return Action{}, err
	}
	decode := time.Since(t)
	res, err := p.Predict(ctx, request(c, img, opts))
	if err != nil {
		return Action{}, err
	}
	return screenAction(c, res, decode, opts)
}

func decodeScreen(c Case) (image.Image, error) {
	img, err := preprocess.Decode(bytes.NewReader(c.ScreenBytes))
	if err != nil {
		return nil, fmt.Errorf("screen %s: %w", c.Screen, err)
	}
	return img, nil
}

// request is the case's request for the fixed length or the replay.
func request(c Case, img image.Image, opts Options) predict.Request {
	req := predict.Request{
		Screen: img, Goal: c.Goal, History: c.History,
		MaxNewTokens: opts.Tokens, MinNewTokens: opts.Tokens,
	}
	if opts.Replay != nil {
		req.MinNewTokens, req.Replay = 0, opts.Replay
	}
	return req
}

// screenAction is the measured action of a result from a screen decoded in
// decode, after checking its length.
func screenAction(c Case, res *predict.Result, decode time.Duration, opts Options) (Action, error) {
	if len(res.TokenIDs) != opts.Tokens {
		return Action{}, fmt.Errorf("generated %d tokens, want exactly %d (is </s> suppression working?)", len(res.TokenIDs), opts.Tokens)
	}
	a := textAction(c, res)
	tm := res.Timings
	a.Stages[StageDecodeImage] = decode
	a.Stages[StagePreprocess] = tm.Preprocess
	a.Stages[StageVision] = tm.Vision
	a.Stages[StageTotal] = decode + tm.Total
	return a, nil
}

// textAction is the measured action of a result: the text-path stages (the
// part every runner has) and the token counts.
func textAction(c Case, res *predict.Result) Action {
	tm := res.Timings
	a := Action{
		Case: c.ID, SourceTokens: res.SourceTokens, SourceText: res.SourceText, IDs: res.TokenIDs,
		Tokens: len(res.TokenIDs), DecoderCalls: tm.DecoderCalls,
		EncoderRows: tm.EncoderRows, EncoderLength: tm.EncoderLength,
		Stages: map[string]time.Duration{
			StageTokenize:   tm.Tokenize,
			StageEncoder:    tm.Encoder,
			StageFusion:     tm.Fusion,
			StageCross:      tm.Cross,
			StageFirstStep:  tm.FirstStep,
			StageLaterSteps: tm.LaterSteps,
			StageParse:      tm.Parse,
			StageTextPath:   tm.Tokenize + tm.Encoder + tm.Fusion + tm.FirstStep + tm.LaterSteps + tm.Parse,
		},
	}
	if tm.DecoderCalls > 1 {
		a.Stages[StageDecodeStep] = tm.LaterSteps / time.Duration(tm.DecoderCalls-1)
	}
	return a
}
