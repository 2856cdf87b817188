package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/serve/servetest"
)

const testdata = "../../models/testdata"

var _ predict.Predictor = (*Client)(nil)

func tinyServer(t *testing.T) (*engine.Predictor, http.Handler) {
	t.Helper()
	p, s := servetest.Start(t, filepath.Join(testdata, "tiny"), "")
	return p, s.Handler()
}

func same(t *testing.T, what string, got, want *predict.Result) {
	t.Helper()
	if !slices.Equal(got.TokenIDs, want.TokenIDs) || got.Raw != want.Raw || !slices.Equal(got.SourceIDs, want.SourceIDs) ||
		got.SourceText != want.SourceText || got.Action != want.Action || !slices.Equal(got.Plan, want.Plan) ||
		(got.ParseErr == nil) != (want.ParseErr == nil) {
		t.Errorf("%s: client %q %+v, engine %q %+v", what, got.Raw, got.Action, want.Raw, want.Action)
	}
}

func TestClient(t *testing.T) {
	p, h := tinyServer(t)
	raw, err := os.ReadFile(filepath.Join(testdata, "screens", "settings_720x1600.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := preprocess.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	history := []action.Action{{Type: action.PressBack, Touch: action.Point{Y: -1, X: -1}, Lift: action.Point{Y: -1, X: -1}}}
	req := predict.Request{Screen: img, Goal: "Turn on wifi", History: history}
	want, err := p.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	// A front that answers 503, then 429, then passes requests on: the
	// client retries through both.
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error": "the model is still loading", "kind": "not_ready"}`, 503)
		case 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error": "full", "kind": "queue_full"}`, 429)
		case 3:
			http.Error(w, "bad gateway", 502)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	defer ts.Close()
	c, err := New(ts.URL, Options{MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "screen after retries", got, want)
	if n := calls.Load(); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}

	// Features.
	got, err = c.Predict(context.Background(), predict.Request{Features: want.Features, Goal: "Turn on wifi", History: history})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "features", got, want)

	// A request the server refuses is not retried, and says why.
	before := calls.Load()
	_, err = c.Predict(context.Background(), predict.Request{Features: want.Features[1:], Goal: "Turn on wifi"})
	var se *Error
	if !errors.As(err, &se) || se.Status != 400 || se.Kind != "bad_request" || se.Temporary() {
		t.Fatalf("error %v, want a 400 bad_request *Error", err)
	}
	if n := calls.Load() - before; n != 1 {
		t.Errorf("a 400 was sent %d times", n)
	}
}

// TestClientBatch: PredictBatch answers each request as Predict does, in
// order; a request that cannot be sent or that the server refuses fails
// the batch, naming it.
func TestClientBatch(t *testing.T) {
	p, h := tinyServer(t)
	ts := httptest.NewServer(h)
	defer ts.Close()
	c, err := New(ts.URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	feat := make([]float32, p.Bundle().Manifest.Model.ImageDim)
	var reqs []predict.Request
	for _, goal := range []string{"Turn on wifi", "Open settings", "Go home"} {
		reqs = append(reqs, predict.Request{Features: feat, Goal: goal})
	}
	want, err := p.PredictBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.PredictBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results for %d requests", len(got), len(want))
	}
	for i := range got {
		same(t, reqs[i].Goal, got[i], want[i])
	}

	bad := slices.Clone(reqs)
	bad[1].Features = feat[1:]
	var se *Error
	if _, err := c.PredictBatch(ctx, bad); !errors.As(err, &se) || se.Kind != "bad_request" || !strings.HasPrefix(err.Error(), "request 1: ") {
		t.Errorf("refused request: %v", err)
	}
	bad[1] = predict.Request{Goal: "no screen"}
	if _, err := c.PredictBatch(ctx, bad); err == nil || !strings.HasPrefix(err.Error(), "request 1: no screen") {
		t.Errorf("unsendable request: %v", err)
	}
}

func TestClientNoRetry(t *testing.T) {
	for _, status := range []int{400, 401, 413} {
		var calls atomic.Int32
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if status == 401 && r.Header.Get("Authorization") != "Bearer tok" {
				t.Errorf("Authorization %q", r.Header.Get("Authorization"))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"error": "no", "kind": "k"}`))
		}))
		c, _ := New(ts.URL+"/", Options{Token: "tok", MinBackoff: time.Millisecond})
		_, err := c.Predict(context.Background(), predict.Request{Features: []float32{1}, Goal: "g"})
		var se *Error
		if !errors.As(err, &se) || se.Status != status || se.Kind != "k" || se.Message != "no" {
			t.Errorf("%d: error %v", status, err)
		}
		if calls.Load() != 1 {
			t.Errorf("%d: sent %d times", status, calls.Load())
		}
		ts.Close()
	}
}

// TestClientGivesUp: a server that never answers is retried until MaxWait.
func TestClientGivesUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: connection refused
	c, _ := New("http://"+addr, Options{MaxWait: 300 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	start := time.Now()
	_, err = c.Predict(context.Background(), predict.Request{Features: []float32{1}, Goal: "g"})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("error %v after %v", err, time.Since(start))
	}
	if c.Ready(context.Background()) == nil {
		t.Error("Ready with no server")
	}

	// A server that never answers: bounded by MaxWait too.
	hang := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hs.Close()
	defer close(hang)
	c, _ = New(hs.URL, Options{MaxWait: 200 * time.Millisecond})
	start = time.Now()
	_, err = c.Predict(context.Background(), predict.Request{Features: []float32{1}, Goal: "g"})
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") || time.Since(start) > 2*time.Second {
		t.Errorf("hanging server: error %v after %v", err, time.Since(start))
	}

	// Retry-After beyond the budget: give up at once with the server's error.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(503)
		w.Write([]byte(`{"error": "shutting down", "kind": "shutting_down"}`))
	}))
	defer ts.Close()
	c, _ = New(ts.URL, Options{MaxWait: time.Second})
	start = time.Now()
	_, err = c.Predict(context.Background(), predict.Request{Features: []float32{1}, Goal: "g"})
	var se *Error
	if !errors.As(err, &se) || se.Kind != "shutting_down" || se.RetryAfter != 30*time.Second || time.Since(start) > 500*time.Millisecond {
		t.Errorf("error %v after %v", err, time.Since(start))
	}
	err = c.Ready(context.Background())
	if !errors.As(err, &se) || se.Status != 503 {
		t.Errorf("Ready: %v", err)
	}
}

func TestRequestWireForm(t *testing.T) {
	h := []action.Action{{Type: action.PressHome, Touch: action.Point{Y: -1, X: -1}, Lift: action.Point{Y: -1, X: -1}}}
	pr, err := Request(predict.Request{Features: []float32{0.5, -1e-7}, Goal: "g", History: h, MaxNewTokens: 90, Constrained: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr.Features, []float32{0.5, -1e-7}) || pr.Options.MaxNewTokens != 90 || !pr.Options.Constrain || !reflect.DeepEqual(pr.History, h) {
		t.Errorf("%+v", pr)
	}
	if _, err := Request(predict.Request{Goal: "g"}); err == nil {
		t.Error("no screen, no features: no error")
	}
	if _, err := New("127.0.0.1:8080", Options{}); err == nil {
		t.Error("a URL without a scheme was taken")
	}
}

// TestRetryWaitJittered: clients refused at once with the same Retry-After
// come back at different times, each after at least the Retry-After and at
// most the Retry-After plus its backoff.
func TestRetryWaitJittered(t *testing.T) {
	for _, backoff := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 50 {
			w := retryWait(backoff, time.Second)
			if w < time.Second || w >= time.Second+backoff {
				t.Fatalf("backoff %v: wait %v, want in [1s, %v)", backoff, w, time.Second+backoff)
			}
			seen[w] = true
		}
		if len(seen) < 40 {
			t.Errorf("backoff %v: %d distinct waits of 50: clients retry in step", backoff, len(seen))
		}
	}
	if w := retryWait(time.Second, 0); w < 500*time.Millisecond || w >= time.Second {
		t.Errorf("no Retry-After: wait %v, want the backoff jittered to [0.5s, 1s)", w)
	}
}

// TestBaseURL: a malformed server URL is refused by New, not retried until
// MaxWait.
func TestBaseURL(t *testing.T) {
	for _, bad := range []string{"http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:0", "http://exa mple.com",
		"127.0.0.1:8080", "ftp://x", "http://", "http://:8080", "http://h/?q=1", "http://h/#f"} {
		if _, err := New(bad, Options{}); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line", bad, err)
		}
	}
	for in, want := range map[string]string{"http://127.0.0.1:8080/": "http://127.0.0.1:8080", "https://h": "https://h",
		"http://[::1]:80/prefix/": "http://[::1]:80/prefix"} {
		if got, err := BaseURL(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestClientFailsFast: an answer that is not a prediction, a TLS mismatch
// and a malformed HTTP answer would fail again: they are returned after
// one attempt, not retried until MaxWait.
func TestClientFailsFast(t *testing.T) {
	var calls atomic.Int32
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>login</body></html>"))
	}))
	defer html.Close()
	badJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write([]byte(`{"raw": "tru`))
	}))
	defer badJSON.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // answers garbage to every request, once it has been sent
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			calls.Add(1)
			// (garbage before the request is a response on an idle
			// connection to net/http: another error, by timing)
			if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				c.Write([]byte("garbage\r\n\r\n"))
			}
			c.Close()
		}
	}()
	for _, c := range []struct{ url, want string }{
		{html.URL, "not a prediction"},
		{badJSON.URL, "not a prediction"},
		{strings.Replace(html.URL, "http://", "https://", 1), "HTTPS"},
		{"http://" + l.Addr().String(), "malformed HTTP"},
	} {
		calls.Store(0)
		cl, err := New(c.url, Options{MaxWait: 3 * time.Second, MinBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = cl.PredictRaw(context.Background(), api.PredictRequest{Goal: "g", Features: []float32{1}})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || time.Since(start) > time.Second {
			t.Errorf("%s: error %v after %v, want one line with %q at once", c.url, err, time.Since(start), c.want)
		}
		if n := calls.Load(); n > 1 {
			t.Errorf("%s: %d attempts", c.url, n)
		}
	}
}

// TestClientRetriesClosedConnection: a connection closed before the answer
// (a server restarting) is retried.
func TestClientRetriesClosedConnection(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.Write([]byte(`{"raw": "ok"}`))
	}))
	defer ts.Close()
	c, _ := New(ts.URL, Options{MinBackoff: time.Millisecond})
	p, err := c.PredictRaw(context.Background(), api.PredictRequest{Goal: "g", Features: []float32{1}})
	if err != nil || p.Raw != "ok" || calls.Load() != 2 {
		t.Fatalf("%+v, %v after %d attempts", p, err, calls.Load())
	}
}

