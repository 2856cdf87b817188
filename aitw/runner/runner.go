// Package runner predicts every step of AITW episodes with a model and
// appends the predictions to a JSONL file, resumably: `autoui eval run`.
package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
)

// Predictor is what a run needs from a model (engine.Predictor has it).
type Predictor interface {
	Predict(ctx context.Context, req engine.Request) (*engine.Result, error)
	ImageFeatures(ctx context.Context, img image.Image) ([]float32, error)
}

// History says which previous actions the model sees.
type History string

// History modes: the gold actions (the paper's protocol) or the model's own
// previous predictions.
const (
	HistoryGold      History = "gold"
	HistoryPredicted History = "predicted"
)

// ParseHistory checks a --history value.
func ParseHistory(s string) (History, error) {
	switch History(s) {
	case HistoryGold, HistoryPredicted:
		return History(s), nil
	}
	return "", fmt.Errorf("bad --history %q: want gold or predicted", s)
}

// Options configure a run.
type Options struct {
	Files []string         // gold files, after aitw.ExpandPaths
	Read  aitw.ReadOptions // Subset and SkipCorrupt are used
	// Split, when set, selects the episodes to predict.
	Split   map[string]bool
	Shard   aitw.Shard
	History History
	// Limit stops after this many new predictions (0: no limit).
	Limit int
	// OutDir receives predictions.jsonl.
	OutDir string
	// CacheDir holds vision features keyed by a hash of CacheKey and the
	// pixels ("" disables the cache). CacheKey should identify the vision
	// model, so features of different models never mix.
	CacheDir string
	CacheKey string

	// Progress receives progress output (nil: none). TTY redraws one line
	// with a bar; otherwise a plain line is printed every ProgressEvery.
	Progress      io.Writer
	TTY           bool
	ProgressEvery time.Duration
}

// Summary reports what a run did.
type Summary struct {
	Predicted   int // new predictions written
	AlreadyDone int // steps found in the predictions file
	Episodes    int // episodes visited (in split and shard)
	ParseErrors int // predictions whose text did not parse
	CacheHits   int
	CacheMisses int
	Interrupted bool // stopped by the context (Ctrl-C); re-run to resume
	LimitHit    bool
	TornTail    bool // a torn last line was cut from the file
	Read        aitw.ReadStats
	Path        string
	Decode      DecodeStats // over this run's new predictions
}

// DecodeStats sums the text path of a run's predictions, so decoding
// settings (speculative or greedy, constrained) can be compared on real data.
type DecodeStats struct {
	Calls    int           // sequential decoder calls
	Tokens   int           // generated tokens
	TextPath time.Duration // tokenize + encoder + fusion + decoding
	Decode   time.Duration // decoder calls
}

func (d *DecodeStats) add(t engine.Timings, tokens int) {
	d.Calls += t.DecoderCalls
	d.Tokens += tokens
	d.Decode += t.FirstStep + t.LaterSteps
	d.TextPath += t.Tokenize + t.Encoder + t.Fusion + t.FirstStep + t.LaterSteps
}

// PredictionsFile is the file name a run writes in its output directory.
const PredictionsFile = "predictions.jsonl"

var errStop = errors.New("stop")

