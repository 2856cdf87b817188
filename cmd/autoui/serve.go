package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/serve"
)

func init() {
	register(command{name: "serve", summary: "serve predictions over HTTP to many devices, batching requests across them", run: runServe})
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	mf := addModelFlags(fs)
	// Served screens come from phones and tablets: serve's own cap, not
	// the one for local files.
	fs.Lookup("max-pixels").Usage = fmt.Sprintf("refuse screens over this many pixels, width*height, read from the header before decoding (0: %d, every phone and tablet screen)", serve.DefaultMaxPixels)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address, HOST:PORT (loopback by default; port 0 picks a free one)")
	maxBatch := fs.Int("max-batch", 0, fmt.Sprintf("most requests in one engine call, at most %d (0: %d on the cpu, %d under cuda)", serve.MaxBatchLimit, serve.DefaultMaxBatch, serve.DefaultMaxBatchCUDA))
	concurrent := fs.Int("concurrent-batches", 1, "engine calls that may run at once, each with a batch of its own (cuda: one batch's screens and prompts run beside another's decoding, under --cuda-graph too; each holds its own device memory)")
	continuous := fs.Bool("continuous", false, "continuous batching: requests join the running decode between two decoder calls, on --max-batch rows, and leave it as each finishes (needs --cuda-graph: the static decoder's per-row positions; one decode at a time)")
	mf.addOverlapFlag(fs)
	joinMin := fs.Int("join-min", 0, "under --continuous: how many waiting requests (fewer when fewer rows are free) join a busy decode at once; each join pauses the decode for its prefill, or with --overlap-joins holds up the next join (0: 1 on the cpu, where a prefill costs by the request; a quarter of --max-batch under cuda, where a few cost about what one does)")
	joinWait := fs.Duration("join-wait", serve.DefaultJoinWait, "under --continuous: the longest fewer than --join-min waiting requests wait to join a busy decode")
	batchWait := fs.Duration("batch-wait", serve.DefaultBatchWait, "how long a batch waits for more requests after its first (0: only those already waiting)")
	queue := fs.Int("queue", serve.DefaultQueue, "requests admitted and not yet in an engine call (decoding or waiting); more are answered 429 with Retry-After before their body is read")
	maxBody := fs.Int64("max-body", serve.DefaultMaxBody, "largest request body in bytes (413 above)")
	timeout := fs.Duration("request-timeout", serve.DefaultRequestTimeout, "longest time from a request's arrival to its answer (504 after); also the shutdown drain limit")
	tokenFile := fs.String("token-file", "", "file holding a bearer token that /v1/* requires (Authorization: Bearer TOKEN); /healthz, /readyz and /metrics stay open")
	replay := fs.String("replay", "", "benchmarking only: every request decodes this action text ('typical' for a typical Auto-UI tap; 'mixed' for answers of several lengths in turn) instead of the model's choices, through real decoder calls, so a random-weight bundle costs what a trained one would (bench --replay's rule)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui serve --model DIR [--addr 127.0.0.1:8080] [flags]\n\nPOST /v1/predict, GET /healthz, /readyz, /metrics (docs/serve.md).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case mf.model == "":
		return usageErrorf("--model is required (a bundle directory, e.g. models/testdata/tiny)")
	case *maxBatch < 0 || *maxBatch > serve.MaxBatchLimit:
		return usageErrorf("--max-batch %d: want 1 to %d (or 0, the provider's default)", *maxBatch, serve.MaxBatchLimit)
	case *batchWait < 0:
		return usageErrorf("--batch-wait %v: must be >= 0", *batchWait)
	case *queue < 1:
		return usageErrorf("--queue %d: must be >= 1", *queue)
	case *concurrent < 1 || *concurrent > *queue:
		return usageErrorf("--concurrent-batches %d: want 1 to --queue (%d): each batch needs a queued request", *concurrent, *queue)
	case mf.overlap && !*continuous:
		return usageErrorf("--overlap-joins needs --continuous")
	case *continuous && !mf.cudaGraph:
		return usageErrorf("--continuous needs --cuda-graph: rows join at their own positions on the static decoder")
	case *continuous && *concurrent > 1:
		return usageErrorf("--continuous with --concurrent-batches %d: one continuous decode runs", *concurrent)
	case *joinWait <= 0:
		return usageErrorf("--join-wait %v: must be > 0", *joinWait)
	case *joinMin < 0:
		return usageErrorf("--join-min %d: must be >= 1 (or 0, the provider's default)", *joinMin)
	case *maxBody < 1:
		return usageErrorf("--max-body %d: must be >= 1", *maxBody)
	case *timeout <= 0:
		return usageErrorf("--request-timeout %v: must be > 0", *timeout)
	}
	dopts, err := mf.decodeOptions()
	if err != nil {
		return err
	}
	eopts, err := mf.options()
	if err != nil {
		return usageError{err}
	}
	provider := eopts.Session.Provider // parsed: --provider CUDA is cuda
	if *concurrent > 1 && mf.cudaGraph && provider == engine.ProviderCUDA {
		fmt.Fprintf(os.Stderr, "autoui serve: --concurrent-batches %d with --cuda-graph: the engine runs the batches one at a time (CUDA-graph capture needs it; docs/cuda.md)\n", *concurrent)
	}
	cfg := serve.Config{MaxBatch: serveMaxBatch(*maxBatch, provider), ConcurrentBatches: *concurrent, BatchWait: *batchWait, Queue: *queue, MaxBody: *maxBody,
		Continuous: *continuous, JoinWait: *joinWait,
		RequestTimeout: *timeout, Decode: dopts}
	if cfg.BatchWait == 0 {
		cfg.BatchWait = -1 // serve.Config: negative is no wait, zero the default
	}
	cfg.JoinMin = defaultJoinMin(*joinMin, provider, cfg.MaxBatch)
	if cfg.Token, err = readTokenFile(*tokenFile); err != nil {
		return err
	}

	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	s := serve.New(cfg)
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: max(*timeout, time.Minute), IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	fmt.Fprintf(os.Stderr, "autoui serve: listening on http://%s\n", l.Addr())
	if host, _, _ := net.SplitHostPort(l.Addr().String()); cfg.Token == "" && !isLoopbackHost(host) {
		fmt.Fprintln(os.Stderr, "autoui serve: warning: listening beyond loopback without --token-file: anyone who reaches this port can use the model")
	}

	type loaded struct {
		closeFn func()
		stats   func() string // the continuous decode's, under --continuous
		err     error
	}
	load := make(chan loaded, 1)
	go func() {
		p, closeFn, err := mf.open()
		if err != nil {
			load <- loaded{err: err}
			return
		}
		m := serve.ModelOf(p, mf.model)
		if *replay != "" {
			if m, err = replayModel(m, p, *replay); err != nil {
				closeFn()
				load <- loaded{err: err}
				return
			}
			fmt.Fprintf(os.Stderr, "autoui serve: --replay: every answer is the replayed action, not the model's (benchmarking)\n")
		}
		if !s.SetModel(m) { // shutting down already
			closeFn()
			load <- loaded{}
			return
		}
		fmt.Fprintf(os.Stderr, "autoui serve: ready (%s, %s)\n", p.Bundle().Manifest.Name, mf.model)
		ld := loaded{closeFn: closeFn}
		if *continuous {
			ld.stats = func() string { return streamLine(p) }
		}
		load <- ld
	}()

	var closeFn func()
	var stats func() string
	stop := func() error {
		fmt.Fprintln(os.Stderr, "autoui serve: shutting down: finishing queued and running batches")
		dctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		derr := s.Shutdown(dctx)
		if stats != nil {
			fmt.Fprintf(os.Stderr, "autoui serve: continuous decode: %s\n", stats())
		}
		// Connections still sending a request (a slow upload, a client
		// that has not sent its headers) get a grace to be refused 503;
		// then they are closed: the server stopped as asked.
		hctx, hcancel := context.WithTimeout(context.Background(), connectionGrace)
		defer hcancel()
		herr := hs.Shutdown(hctx)
		if errors.Is(herr, context.DeadlineExceeded) {
			hs.Close()
			fmt.Fprintf(os.Stderr, "autoui serve: closed the connections still sending a request %v after the drain\n", connectionGrace)
			herr = nil
		}
		if closeFn != nil {
			closeFn()
		}
		if derr != nil {
			return fmt.Errorf("shutdown: requests still decoding or in a batch after --request-timeout %v: %w", *timeout, derr)
		}
		if herr != nil {
			return fmt.Errorf("shutdown: %w", herr)
		}
		fmt.Fprintln(os.Stderr, "autoui serve: stopped")
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return stop()
		case err := <-served:
			s.Shutdown(context.Background())
			return fmt.Errorf("serve: %w", err)
		case ld := <-load:
			load = nil
			if ld.err != nil {
				hs.Close()
				return ld.err
			}
			closeFn, stats = ld.closeFn, ld.stats
		}
	}
}

