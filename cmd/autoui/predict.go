package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/annotate"
	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/atomicfile"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/npy"
	"github.com/autoui/autoui/predict"
)

func init() {
	register(command{name: "predict", summary: "predict the next action for one screenshot", run: runPredict})
}

// prevFlags collects repeated --prev values.
type prevFlags []action.Action

func (p *prevFlags) String() string { return fmt.Sprint(len(*p)) }

func (p *prevFlags) Set(s string) error {
	a, err := parseActionArg(s)
	if err != nil {
		return err
	}
	*p = append(*p, a)
	return nil
}

func runPredict(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("predict", flag.ContinueOnError)
	mf := addModelFlags(fs)
	screen := fs.String("screen", "", "screenshot (PNG or JPEG)")
	goal := fs.String("goal", "", "the task, in plain language; required")
	historyFile := fs.String("history", "", "previous actions, oldest first: a JSON array or JSON lines of {\"action_type\", \"touch_point\", \"lift_point\", \"typed_text\"}")
	var prev prevFlags
	fs.Var(&prev, "prev", "a previous action, repeatable, oldest first: tap:Y,X | swipe:up|down|left|right | swipe:Y1,X1,Y2,X2 | type:TEXT | back | home | enter | complete | impossible | a JSON object")
	features := fs.String("features", "", "precomputed image features (.npy float32, or a JSON array) instead of running the vision tower")
	asJSON := fs.Bool("json", false, "print the prediction as JSON")
	annotateOut := fs.String("annotate", "", "write the screenshot with the action drawn on it to this PNG")
	dumpFeatures := fs.String("dump-features", "", "write the image features used (computed or given) to this .npy file (float32, shape (image_dim,))")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui predict --model DIR --screen FILE --goal TEXT [flags]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(*goal) == "":
		return usageErrorf("--goal is required")
	case *screen == "" && *features == "":
		return usageErrorf("--screen (or --features) is required")
	case *screen != "" && *features != "":
		return usageErrorf("give --screen or --features, not both")
	case *annotateOut != "" && *screen == "":
		return usageErrorf("--annotate needs --screen")
	}
	history := []action.Action(prev)
	if *historyFile != "" {
		h, err := readHistory(*historyFile)
		if err != nil {
			return err
		}
		history = append(h, history...)
	}
	req := predict.Request{Goal: *goal, History: history}
	if *screen != "" {
		dopts, err := mf.decodeOptions()
		if err != nil {
			return err
		}
		img, err := preprocess.DecodeFileWith(*screen, dopts)
		if err != nil {
			return fmt.Errorf("screen: %w", err)
		}
		req.Screen = img
	}
	if *features != "" {
		f, err := readFeatures(*features)
		if err != nil {
			return err
		}
		req.Features = f
	}

	p, closeFn, err := mf.open()
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := p.Predict(ctx, req)
	var bad *predict.RequestError
	if errors.As(err, &bad) {
		return usageError{err} // a limit or value the flags gave
	}
	if err != nil {
		return err
	}
	if *annotateOut != "" && res.ParseErr == nil {
		if err := writePNG(*annotateOut, annotate.Action(req.Screen, res.Action)); err != nil {
			return err
		}
	}
	if *dumpFeatures != "" {
		if err := atomicfile.Write(*dumpFeatures, func(w io.Writer) error { return npy.Write(w, res.Features) }); err != nil {
			return fmt.Errorf("--dump-features: %w", err)
		}
	}
	if *asJSON {
		if err := printPredictionJSON(os.Stdout, res); err != nil {
			return err
		}
	} else {
		printPrediction(os.Stdout, res)
	}
	if res.ParseErr != nil {
		return fmt.Errorf("model output is not a valid action: %w", res.ParseErr)
	}
	return nil
}

