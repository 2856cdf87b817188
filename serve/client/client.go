// Package client calls an `autoui serve` server. A *Client is a
// predict.Predictor: the agent loop runs near the phone and predicts on the
// server, retrying with backoff while the server restarts or is busy.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/predict"
)

// Options tune a Client. Zero fields take the defaults.
type Options struct {
	// Token is the server's bearer token (--token-file), if it has one.
	Token string
	// HTTPClient makes the requests (default: a client of its own, no
	// overall timeout: each attempt is bounded by the context and MaxWait).
	HTTPClient *http.Client
	// MaxWait is the total time Predict keeps retrying (default 2m).
	MaxWait time.Duration
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts (defaults 100ms and 5s); each wait is jittered.
	MinBackoff, MaxBackoff time.Duration
	// UserAgent is sent with each request (default "autoui-go-client").
	UserAgent string
}

// Client predicts on a server.
type Client struct {
	base string
	opts Options
	hc   *http.Client
}

// New returns a client of the server at baseURL (e.g. http://127.0.0.1:8080).
func New(baseURL string, opts Options) (*Client, error) {
	base := strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT or https://...", baseURL)
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 2 * time.Minute
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "autoui-go-client"
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: base, opts: opts, hc: hc}, nil
}

// Error is an error answer of the server (or of a proxy in front of it).
type Error struct {
	// Status is the HTTP status; Kind the server's api.ErrorBody kind
	// (bad_request, unauthorized, too_large, queue_full, deadline,
	// shutting_down, not_ready, internal), empty when the body was not
	// the server's; Message its text.
	Status  int
	Kind    string
	Message string
	// RetryAfter is the answer's Retry-After, 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("server answered %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Kind, e.Message)
}

// Temporary says whether the request may succeed if sent again: the queue
// was full, the server was loading or shutting down, or a proxy could not
// reach it.
func (e *Error) Temporary() bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Request is the wire form of an engine request: a screen as lossless PNG
// (so the server predicts on the same pixels), or the features.
func Request(req predict.Request) (api.PredictRequest, error) {
	out := api.PredictRequest{Goal: req.Goal, History: req.History,
		Options: api.Options{MaxNewTokens: req.MaxNewTokens, Constrain: req.Constrained}}
	switch {
	case req.Features != nil:
		out.Features = req.Features
	case req.Screen != nil:
		var b bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&b, req.Screen); err != nil {
			return out, fmt.Errorf("encode screen: %w", err)
		}
		out.Screen = b.Bytes()
	default:
		return out, errors.New("no screen and no image features given")
	}
	if req.MinNewTokens != 0 || req.Replay != nil {
		return out, errors.New("MinNewTokens and Replay are for local benchmarks; a server does not take them")
	}
	return out, nil
}

// Predict predicts on the server, retrying (exponential backoff with
// jitter, after the server's Retry-After) on connection errors, 429,
// 503, 502 and 504 until MaxWait has passed; other errors are returned at
// once. A server error is an *Error. The result has no Features.
func (c *Client) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	pr, err := Request(req)
	if err != nil {
		return nil, err
	}
	p, err := c.PredictRaw(ctx, pr)
	if err != nil {
		return nil, err
	}
	return p.Result()
}

// PredictBatch predicts each request on the server, all at once (the
// server batches them with its other work), with Predict's retries. The
// results are in request order; a request that cannot be sent fails the
// batch before anything is sent, and the first failure cancels the rest.
func (c *Client) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	prs := make([]api.PredictRequest, len(reqs))
	for i, r := range reqs {
		pr, err := Request(r)
		if err != nil {
			return nil, batchErr(len(reqs), i, err)
		}
		prs[i] = pr
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]*predict.Result, len(reqs))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i, pr := range prs {
		wg.Go(func() {
			p, err := c.PredictRaw(ctx, pr)
			if err == nil {
				res[i], err = p.Result()
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = batchErr(len(reqs), i, err)
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return res, nil
}

// batchErr names the failing request of a batch of more than one.
func batchErr(n, i int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("request %d: %w", i, err)
}

// PredictRaw sends a wire request, with Predict's retries, and returns the
// server's answer as is (with its serve info).
func (c *Client) PredictRaw(ctx context.Context, pr api.PredictRequest) (*api.Prediction, error) {
	body, err := json.Marshal(pr)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	deadline := time.Now().Add(c.opts.MaxWait)
	backoff := c.opts.MinBackoff
	// Every attempt, waits included, ends by the deadline: a server that
	// hangs cannot hold the caller longer than MaxWait.
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for attempt := 1; ; attempt++ {
		p, err := c.once(actx, body)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if actx.Err() != nil {
			return nil, fmt.Errorf("no answer within %v (%d attempts): %w", c.opts.MaxWait, attempt, err)
		}
		var se *Error
		retry := true
		wait := jitter(backoff)
		if errors.As(err, &se) {
			retry = se.Temporary()
			wait = retryWait(backoff, se.RetryAfter)
		}
		if !retry {
			return nil, err
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("gave up after %d attempts in %v: %w", attempt, c.opts.MaxWait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
}

// retryWait is the wait after an answer that said Retry-After: at least
// that, plus a random share of the backoff (full jitter), so that clients
// refused at once do not all come back at once; without Retry-After, the
// backoff jittered.
func retryWait(backoff, retryAfter time.Duration) time.Duration {
	if retryAfter <= 0 {
		return jitter(backoff)
	}
	return retryAfter + rand.N(max(backoff, 1))
}

// jitter is a wait in [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, body []byte) (*api.Prediction, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/predict", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.opts.UserAgent)
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err // connection refused or reset: retried
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorOf(resp, raw)
	}
	var p api.Prediction
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("answer is not a prediction: %w", err)
	}
	return &p, nil
}

func errorOf(resp *http.Response, raw []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(0, time.Until(t))
		}
	}
	var eb api.ErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Kind != "" {
		e.Kind, e.Message = eb.Kind, eb.Error
		return e
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}

// Ready asks /readyz once: nil when the server takes predictions, else an
// *Error (503 while loading or shutting down) or the connection error.
func (c *Client) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		e := errorOf(resp, raw)
		if e.Kind == "" && resp.StatusCode == http.StatusServiceUnavailable {
			e.Kind = "not_ready"
			if strings.Contains(e.Message, "shutting") {
				e.Kind = "shutting_down"
			}
		}
		return e
	}
	return nil
}
