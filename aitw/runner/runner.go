// Package runner predicts every step of AITW episodes with a model and
// appends the predictions to a JSONL file, resumably: `autoui eval run`.
package runner

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/progress"
	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

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
	// Batch is the most steps predicted per PredictBatch call (0 or 1: one
	// at a time; see DefaultBatch). With gold history any pending steps
	// share a call and lines keep Batch 1's order; with predicted history
	// a call holds the next step of up to Batch different episodes, so
	// lines interleave those episodes. Predictions are the same either way.
	Batch int
	// Continuous decodes on Batch rows of one continuous decode (the
	// predictor's predict.Streamer) instead of batches: a step joins as soon
	// as a row is free and leaves when its own answer ends (streamQueue).
	// With gold history lines keep Batch 1's order; with predicted history
	// they come as steps finish. Predictions are the same.
	Continuous bool
	// Concurrent is how many engine calls a batched run keeps in flight (0
	// or 1: one at a time): under CUDA-graph capture one call's screens and
	// prompts are seen while another decodes. Lines are written in the
	// calls' order, so with gold history they keep Batch 1's order; with
	// predicted history each call takes other episodes than those in flight.
	// Predictions are the same.
	Concurrent int
	// JoinMin is, with Continuous, the fewest steps that join a busy decode
	// at once (0: 1); fewer join when the decode is idle or the last steps
	// are left. Each join pauses the decode for its prefill, which a GPU
	// does for a few screens in about the time of one.
	JoinMin int
	// OutDir receives predictions.jsonl.
	OutDir string
	// CacheDir holds vision features keyed by a hash of CacheKey and the
	// pixels ("" disables the cache). CacheKey should identify the vision
	// model, so features of different models never mix.
	CacheDir string
	CacheKey string
	// Shrink, when set, resizes a screen to the engine's input size
	// (engine.Predictor.Shrink, which predicts exactly as the whole screen
	// does). The read-ahead then resizes the screens the engine will see
	// on its own goroutines, beside the engine's calls instead of inside
	// them, and holds 200 KB a screen instead of a screenshot's 7.8 MB.
	Shrink func(image.Image) image.Image

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
	// CacheDamaged counts cache entries that failed their checksum (they
	// were recomputed); CacheWriteFailed is set when an entry could not be
	// written and the run went on without caching.
	CacheDamaged     int
	CacheWriteFailed bool
	Interrupted      bool // stopped by the context (Ctrl-C); re-run to resume
	LimitHit         bool
	TornTail         bool // a torn last line was cut from the file
	Read             aitw.ReadStats
	Path             string
	Decode           DecodeStats // over this run's new predictions
	// AfterFirst is what followed the run's first engine call (in a
	// continuous decode, its first Batch predictions): the run's pace
	// without the warm-up that call carries (an engine's first runs, CUDA
	// graphs captured), which a short run on a GPU would be mostly about.
	AfterFirst struct {
		First int // the predictions of the first call
		Steps int // written after them
		Time  time.Duration
		// Of Time, on the run's goroutine (batches; a continuous decode
		// runs on its own): Engine waiting for the predictor's calls,
		// Reading waiting for the read-ahead's next episode. The rest is
		// the run's own work between calls (requests, writing
		// predictions), during which the engine idles unless other calls
		// are in flight (Options.Concurrent).
		Engine, Reading time.Duration
	}
}

// DecodeStats sums the text path of a run's predictions, so decoding
// settings (speculative or greedy, constrained) can be compared on real data.
// They measure the work done: a batched engine call counts once, however
// many steps it served, so per-step figures are amortized over the batch.
type DecodeStats struct {
	Calls    int           // sequential decoder calls
	Tokens   int           // generated tokens
	TextPath time.Duration // tokenize + encoder + fusion + decoding
	Decode   time.Duration // decoder calls
	// Batches counts the engine calls; Screens and Prompts are their
	// screens' stages (preprocessing + vision, once per call) and their
	// prompts' encoder and fusion calls (each group's once). The two may
	// overlap in time (the engine encodes prompts while it sees screens).
	Batches          int
	Screens, Prompts time.Duration
}