func printPredictionJSON(w io.Writer, res *predict.Result) error {
	out := api.FromResult(res)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printPrediction(w io.Writer, res *predict.Result) {
	if res.ParseErr != nil {
		fmt.Fprintf(w, "action:  (unparseable model output)\n")
	} else {
		fmt.Fprintf(w, "action:  %s\n", action.Describe(res.Action))
		names := make([]string, len(res.Plan))
		for i, t := range res.Plan {
			names[i] = t.String()
		}
		fmt.Fprintf(w, "plan:    [%s]\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "raw:     %s\n", res.Raw)
	t := res.Timings
	ms := func(d interface{ Microseconds() int64 }) string {
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
	}
	fmt.Fprintf(w, "time:    %s ms total (preprocess %s, vision %s, tokenize %s, encoder %s, fusion %s, decode %s+%s over %d calls, %d tokens)\n",
		ms(t.Total), ms(t.Preprocess), ms(t.Vision), ms(t.Tokenize), ms(t.Encoder), ms(t.Fusion), ms(t.FirstStep), ms(t.LaterSteps), t.DecoderCalls, len(res.TokenIDs))
}

// parseActionArg reads a --prev value: a compact form or a JSON object. The
// action must pass action.Validate, whatever form it came in.
func parseActionArg(s string) (action.Action, error) {
	a, err := parseActionForm(strings.TrimSpace(s))
	if err != nil {
		return action.Action{}, err
	}
	if err := a.Validate(); err != nil {
		return action.Action{}, fmt.Errorf("--prev %q: %w", s, err)
	}
	return a, nil
}

func parseActionForm(s string) (action.Action, error) {
	if strings.HasPrefix(s, "{") {
		var a action.Strict
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			return a.Action, fmt.Errorf("--prev %q: %w", s, err)
		}
		return a.Action, nil
	}
	kind, arg, _ := strings.Cut(s, ":")
	nums := func(n int) ([]float64, error) {
		parts := strings.Split(arg, ",")
		if len(parts) != n {
			return nil, fmt.Errorf("--prev %q: want %d comma-separated numbers", s, n)
		}
		out := make([]float64, n)
		for i, p := range parts {
			v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("--prev %q: %q is not a normalized coordinate in [0, 1]", s, p)
			}
			out[i] = v // range and finiteness: action.Validate
		}
		return out, nil
	}
	switch strings.ToLower(kind) {
	case "tap":
		v, err := nums(2)
		if err != nil {
			return action.Action{}, err
		}
		p := action.Point{Y: v[0], X: v[1]}
		return action.Action{Type: action.DualPoint, Touch: p, Lift: p}, nil
	case "swipe":
		dirs := map[string][2]action.Point{
			"up": {{Y: 0.8, X: 0.5}, {Y: 0.2, X: 0.5}}, "down": {{Y: 0.2, X: 0.5}, {Y: 0.8, X: 0.5}},
			"left": {{Y: 0.5, X: 0.8}, {Y: 0.5, X: 0.2}}, "right": {{Y: 0.5, X: 0.2}, {Y: 0.5, X: 0.8}},
		}
		if d, ok := dirs[strings.ToLower(arg)]; ok {
			return action.Action{Type: action.DualPoint, Touch: d[0], Lift: d[1]}, nil
		}
		v, err := nums(4)
		if err != nil {
			return action.Action{}, err
		}
		return action.Action{Type: action.DualPoint, Touch: action.Point{Y: v[0], X: v[1]}, Lift: action.Point{Y: v[2], X: v[3]}}, nil
	case "type":
		return action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: arg}, nil
	}
	simple := map[string]action.Type{"back": action.PressBack, "home": action.PressHome, "enter": action.PressEnter,
		"complete": action.StatusTaskComplete, "impossible": action.StatusTaskImpossible}
	if t, ok := simple[strings.ToLower(s)]; ok {
		return action.Action{Type: t, Touch: action.NoPoint, Lift: action.NoPoint}, nil
	}
	return action.Action{}, fmt.Errorf("--prev %q: want tap:Y,X, swipe:DIR, swipe:Y1,X1,Y2,X2, type:TEXT, back, home, enter, complete, impossible or a JSON object", s)
}

// historyFileLimit bounds a --history file: predict.MaxHistory actions of
// the largest typed text fit with room to spare, and /dev/zero does not.
const historyFileLimit = 16 << 20

// readHistory reads a JSON array or JSON lines of actions.
func readHistory(path string) ([]action.Action, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, historyFileLimit+1))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if len(raw) > historyFileLimit {
		return nil, fmt.Errorf("history %s: over %d MiB (at most %d actions)", path, historyFileLimit>>20, predict.MaxHistory)
	}
	return parseHistory(raw, path)
}

// parseHistory reads a JSON array or JSON lines of actions (name labels
// errors); every action must pass action.Validate.
func parseHistory(raw []byte, name string) ([]action.Action, error) {
	trimmed := strings.TrimSpace(strings.TrimPrefix(string(raw), "\ufeff"))
	var out []action.Action
	if strings.HasPrefix(trimmed, "[") {
		var all []action.Strict
		if err := json.Unmarshal([]byte(trimmed), &all); err != nil {
			return nil, fmt.Errorf("history %s: %w", name, err)
		}
		for i, a := range all {
			if err := a.Validate(); err != nil {
				return nil, fmt.Errorf("history %s action %d: %w", name, i+1, err)
			}
			out = append(out, a.Action)
		}
		return out, nil
	}
	for i, line := range strings.Split(trimmed, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var a action.Strict
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			if !strings.HasPrefix(strings.TrimSpace(line), "{") {
				return nil, fmt.Errorf("history %s line %d: not a JSON action (a line holds one, as predict --json prints; tap:Y,X is --prev's form)", name, i+1)
			}
			return nil, fmt.Errorf("history %s line %d: %w", name, i+1, err)
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("history %s line %d: %w", name, i+1, err)
		}
		out = append(out, a.Action)
	}
	return out, nil
}

// readFeatures reads a float32 vector from .npy or a JSON array. Empty,
// truncated or malformed arrays and non-finite values are errors.
func readFeatures(path string) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("features: %w", err)
	}
	defer f.Close()
	var v []float32
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		if v, _, err = npy.Read(bufio.NewReader(f)); err != nil {
			return nil, fmt.Errorf("features %s: %w", path, err)
		}
	} else if err := json.NewDecoder(f).Decode(&v); err != nil {
		return nil, fmt.Errorf("features %s: want a .npy file or a JSON array of numbers: %w", path, err)
	}
	if err := checkFinite(v); err != nil {
		return nil, fmt.Errorf("features %s: %w", path, err)
	}
	return v, nil
}

// writePNG writes img atomically: a crash never leaves a half-written file.
func writePNG(path string, img image.Image) error {
	return atomicfile.Write(path, func(w io.Writer) error { return png.Encode(w, img) })
}

// checkFinite rejects an empty vector and names the first NaN or Inf.
func checkFinite(v []float32) error {
	if len(v) == 0 {
		return fmt.Errorf("no feature values")
	}
	for i, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("non-finite feature value %v at index %d", x, i)
		}
	}
	return nil
}
