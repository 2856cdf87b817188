// Package serve is the HTTP server of `autoui serve`: one engine shared by
// many devices, with requests batched across clients.
//
// POST /v1/predict takes an api.PredictRequest and answers an api.Prediction
// (docs/serve.md has the OpenAPI description). Screens are decoded in the
// request's own goroutine, so bad images fail fast and in parallel; the
// decoded requests wait in a bounded queue (full: 429) for the one batcher
// goroutine, which gathers what is waiting (or arrives within the batch
// wait) up to the largest batch and runs one engine.PredictBatch for it
// (Config.ConcurrentBatches batchers may run batches side by side; under
// Config.Continuous, requests join the engine's one running decode
// instead, stream.go).
// Each answer is the one the request gets on its own: PredictBatch gives
// every item the tokens it gets alone.
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"image"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

// Defaults of Config's zero fields (and of autoui serve's flags).
const (
	DefaultMaxBatch = 8
	// DefaultMaxBatchCUDA is autoui serve's --max-batch under cuda, as
	// eval run's batch there (runner.DefaultBatchCUDA): a GPU does a batch
	// of 64 in little more time than one of 8. On an H200 (base-vitg, 64
	// clients) --max-batch 64 served 42-47 req/s, where --max-batch 16 had
	// served 17 at 32 clients.
	DefaultMaxBatchCUDA = 64
	DefaultBatchWait    = 5 * time.Millisecond
	// DefaultJoinWait is a few decoder calls at 64 rows on a GPU (~9 ms
	// each): long enough for a group of clients answered together to
	// send again, short enough that a lone request is not held for a
	// whole decode.
	DefaultJoinWait       = 50 * time.Millisecond
	DefaultQueue          = 64
	DefaultMaxBody        = 32 << 20
	DefaultRequestTimeout = 60 * time.Second
	// DefaultMaxPixels fits every phone and tablet screen (phones up to
	// 1644x3840 = 6.3 Mpx, tablets up to 2960x1848 = 5.5 Mpx) with room,
	// and keeps a decoded screen at 32 MB (64 MB for a 16-bit PNG).
	DefaultMaxPixels = 8_000_000
	// MaxBatchLimit bounds Config.MaxBatch: the engine's continuous decode
	// takes at most this many rows, and a batch that large is already far
	// past what a GPU gains from (64 is cuda's default).
	MaxBatchLimit = engine.StreamRowsLimit
)