// readTokenFile reads a bearer token (whitespace trimmed) from path; ""
// for no file. The server and its clients read --token-file alike.
func readTokenFile(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return token, nil
}

// replayModel is m with every request decoding the --replay value
// (bench.Replayer) in place of the model's choices.
func replayModel(m serve.Model, p *engine.Predictor, replay string) (serve.Model, error) {
	r, err := bench.NewReplayer(p.Tokenizer(), replay, p.Settings().MaxNewTokens)
	if err != nil {
		return m, usageErrorf("--replay: %w", err)
	}
	check := m.Check
	m.Check = func(q predict.Request) error { return check(r.Longest(q)) }
	m.Engine = r.Wrap(m.Engine)
	return m, nil
}

// defaultJoinMin is --join-min's value (serve, eval run), 0 giving the
// provider's default: on the cpu a join's prefill costs by the request, so
// requests join as soon as they come; a GPU prefills a few screens in about
// the time of one, and every join pauses the decode.
// connectionGrace is how long a shutdown waits, after the drain, for the
// connections still sending a request.
const connectionGrace = 5 * time.Second

func defaultJoinMin(flag int, provider engine.Provider, maxBatch int) int {
	switch {
	case flag > 0:
		return flag
	case provider == engine.ProviderCUDA:
		return max(1, maxBatch/4)
	}
	return 1
}