// addBatch adds one PredictBatch call's results. PredictBatch gives every
// item the full time of each shared call it took part in, so the shared
// stages are taken once: encoder and fusion once per group of prompts
// (Timings.EncoderRows items share them; where a predictor does not say,
// the whole batch), decoding from the item that decoded longest (it took
// part in every decoder call).
func (d *DecodeStats) addBatch(res []*predict.Result) {
	var calls int
	var decode time.Duration
	for _, r := range res {
		t := r.Timings
		d.Tokens += len(r.TokenIDs)
		d.TextPath += t.Tokenize // each item's own
		calls = max(calls, t.DecoderCalls)
		decode = max(decode, t.FirstStep+t.LaterSteps)
	}
	screens, prefill := predict.SharedStages(res)
	prefill = prefill.Round(time.Microsecond)
	d.Calls += calls
	d.Decode += decode
	d.TextPath += prefill + decode
	d.Batches++
	d.Screens += screens
	d.Prompts += prefill
}

// errStop ends the episode stream early (limit reached or interrupted).
var errStop = errors.New("stop")

// Run predicts the selected episodes' steps not yet in OutDir's
// predictions file, appending as it goes. A batch of one is a single
// prediction; p must return the features it computed for a request that
// carried its screen (the engine does, a server does not).
func Run(ctx context.Context, p predict.Predictor, opts Options) (Summary, error) {
	var sum Summary
	if opts.History == "" {
		opts.History = HistoryGold
	}
	if opts.Batch < 0 {
		return sum, fmt.Errorf("eval run: batch %d: must be >= 0", opts.Batch)
	}
	if opts.Concurrent > 1 && opts.Continuous {
		return sum, errors.New("eval run: concurrent calls are for batches (a continuous decode takes steps as rows free up)")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return sum, fmt.Errorf("eval run: %w", err)
	}
	sum.Path = filepath.Join(opts.OutDir, runinfo.PredictionsFile)
	w, done, err := aitw.OpenPredictionWriter(sum.Path)
	if err != nil {
		return sum, err
	}
	defer w.Close()
	sum.TornTail = done.TornTail

	prog := progress.New(progress.Options{W: opts.Progress, TTY: opts.TTY, Every: opts.ProgressEvery}, episodesToVisit(opts), "episodes",
		func(el time.Duration) string {
			return fmt.Sprintf("%d steps predicted (%d already done), %.2f steps/s", sum.Predicted, sum.AlreadyDone, progress.Rate(sum.Predicted, el))
		})
	defer prog.Finish()
	r := &run{ctx: ctx, p: p, opts: opts, done: done, written: map[aitw.StepKey]aitw.Prediction{}, w: w, sum: &sum, prog: prog,
		batch: max(opts.Batch, 1), concurrent: max(opts.Concurrent, 1)}
	defer r.abandon() // calls still in flight after a failure: waited for, not written
	if opts.CacheDir != "" {
		r.cache = &featureCache{dir: opts.CacheDir, key: opts.CacheKey, warn: prog.Println, sum: &sum}
	}
	var s scheduler = &goldQueue{r: r}
	if opts.History == HistoryPredicted {
		s = &episodeSet{r: r}
	}
	if opts.Continuous {
		st, ok := p.(predict.Streamer)
		if !ok {
			return sum, errors.New("eval run: continuous decoding needs a predictor that streams (the engine's, with --cuda-graph)")
		}
		s = newStreamQueue(r, st, opts.History != HistoryPredicted)
	}

	ro := opts.Read
	ro.KeepPixels = true
	ro.Keep = func(id string) bool {
		return (opts.Split == nil || opts.Split[id]) && opts.Shard.Has(id)
	}
	stopped := false // by the scheduler: limit, interrupt or a failed call
	sum.Read, err = r.readAhead(opts.Files, ro, readAheadBytes(r.batch), func(ep readEpisode) error {
		sum.Episodes++
		err := s.add(ep)
		stopped = err != nil
		return err
	})
	if errors.Is(err, errStop) && !stopped {
		sum.Interrupted = true // the reading saw Ctrl-C first
	}
	if !stopped {
		// Steps read before a read error are still predicted, as Batch 1
		// predicts them before reading on.
		if ferr := s.finish(); ferr != nil && !errors.Is(ferr, errStop) {
			err = errors.Join(err, ferr)
		}
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if !r.warm.IsZero() {
		a := &sum.AfterFirst
		a.First, a.Steps, a.Time = r.warmN, sum.Predicted-r.warmN, time.Since(r.warm)
		a.Engine, a.Reading = r.engine, r.reading
	}
	return sum, err
}

// episodesToVisit is the number of episodes a run will visit when known up
// front (a split is given), else 0.
func episodesToVisit(opts Options) int {
	total := 0
	for id := range opts.Split {
		if opts.Shard.Has(id) {
			total++
		}
	}
	return total
}

// scheduler groups pending steps into engine calls: add takes each episode
// as it is read, finish predicts what is still pending at the end.
type scheduler interface {
	add(ep readEpisode) error
	finish() error
}

// run is the state one Run shares with its scheduler.
type run struct {
	ctx  context.Context
	p    predict.Predictor
	opts Options
	// done holds the predictions found at the start; it is not written
	// during the run, so the read-ahead reads it too. written holds this
	// run's, on the run's goroutine only: a source may hold an episode
	// twice (pickles are not checked for repeats).
	done    *aitw.PredictionSet
	written map[aitw.StepKey]aitw.Prediction
	w       *aitw.PredictionWriter
	sum     *Summary
	prog    *progress.Bar
	batch   int
	// concurrent is Options.Concurrent, at least 1; inflight the calls
	// started and not yet written, oldest first.
	concurrent int
	inflight   []*call
	warm       time.Time // when the first call's predictions were written (warmedUp)
	warmN      int       // how many they were
	// after warm: time in the predictor's calls, and waiting for the
	// read-ahead (Summary.AfterFirst)
	engine, reading time.Duration
	cache           *featureCache // nil: no cache
}

// job is one step waiting for its prediction.
type job struct {
	episode aitw.Episode // ID and Subset only: Steps is not kept
	step    aitw.Step    // a copy: holds this step's pixels only
	screen  image.Image  // the step's screen shrunk ahead (Options.Shrink), else nil
	req     predict.Request
	// cache is where the features computed for this step go ("" when they
	// were given or found, or the cache is off).
	cache string
	// last marks the episode's last pending step: the episode is finished
	// once it is written.
	last bool
}

func (j *job) key() aitw.StepKey { return aitw.StepKey{EpisodeID: j.episode.ID, StepID: j.step.StepID} }

func (j *job) String() string {
	return fmt.Sprintf("episode %s step %d (%s)", j.episode.ID, j.step.StepID, j.step.Source)
}

// room is how many more predictions the limit allows, beyond the calls in
// flight.
func (r *run) room() int {
	if r.opts.Limit <= 0 {
		return int(^uint(0) >> 1)
	}
	n := r.opts.Limit - r.sum.Predicted
	for _, c := range r.inflight {
		n -= len(c.jobs)
	}
	return n
}

// isDone reports whether the step is in the predictions file: found there
// at the start, or written by this run.
func (r *run) isDone(ep aitw.Episode, s aitw.Step) (aitw.Prediction, bool) {
	k := aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}
	if p, ok := r.done.ByStep[k]; ok {
		return p, true
	}
	p, ok := r.written[k]
	return p, ok
}