// Config tunes a Server. Zero fields take the defaults above.
type Config struct {
	// MaxBatch is the most requests in one engine call, at most
	// MaxBatchLimit (a larger one is MaxBatchLimit).
	MaxBatch int
	// ConcurrentBatches is how many engine calls may run at once, each
	// gathering its own batch (0: 1; at most Queue). On a GPU whose decoder
	// calls are bound by the host launching their kernels, one batch's
	// launching overlaps another's kernels; each batch holds its own device
	// memory.
	ConcurrentBatches int
	// Continuous runs the engine's continuous decode when it has one
	// (predict.Streamer; the engine's static decoder): MaxBatch rows that
	// requests join between two decoder calls and leave as each finishes,
	// instead of batches that run to their longest answer. One decode runs
	// (ConcurrentBatches is 1); BatchWait applies when it is idle.
	Continuous bool
	// JoinMin is how many waiting requests (fewer when fewer rows are
	// free) join a busy continuous decode at once (0: 1): each join
	// pauses the decode for its prefill (or, prefilled beside the calls,
	// holds up the next join), which a GPU does in about the same time
	// for one request as for several.
	JoinMin int
	// JoinWait bounds how long fewer than JoinMin waiting requests wait
	// to join a busy continuous decode (0: DefaultJoinWait).
	JoinWait time.Duration
	// BatchWait is how long the batcher waits for more requests after the
	// first of a batch; negative: not at all (only those already waiting).
	BatchWait time.Duration
	// Queue is how many requests may be admitted and not yet in an engine
	// call (decoding their screen or waiting for the batcher); more are
	// refused with 429 before their body is read.
	Queue int
	// MaxBody is the largest request body in bytes (413 above).
	MaxBody int64
	// RequestTimeout bounds a request from arrival to its answer (504).
	RequestTimeout time.Duration
	// Token, when not empty, is the bearer token /v1/* requires.
	Token string
	// Decode is how screens are decoded (the --max-pixels cap); a zero
	// MaxPixels is DefaultMaxPixels.
	Decode preprocess.DecodeOptions
	// Decoders is how many screens are decoded at once; 0: GOMAXPROCS.
	Decoders int
	// BodyMemory is how many bytes of request bodies all requests being
	// read and parsed may hold together (429 above); 0: 4 x MaxBody. It
	// is at least MaxBody.
	BodyMemory int64
	// RetryAfter is the Retry-After (whole seconds, at least 1) of 429 and
	// 503 answers; 0: 1 s.
	RetryAfter time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	c.MaxBatch = min(c.MaxBatch, MaxBatchLimit)
	c.ConcurrentBatches = max(c.ConcurrentBatches, 1)
	if c.Continuous {
		c.ConcurrentBatches = 1
	}
	c.JoinMin = max(c.JoinMin, 1)
	if c.JoinWait <= 0 {
		c.JoinWait = DefaultJoinWait
	}
	if c.BatchWait == 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.BatchWait < 0 {
		c.BatchWait = 0
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueue
	}
	c.ConcurrentBatches = min(c.ConcurrentBatches, c.Queue) // each needs a queued request
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Decode.MaxPixels <= 0 {
		c.Decode.MaxPixels = DefaultMaxPixels
	}
	if c.Decoders <= 0 {
		c.Decoders = runtime.GOMAXPROCS(0)
	}
	if c.BodyMemory <= 0 {
		c.BodyMemory = 4 * c.MaxBody
	}
	c.BodyMemory = max(c.BodyMemory, c.MaxBody)
	if c.RetryAfter < time.Second {
		c.RetryAfter = time.Second
	}
	return c
}

// Model is the engine a server runs and the check every request passes
// before it is queued (so one bad request cannot fail a batch).
type Model struct {
	Engine predict.Predictor
	// Name says which model this is (the bundle's name or directory).
	Name string
	// Check is the engine's own request validation (nil: none here).
	Check func(predict.Request) error
	// Shrink resizes a decoded screen to the model's input size, giving the
	// same prediction (nil: screens are kept whole). A waiting request then
	// holds a few hundred KB instead of a whole screenshot.
	Shrink func(image.Image) image.Image
}

// ModelOf describes a predictor; name is shown in logs (e.g. the bundle
// directory), the bundle's own name when empty.
func ModelOf(p *engine.Predictor, name string) Model {
	if name == "" {
		name = p.Bundle().Manifest.Name
	}
	return Model{Engine: p, Name: name, Check: p.Check, Shrink: p.Shrink}
}

// Server is the HTTP API. It answers /healthz at once, /readyz and
// /v1/predict with 503 until SetModel, and 503 again once Shutdown begins.
type Server struct {
	cfg     Config
	token   [32]byte // SHA-256 of cfg.Token: compared in constant time
	metrics *metrics
	mux     *http.ServeMux

	// slots holds one token per admitted request not yet taken by the
	// batcher (Config.Queue of them); decoders one per screen decoding.
	slots    chan struct{}
	decoders chan struct{}
	bodies   budget // bytes of request bodies being read and parsed

	mu      sync.Mutex
	model   *Model
	queue   chan *job
	closing bool
	// admitted counts the requests holding a slot and not yet in the queue
	// (decoding their screen): Shutdown closes the queue once they are in
	// it, so that they are answered too.
	admitted    int
	queueClosed bool
	batching    bool          // the batchers run
	done        chan struct{} // closed when the batchers have answered everything
	batchSeq    atomic.Uint64 // numbers the engine calls
	// gathering is held by the batcher taking jobs from the queue.
	gathering sync.Mutex
	// runCtx is the batches' context: cancelled only when a shutdown's
	// drain runs out of time.
	runCtx    context.Context
	cancelRun context.CancelFunc

	// Test hooks: beforeBatch runs before each engine call with the batch
	// size; onDrop for every request dropped because its client went away
	// or its deadline passed; beforeDecode before each screen decode.
	beforeBatch  func(n int)
	onDrop       func()
	beforeDecode func()

	// linger is how long an early answer keeps reading the body it refused
	// before the connection closes.
	linger time.Duration
}