// serveMaxBatch is --max-batch's value, 0 giving the provider's default.
func serveMaxBatch(flag int, provider engine.Provider) int {
	switch {
	case flag > 0:
		return flag
	case provider == engine.ProviderCUDA:
		return serve.DefaultMaxBatchCUDA
	}
	return serve.DefaultMaxBatch
}

// streamLine says where p's continuous decodes spent their time
// (engine.StreamStats), for eval run --continuous and serve --continuous.
func streamLine(p *engine.Predictor) string {
	st := p.StreamStats()
	per := func(a int64, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	graphs, _ := p.CapturedGraphs()
	line := fmt.Sprintf("%d joins of %.1f requests, %d decoder calls of %.1f busy rows on %.1f, %d moves, %d decoder graphs captured; "+
		"time: joins %.2f s, decoder calls %.2f s, moves %.2f s",
		st.Joins, per(int64(st.Joined), st.Joins), st.Calls, per(st.BusyRows, st.Calls), per(st.Rows, st.Calls), st.Moves, graphs,
		st.Prefill.Seconds(), st.Decode.Seconds(), st.Move.Seconds())
	if st.Beside > 0 {
		line += fmt.Sprintf("; %d joins prefilled beside the calls in %.2f s", st.Beside, st.BesideTime.Seconds())
	}
	pl := st.Place
	line += fmt.Sprintf("; of the joins' time, prefilling in place: screens %.2f s, prompts %.2f s; placing: states %.2f s, new buffers %.2f s, cross projection %.2f s, writing it %.2f s, mask %.2f s",
		st.Screens.Seconds(), st.Prompts.Seconds(), pl.States.Seconds(), pl.Buffers.Seconds(), pl.Cross.Seconds(), pl.Scatter.Seconds(), pl.Mask.Seconds())
	return line
}
