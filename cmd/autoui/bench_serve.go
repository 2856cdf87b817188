package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/serve/client"
)

// runBenchServe loads a running server with closed-loop /v1/predict clients
// at each concurrency and prints throughput and latency percentiles. It
// posts with plain HTTP, not serve/client: a client's retries would hide the
// 429s and timeouts a load level causes; here each counts as an error (the
// client then pauses, bench.RunLoad), and any error fails the command after
// the table is printed.
func runBenchServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	server := fs.String("server", "", "base URL of a running autoui serve, e.g. http://127.0.0.1:8080; required")
	tokenFile := fs.String("token-file", "", "bearer token for the server, read from this file")
	screen := fs.String("screen", "models/default/sample_screen.png", "PNG/JPEG screenshot every request sends")
	goal := fs.String("goal", "Open the settings app", "goal every request sends")
	levels := fs.String("concurrency", "1,2,4,8,16,32", "numbers of concurrent clients to measure, in order")
	duration := fs.Duration("duration", 20*time.Second, "measured time per concurrency")
	warmup := fs.Duration("warmup", 3*time.Second, "unmeasured time before each concurrency")
	maxNew := fs.Int("max-new-tokens", 0, "options.max_new_tokens of every request (0: the model's)")
	asJSON := fs.Bool("json", false, "print the results as JSON on stdout (the table goes to stderr)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui bench serve --server URL [--concurrency 1,2,4,8,16,32] [--duration 20s] [--screen PNG] [--json]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *server == "" {
		return usageErrorf("--server is required")
	}
	base, err := client.BaseURL(*server)
	if err != nil {
		return usageErrorf("--server: %v", err)
	}
	conc, err := bench.ParseCounts(*levels, "concurrency")
	if err != nil {
		return usageErrorf("--concurrency: %v", err)
	}
	if *duration <= 0 {
		return usageErrorf("--duration %s: must be > 0", *duration)
	}
	if *warmup < 0 {
		return usageErrorf("--warmup %s: must be >= 0", *warmup)
	}
	img, err := os.ReadFile(*screen)
	if err != nil {
		return fmt.Errorf("--screen: %w", err)
	}
	token, err := readTokenFile(*tokenFile)
	if err != nil {
		return err
	}
	body, err := json.Marshal(api.PredictRequest{Goal: *goal, Screen: img, Options: api.Options{MaxNewTokens: *maxNew}})
	if err != nil {
		return err
	}
	url := base + "/v1/predict"
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	do := func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, client.ErrorOf(resp, raw)
		}
		var p api.Prediction
		if err := json.Unmarshal(raw, &p); err != nil {
			return 0, fmt.Errorf("response: %w", err)
		}
		if p.Serve == nil {
			return 0, nil
		}
		return p.Serve.BatchSize, nil
	}
	table := io.Writer(os.Stdout)
	if *asJSON {
		table = os.Stderr // stdout holds the JSON alone
	}
	fmt.Fprintf(table, "%-12s %10s %9s %9s %9s %9s %10s %7s\n", "concurrency", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean batch", "errors")
	var results []bench.LoadResult
	for _, c := range conc {
		r := bench.RunLoad(ctx, bench.LoadOptions{Concurrency: c, Warmup: *warmup, Duration: *duration, Do: do})
		if err := ctx.Err(); err != nil {
			return interruptedError{detail: "the levels measured so far were printed"}
		}
		l := r.LatencyMS
		fmt.Fprintf(table, "%-12d %10.2f %9.1f %9.1f %9.1f %9.1f %10.2f %7d\n", c, r.PerSecond, l.P50, l.P90, l.P99, l.Max, r.MeanBatch, r.Errors)
		if r.FirstError != "" {
			fmt.Fprintf(os.Stderr, "bench serve: concurrency %d: first error: %s\n", c, r.FirstError)
		}
		results = append(results, r)
	}
	if *asJSON {
		if err := printJSON(func() ([]byte, error) {
			return json.MarshalIndent(map[string]any{"server": *server, "screen": *screen, "duration_s": duration.Seconds(), "levels": results}, "", "  ")
		}); err != nil {
			return err
		}
	}
	return loadErrors(results)
}

// loadErrors fails a measurement in which requests failed: its numbers
// describe errors, not the server's throughput.
func loadErrors(results []bench.LoadResult) error {
	var failed, sent int
	var levels []string
	for _, r := range results {
		sent += r.Errors + r.Requests
		if r.Errors > 0 {
			failed += r.Errors
			levels = append(levels, fmt.Sprintf("%d of %d at concurrency %d", r.Errors, r.Errors+r.Requests, r.Concurrency))
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d measured requests failed (%s); the first errors are above", failed, sent, strings.Join(levels, ", "))
}