// New returns a server that is up (healthz) but not ready until SetModel.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, queue: make(chan *job, cfg.Queue), done: make(chan struct{}),
		slots: make(chan struct{}, cfg.Queue), decoders: make(chan struct{}, cfg.Decoders),
		bodies: budget{limit: cfg.BodyMemory}, linger: 5 * time.Second}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
	}
	s.runCtx, s.cancelRun = context.WithCancel(context.Background())
	s.metrics = newMetrics(cfg.MaxBatch, func() float64 { return float64(len(s.slots)) })
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/", s.handleNotFound)
	s.mux.HandleFunc("/v1/predict", s.handlePredict)
	s.mux.HandleFunc("/healthz", s.handleHealthz)
	s.mux.HandleFunc("/readyz", s.handleReadyz)
	s.mux.HandleFunc("/metrics", s.handleMetrics(s.metrics.handler()))
	return s
}

// Paths are the server's endpoints.
var Paths = []string{"/v1/predict", "/healthz", "/readyz", "/metrics"}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Registry is the server's own metrics registry (not the global one).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// SetModel makes the server ready: requests are checked against m and run
// on m.Engine by the batcher it starts. After Shutdown has begun it does
// nothing and returns false.
func (s *Server) SetModel(m Model) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.model != nil {
		return false
	}
	s.model = &m
	s.batching = true
	var wg sync.WaitGroup
	for range s.cfg.ConcurrentBatches {
		wg.Go(func() { s.batcher(m.Engine) })
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return true
}

// Ready says whether predictions are taken: a model is set and no shutdown
// has begun.
func (s *Server) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model != nil && !s.closing
}

// Shutdown stops taking predictions (503 shutting_down; /readyz 503) and
// waits until every admitted request (queued, or still decoding its screen)
// and every running batch has been answered. When ctx ends first, the
// running batch is cancelled, the requests still queued or decoding are
// answered 503, and ctx's error is returned. It does not close listeners:
// call http.Server.Shutdown after it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true // no request is admitted after this
		s.closeQueueIfSettled()
		if !s.batching {
			close(s.done)
		}
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.cancelRun()
		// Requests still decoding may take until their own deadline: they
		// are refused instead.
		s.mu.Lock()
		s.closeQueue()
		s.mu.Unlock()
		<-s.done
		return ctx.Err()
	}
}

// closeQueueIfSettled closes the queue once shutdown has begun and every
// admitted request is in it; s.mu is held. Since nothing is admitted after
// shutdown begins, the drain ends.
func (s *Server) closeQueueIfSettled() {
	if s.closing && s.admitted == 0 {
		s.closeQueue()
	}
}

// closeQueue ends the batchers' input; s.mu is held.
func (s *Server) closeQueue() {
	if !s.queueClosed {
		s.queueClosed = true
		close(s.queue)
	}
}

// admit takes a queue slot for a request, or says the queue is full or the
// server is shutting down. The request then calls enqueue or unadmit; the
// batcher gives the slot back when it takes the request's job.
func (s *Server) admit() *httpError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	select {
	case s.slots <- struct{}{}:
		s.admitted++
		return nil
	default:
		return s.queueFull()
	}
}

// unadmit gives back the slot of an admitted request that will not be
// queued (it failed its checks).
func (s *Server) unadmit() {
	<-s.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	s.closeQueueIfSettled()
}

func (s *Server) queueFull() *httpError {
	return &httpError{status: http.StatusTooManyRequests, kind: KindQueueFull,
		msg: fmt.Sprintf("the queue of %d requests is full; retry later", s.cfg.Queue)}
}

// enqueue hands an admitted request's job to the batcher, also while a
// shutdown drains (the request was admitted before it began), or says why
// it cannot; then the slot is given back. The job's slot guarantees room in
// the queue.
func (s *Server) enqueue(j *job) *httpError {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted--
	defer s.closeQueueIfSettled()
	herr := errShuttingDown // the drain ran out of time
	if !s.queueClosed {
		select {
		case s.queue <- j:
			return nil
		default:
			herr = &httpError{status: http.StatusInternalServerError, kind: KindInternal, msg: "queue full with a slot held (a bug)"}
		}
	}
	<-s.slots
	return herr
}