// Run predicts the selected episodes' steps not yet in OutDir's
// predictions file, appending as it goes.
func Run(ctx context.Context, p Predictor, opts Options) (Summary, error) {
	var sum Summary
	if opts.History == "" {
		opts.History = HistoryGold
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return sum, fmt.Errorf("eval run: %w", err)
	}
	sum.Path = filepath.Join(opts.OutDir, PredictionsFile)
	w, done, err := aitw.OpenPredictionWriter(sum.Path)
	if err != nil {
		return sum, err
	}
	defer w.Close()
	sum.TornTail = done.TornTail

	total := 0 // episodes to visit, when known up front (a split is given)
	if opts.Split != nil {
		for id := range opts.Split {
			if opts.Shard.Has(id) {
				total++
			}
		}
	}
	prog := newProgress(opts, total)
	defer prog.finish(&sum)

	ro := opts.Read
	ro.KeepPixels = true
	ro.Keep = func(id string) bool {
		return (opts.Split == nil || opts.Split[id]) && opts.Shard.Has(id)
	}
	sum.Read, err = aitw.StreamEpisodes(opts.Files, ro, func(ep aitw.Episode) error {
		sum.Episodes++
		err := runEpisode(ctx, p, opts, ep, done, w, &sum, prog)
		prog.episodeDone(&sum)
		return err
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return sum, err
}

func runEpisode(ctx context.Context, p Predictor, opts Options, ep aitw.Episode, done *aitw.PredictionSet,
	w *aitw.PredictionWriter, sum *Summary, prog *progress) error {
	var history []action.Action
	for _, s := range ep.Steps {
		key := aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}
		if prev, ok := done.ByStep[key]; ok {
			sum.AlreadyDone++
			history = appendHistory(history, opts.History, s.Action, prev.Action)
			continue
		}
		if opts.Limit > 0 && sum.Predicted >= opts.Limit {
			sum.LimitHit = true
			return errStop
		}
		if ctx.Err() != nil {
			sum.Interrupted = true
			return errStop
		}
		req := engine.Request{Goal: s.Goal, History: history}
		if s.Features != nil {
			req.Features = s.Features
		} else {
			feat, err := features(ctx, p, opts, s, sum)
			if err != nil {
				if ctx.Err() != nil {
					sum.Interrupted = true
					return errStop
				}
				return fmt.Errorf("episode %s step %d (%s): %w", ep.ID, s.StepID, s.Source, err)
			}
			req.Features = feat
		}
		res, err := p.Predict(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				sum.Interrupted = true // the step in flight is dropped, not half-written
				return errStop
			}
			return fmt.Errorf("episode %s step %d (%s): %w", ep.ID, s.StepID, s.Source, err)
		}
		pred := aitw.Prediction{EpisodeID: ep.ID, StepID: s.StepID, Subset: ep.Subset, Action: res.Action, Raw: res.Raw}
		if res.ParseErr != nil {
			pred.Action = action.Action{Touch: action.NoPoint, Lift: action.NoPoint} // type 0: matches nothing
			pred.ParseError = res.ParseErr.Error()
			sum.ParseErrors++
		}
		if err := w.Write(pred); err != nil {
			return err
		}
		done.ByStep[key] = pred
		sum.Predicted++
		sum.Decode.add(res.Timings, len(res.TokenIDs))
		prog.step(sum)
		history = appendHistory(history, opts.History, s.Action, pred.Action)
	}
	return nil
}

func appendHistory(h []action.Action, mode History, gold, pred action.Action) []action.Action {
	if mode == HistoryPredicted {
		if !pred.Type.Valid() {
			return h // an output that did not parse has no action to show
		}
		return append(h, pred)
	}
	return append(h, gold)
}

// features returns the step's vision features, from the cache when present.
func features(ctx context.Context, p Predictor, opts Options, s aitw.Step, sum *Summary) ([]float32, error) {
	var path string
	if opts.CacheDir != "" {
		path = cachePath(opts.CacheDir, opts.CacheKey, s)
		if f, err := readFeatures(path); err == nil {
			sum.CacheHits++
			return f, nil
		}
	}
	img, err := preprocess.FromRaw(s.Pixels, s.Height, s.Width, s.Channels)
	if err != nil {
		return nil, err
	}
	f, err := p.ImageFeatures(ctx, img)
	if err != nil {
		return nil, err
	}
	sum.CacheMisses++
	if path != "" {
		if err := writeFeatures(path, f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// cachePath is DIR/ab/abcdef...f32, the hash covering the cache key, the
// image shape and the pixels.
func cachePath(dir, key string, s aitw.Step) string {
	h := sha256.New()
	var hdr [12]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(s.Height))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(s.Width))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(s.Channels))
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(hdr[:])
	h.Write(s.Pixels)
	name := hex.EncodeToString(h.Sum(nil))
	return filepath.Join(dir, name[:2], name+".f32")
}

func readFeatures(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b)%4 != 0 {
		return nil, fmt.Errorf("feature cache %s: bad size %d", path, len(b))
	}
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f, nil
}

// writeFeatures writes atomically (temp file + rename), so a killed run never
// leaves a partial entry.
func writeFeatures(path string, f []float32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("feature cache: %w", err)
	}
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("feature cache: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("feature cache: %w", err)
	}
	return nil
}