// TestClientErrorMessages: an error is one line, whatever the answer's
// body; an answer over the size limit says so; a Retry-After beyond the
// time left says that is why the client gave up.
func TestClientErrorMessages(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.Split(r.URL.Path, "/")[1] {
		case "text":
			w.WriteHeader(500)
			w.Write([]byte("Traceback (most recent call last):\n  File \"x\", line 1\n\tboom\x1b[0m\n" + strings.Repeat("é", 300)))
		case "json":
			w.WriteHeader(500)
			w.Write([]byte(`{"error": "line one\nline two", "kind": "internal"}`))
		case "big":
			w.Write([]byte(`{"raw": "`))
			w.Write(bytes.Repeat([]byte("a"), 64<<20))
			w.Write([]byte(`"}`))
		case "later":
			w.Header().Set("Retry-After", "999999")
			w.WriteHeader(503)
			w.Write([]byte(`{"error": "the model is still loading", "kind": "not_ready"}`))
		}
	}))
	defer ts.Close()
	for _, c := range []struct{ path, want string }{
		{"text", "server answered 500: Traceback (most recent call last): File \"x\", line 1 boom [0m éé"},
		{"json", "server answered 500 internal: line one line two"},
		{"big", "over the 64 MiB limit"},
		{"later", "the server asked to retry after 277h46m39s, more than the"},
	} {
		cl, err := New(ts.URL+"/"+c.path, Options{MaxWait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = cl.PredictRaw(context.Background(), api.PredictRequest{Goal: "g", Features: []float32{1}})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
			t.Errorf("%s: error %q, want one line with %q", c.path, err, c.want)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s: took %v", c.path, time.Since(start))
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{"5": 5 * time.Second, " 0 ": 0, "-1": 0, "soon": 0,
		"99999999999999999999": maxRetryAfter, "9223372036": maxRetryAfter} {
		if got := parseRetryAfter(in); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}
