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
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

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
	base, err := BaseURL(baseURL)
	if err != nil {
		return nil, err
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

// BaseURL checks a server's base URL and returns it without trailing
// slashes: http or https, a host, a port (if any) in 1-65535, no query. A
// malformed URL is refused here rather than retried until MaxWait.
func BaseURL(raw string) (string, error) {
	const want = "want http://HOST:PORT or https://HOST[:PORT]"
	if !strings.Contains(raw, "://") {
		return "", fmt.Errorf("server URL %q has no scheme: %s", raw, want)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return "", fmt.Errorf("server URL %q: %v", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("server URL %q: scheme %q: %s", raw, u.Scheme, want)
	case u.Hostname() == "":
		return "", fmt.Errorf("server URL %q has no host: %s", raw, want)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("server URL %q: a base URL takes no query or fragment", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("server URL %q: port %s: want 1-65535", raw, p)
		}
	}
	return strings.TrimRight(raw, "/"), nil
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
// jitter, after the server's Retry-After) on a connection refused, reset
// or closed before the answer, a timeout, 429, 503, 502 and 504 until
// MaxWait has passed; other errors (TLS, protocol, an answer that is not a
// prediction, other statuses) are returned at once. A server error is an
// *Error. The result has no Features.
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
	start := time.Now()
	deadline := start.Add(c.opts.MaxWait)
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
			return nil, fmt.Errorf("no answer within %v (%s): %w", c.opts.MaxWait, attempts(attempt), err)
		}
		if !retryable(err) {
			return nil, err
		}
		wait := jitter(backoff)
		var se *Error
		if errors.As(err, &se) {
			wait = retryWait(backoff, se.RetryAfter)
		}
		if left := time.Until(deadline); wait > left {
			if se != nil && se.RetryAfter > left {
				return nil, fmt.Errorf("the server asked to retry after %v, more than the %v left of the %v wait: %w",
					se.RetryAfter, left.Round(time.Millisecond), c.opts.MaxWait, err)
			}
			return nil, fmt.Errorf("gave up after %s in %v: %w", attempts(attempt), time.Since(start).Round(time.Millisecond), err)
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

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// retryable says whether a failed attempt may succeed if sent again: a
// temporary status, or a connection refused, reset or closed before the
// answer (a server restarting), a network briefly unreachable, a timeout.
// Anything else (a TLS or protocol error, an unknown host, an answer that
// is not a prediction) would fail again, so it is returned at once.
func retryable(err error) bool {
	var se *Error
	if errors.As(err, &se) {
		return se.Temporary()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && (dns.IsTemporary || dns.IsTimeout) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	// net/http's unexported error for a kept-alive connection the server
	// closed as the request went out (it shuts down or restarts).
	return strings.Contains(err.Error(), "server closed idle connection")
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
	// One byte past the limit tells a cut answer from a whole one.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, ErrorOf(resp, raw)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("answer is over the %d MiB limit: not a prediction", maxAnswer>>20)
	}
	var p api.Prediction
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("answer is not a prediction (Content-Type %q): %w", resp.Header.Get("Content-Type"), err)
	}
	return &p, nil
}

// maxAnswer bounds the answer read: a prediction is a few KB.
const maxAnswer = 64 << 20

// maxMessage caps an error message taken from an answer.
const maxMessage = 200

// ErrorOf is the *Error of a server's answer other than 200, raw its body:
// the api.ErrorBody's kind and message, else the body's text on one line.
func ErrorOf(resp *http.Response, raw []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		e.RetryAfter = parseRetryAfter(s)
	}
	var eb api.ErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Kind != "" {
		e.Kind, e.Message = eb.Kind, oneLine(eb.Error)
		return e
	}
	e.Message = oneLine(string(raw))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// maxRetryAfter caps a Retry-After, so that adding a backoff cannot
// overflow a Duration.
const maxRetryAfter = 100 * 365 * 24 * time.Hour

// parseRetryAfter reads whole seconds (capped at maxRetryAfter) or an HTTP
// date; 0 when it is neither.
func parseRetryAfter(s string) time.Duration {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); n >= 0 && (err == nil || errors.Is(err, strconv.ErrRange)) {
		return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(s); err == nil {
		return min(max(0, time.Until(t)), maxRetryAfter)
	}
	return 0
}

// oneLine makes an answer's text one line for an error: control characters
// and runs of white space (an HTML or plain-text page's newlines) become one
// space, invalid UTF-8 is replaced, and the length is capped.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
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
		e := ErrorOf(resp, raw)
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