// doneAtStart reports whether the step was in the predictions file at the
// start (safe from any goroutine).
func (r *run) doneAtStart(ep aitw.Episode, s aitw.Step) bool {
	_, ok := r.done.ByStep[aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}]
	return ok
}

// stop ends the stream: the context's error wins over the limit.
func (r *run) stop() error {
	if r.ctx.Err() != nil {
		r.sum.Interrupted = true
	} else {
		r.sum.LimitHit = true
	}
	return errStop
}

// newJob prepares a step's request: features given by the source or found
// in the cache (found), else the screen's pixels, whose features the engine
// computes (batched with the others) and the run then caches.
func (r *run) newJob(ep readEpisode, i int, history []action.Action) job {
	s, found := ep.Steps[i], ep.lookup(i)
	j := job{episode: aitw.Episode{ID: ep.ID, Subset: ep.Subset}, step: s, screen: ep.screen(i)}
	j.req = predict.Request{Goal: s.Goal, History: history, Features: s.Features}
	if s.Features != nil || r.cache == nil {
		return j
	}
	r.cache.count(found)
	j.req.Features, j.cache = found.features, found.path
	return j
}

// predict runs one engine call for jobs and writes their predictions in
// order, returning them. A call cut short by the context writes nothing.
func (r *run) predict(jobs []job) ([]aitw.Prediction, error) {
	if err := r.start(jobs); err != nil {
		return nil, err
	}
	return r.collect()
}

// call is an engine call started by start, its results once done is
// closed.
type call struct {
	jobs []job
	done chan struct{}
	res  []*predict.Result
	err  error
}

// start begins an engine call for jobs, after the calls in flight (each
// call's predictions are written in the order the calls started). The
// caller hands jobs over.
func (r *run) start(jobs []job) error {
	if r.ctx.Err() != nil {
		r.sum.Interrupted = true
		return errStop
	}
	reqs, err := requests(jobs)
	if err != nil {
		return err
	}
	c := &call{jobs: jobs, done: make(chan struct{})}
	r.inflight = append(r.inflight, c)
	go func() {
		defer close(c.done)
		c.res, c.err = r.p.PredictBatch(r.ctx, reqs)
	}()
	return nil
}