// took gives back the slot of a job the batcher took from the queue.
func (s *Server) took(j *job) *job {
	<-s.slots
	return j
}

// budget is a byte count shared by requests, with a limit.
type budget struct {
	mu          sync.Mutex
	used, limit int64
}

// take reserves n bytes, or says there are not that many left.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Error kinds (api.ErrorBody.Kind).
const (
	KindBadRequest       = "bad_request"
	KindUnauthorized     = "unauthorized"
	KindTooLarge         = "too_large"
	KindQueueFull        = "queue_full"
	KindDeadline         = "deadline"
	KindShuttingDown     = "shutting_down"
	KindNotReady         = "not_ready"
	KindInternal         = "internal"
	KindMethodNotAllowed = "method_not_allowed"
	KindNotFound         = "not_found"
	KindUnsupportedType  = "unsupported_media_type"
)

// Kinds are all the error kinds, as the docs' ErrorBody enum lists them.
var Kinds = []string{KindBadRequest, KindUnauthorized, KindMethodNotAllowed, KindNotFound, KindTooLarge,
	KindUnsupportedType, KindQueueFull, KindDeadline, KindShuttingDown, KindNotReady, KindInternal}

var (
	errShuttingDown = &httpError{status: http.StatusServiceUnavailable, kind: KindShuttingDown, msg: "the server is shutting down; retry on another replica"}
	errNotReady     = &httpError{status: http.StatusServiceUnavailable, kind: KindNotReady, msg: "the model is still loading; retry shortly"}
	errUnauthorized = &httpError{status: http.StatusUnauthorized, kind: KindUnauthorized, msg: "missing or wrong bearer token (Authorization: Bearer TOKEN)"}
)

// authorized checks the bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") && !s.authorized(r) {
		// the token guards all of /v1: without it, nothing says which paths exist
		s.refuse(w, r, errUnauthorized)
		return
	}
	s.refuse(w, r, &httpError{status: http.StatusNotFound, kind: KindNotFound,
		msg: fmt.Sprintf("no such path %q; the API is POST /v1/predict (docs/serve.md)", r.URL.Path)})
}

// readOnly answers 405 to a method other than GET and HEAD, and says
// whether the request may go on.
func (s *Server) readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, methodNotAllowed("GET, HEAD"))
		return false
	}
	return true
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if !s.readOnly(w, r) {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if !s.readOnly(w, r) {
		return
	}
	s.mu.Lock()
	model, closing := s.model, s.closing
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case closing:
		w.Header().Set("Retry-After", s.retryAfter())
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "shutting down")
	case model == nil:
		w.Header().Set("Retry-After", s.retryAfter())
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "loading")
	default:
		fmt.Fprintln(w, "ready")
	}
}

// handleMetrics serves the metrics to GET and HEAD only, as /healthz and
// /readyz (promhttp itself answers any method).
func (s *Server) handleMetrics(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.readOnly(w, r) {
			h.ServeHTTP(w, r)
		}
	}
}

func (s *Server) retryAfter() string {
	return strconv.Itoa(int((s.cfg.RetryAfter + time.Second - 1) / time.Second))
}

func methodNotAllowed(allow string) *httpError {
	return &httpError{status: http.StatusMethodNotAllowed, kind: KindMethodNotAllowed, msg: "method not allowed; use " + allow, allow: allow}
}

// httpError is an error answer.
type httpError struct {
	status int
	kind   string
	msg    string
	allow  string
	unread bool // given before the body was read whole
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, kind: KindBadRequest, msg: fmt.Sprintf(format, args...)}
}

// errorOf maps an engine error to an answer.
func errorOf(err error) *httpError {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he
	case errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusGatewayTimeout, kind: KindDeadline, msg: "the request timed out before its prediction finished"}
	case errors.Is(err, context.Canceled):
		return errShuttingDown
	}
	return &httpError{status: http.StatusInternalServerError, kind: KindInternal, msg: "prediction failed: " + err.Error()}
}