// collect waits for the oldest call in flight and writes its predictions in
// order, returning them. A call cut short by the context writes nothing.
func (r *run) collect() ([]aitw.Prediction, error) {
	c := r.inflight[0]
	t := time.Now()
	<-c.done
	if !r.warm.IsZero() {
		r.engine += time.Since(t)
	}
	r.inflight = r.inflight[1:]
	jobs, res, err := c.jobs, c.res, c.err
	if err == nil && len(res) != len(jobs) {
		err = fmt.Errorf("%d results for %d requests", len(res), len(jobs))
	}
	if err != nil {
		if r.ctx.Err() != nil {
			r.sum.Interrupted = true // the steps in flight are dropped, not half-written
			return nil, errStop
		}
		return nil, fmt.Errorf("%s: %w", describe(jobs), err)
	}
	r.sum.Decode.addBatch(res)
	preds := make([]aitw.Prediction, len(jobs))
	for i := range jobs {
		if preds[i], err = r.write(&jobs[i], res[i]); err != nil {
			return nil, err
		}
	}
	r.warmedUp()
	return preds, nil
}

// abandon waits for the calls still in flight (a failed call or a stop
// left them), writing nothing: lines keep the calls' order, and a re-run
// predicts their steps.
func (r *run) abandon() {
	for _, c := range r.inflight {
		<-c.done
	}
	r.inflight = nil
}

// warmedUp marks the end of the first engine call's predictions
// (Summary.AfterFirst).
func (r *run) warmedUp() {
	if r.warm.IsZero() {
		r.warm, r.warmN = time.Now(), r.sum.Predicted
	}
}

// requests are the jobs' requests, with the screen decoded for those whose
// features the engine must compute, spread over the cores (a batch of full
// screenshots is tens of megabytes to convert).
func requests(jobs []job) ([]predict.Request, error) {
	reqs := make([]predict.Request, len(jobs))
	err := preprocess.Parallel(len(jobs), func(i int) error {
		j := &jobs[i]
		reqs[i] = j.req
		if j.req.Features != nil {
			return nil
		}
		if j.screen != nil {
			reqs[i].Screen = j.screen
			return nil
		}
		s := &j.step
		img, err := preprocess.FromRaw(s.Pixels, s.Height, s.Width, s.Channels)
		if err != nil {
			return fmt.Errorf("%s: %w", j, err)
		}
		reqs[i].Screen = img
		return nil
	})
	if err != nil {
		return nil, err
	}
	return reqs, nil
}

// write caches the step's computed features and appends its prediction.
func (r *run) write(j *job, res *predict.Result) (aitw.Prediction, error) {
	pred, err := r.record(j, res)
	if err != nil {
		return pred, err
	}
	return pred, r.append(j, pred)
}

// record caches the step's computed features and makes its prediction.
func (r *run) record(j *job, res *predict.Result) (aitw.Prediction, error) {
	if j.req.Features == nil {
		if len(res.Features) == 0 {
			return aitw.Prediction{}, fmt.Errorf("%s: the predictor returned no vision features", j)
		}
		r.sum.CacheMisses++
		if j.cache != "" {
			r.cache.store(j.cache, res.Features)
		}
	}
	pred := aitw.Prediction{EpisodeID: j.episode.ID, StepID: j.step.StepID, Subset: j.episode.Subset, Action: res.Action, Raw: res.Raw}
	if res.ParseErr != nil {
		pred.Action = action.Action{Touch: action.NoPoint, Lift: action.NoPoint} // type 0: matches nothing
		pred.ParseError = res.ParseErr.Error()
		r.sum.ParseErrors++
	}
	return pred, nil
}

// append writes the step's prediction.
func (r *run) append(j *job, pred aitw.Prediction) error {
	if err := r.w.Write(pred); err != nil {
		return err
	}
	r.written[j.key()] = pred
	r.sum.Predicted++
	r.prog.Tick()
	if j.last {
		r.prog.Add(1) // the episode is finished
	}
	return nil
}

// describe names the steps of a failed call for its error.
func describe(jobs []job) string {
	if len(jobs) == 1 {
		return jobs[0].String()
	}
	return fmt.Sprintf("batch of %d steps, %s to %s", len(jobs), &jobs[0], &jobs[len(jobs)-1])
}

func appendHistory(h []action.Action, mode History, gold, pred action.Action) []action.Action {
	if mode == HistoryPredicted {
		if !pred.Type.Valid() {
			return h // an output that did not parse has no action to show
		}
		return append(h, pred.Clamped()) // as a device would have performed it
	}
	return append(h, gold)
}
