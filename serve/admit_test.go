package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine/preprocess/imagetest"
)

// rawAnswer is what rawPost read: the answer and whether the server then
// closed the connection.
type rawAnswer struct {
	resp   *http.Response
	body   []byte
	closed bool
}

// rawPost sends a POST whose headers announce contentLength bytes but
// whose body stops after part: a client still streaming its body. It reads
// the answer and then waits for the server to close the connection.
func rawPost(t *testing.T, ts *httptest.Server, path string, header http.Header, contentLength int, part string) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A hang guard, not a speed check: a server that waits for the rest of
	// the body never answers.
	conn.SetDeadline(time.Now().Add(time.Minute))
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: autoui\r\nContent-Length: %d\r\n", path, contentLength)
	header.Write(&req)
	req.WriteString("\r\n" + part)
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer before the body ended: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Closed: EOF, or a reset when the server closed with body bytes unread.
	_, err = br.ReadByte()
	return rawAnswer{resp: resp, body: body, closed: err != nil && !errors.Is(err, os.ErrDeadlineExceeded)}
}

func jsonHeader(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// shortLinger keeps tests of bodies that never end short.
func shortLinger(s *Server) { s.linger = 50 * time.Millisecond }

// TestFullQueueRefusesUnread: once the queue is full, a request is
// answered 429 before its body is read or its screen decoded, so memory is
// bounded by --queue, not by how many clients send at once.
func TestFullQueueRefusesUnread(t *testing.T) {
	var decodes atomic.Int32
	s, ts, entered, release := holdingServer(t, Config{Queue: 1, MaxBatch: 1, BatchWait: -1}, shortLinger, func(s *Server) {
		s.beforeDecode = func() { decodes.Add(1) }
	})
	ctx := context.Background()
	png := screenBytes(t, "home_720x1280.png")
	results := make(chan int, 2)
	go func() {
		r, _ := post(t, ctx, ts.URL, api.PredictRequest{Goal: "first", Screen: png})
		results <- code(r)
	}()
	<-entered // the first request is in the engine call, held
	go func() { r, _ := post(t, ctx, ts.URL, featureRequest(t, "second")); results <- code(r) }()
	waitFor(t, "the second request to be queued", func() bool { return len(s.queue) == 1 })

	a := rawPost(t, ts, "/v1/predict", jsonHeader(), 1<<20, `{"goal": "third", "screen": "iVBO`)
	wantError(t, a.resp, a.body, 429, KindQueueFull, "queue of 1 requests is full")
	if !a.closed || !a.resp.Close {
		t.Errorf("the connection stays open after an early 429 (closed %v, Connection: close %v)", a.closed, a.resp.Close)
	}
	for i := range 12 {
		resp, body := post(t, ctx, ts.URL, api.PredictRequest{Goal: fmt.Sprint("screen ", i), Screen: png})
		wantError(t, resp, body, 429, KindQueueFull, "full")
	}
	if n := decodes.Load(); n != 1 {
		t.Errorf("%d screens decoded, want 1 (refused requests are not decoded)", n)
	}
	release()
	for range 2 {
		if c := <-results; c != 200 {
			t.Errorf("held request answered %d", c)
		}
	}
}

// TestDecodersBounded: at most Decoders screens are decoded at once; the
// others wait for a decoder, admitted.
func TestDecodersBounded(t *testing.T) {
	var decodes atomic.Int32
	gate := make(chan struct{})
	m := tinyModel(t)
	s, ts := start(t, Config{Decoders: 1, Queue: 4}, &m, func(s *Server) {
		s.beforeDecode = func() {
			if decodes.Add(1) == 1 {
				<-gate
			}
		}
	})
	png := screenBytes(t, "home_720x1280.png")
	results := make(chan int, 3)
	for i := range 3 {
		go func() {
			r, _ := post(t, context.Background(), ts.URL, api.PredictRequest{Goal: fmt.Sprint("go ", i), Screen: png})
			results <- code(r)
		}()
	}
	waitFor(t, "three requests admitted", func() bool { return len(s.slots) == 3 })
	if n := decodes.Load(); n != 1 {
		t.Errorf("%d decodes started with one decoder busy", n)
	}
	close(gate)
	for range 3 {
		if c := <-results; c != 200 {
			t.Errorf("answered %d", c)
		}
	}
	if n := decodes.Load(); n != 3 {
		t.Errorf("%d decodes, want 3", n)
	}
}

// TestBodyMemory: bodies being read together are held under BodyMemory;
// one more is answered 429 while it streams, and the bytes come back.
func TestBodyMemory(t *testing.T) {
	m := tinyModel(t)
	s, ts := start(t, Config{MaxBody: 256 << 10, BodyMemory: 256 << 10}, &m, shortLinger)
	// A slow client that has sent 200 KiB holds them.
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/predict HTTP/1.1\r\nHost: autoui\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 250<<10)
	conn.Write([]byte(`{"goal": "` + strings.Repeat("a", 200<<10)))
	waitFor(t, "the slow body to be held", func() bool {
		s.bodies.mu.Lock()
		defer s.bodies.mu.Unlock()
		return s.bodies.used >= 200<<10
	})
	a := rawPost(t, ts, "/v1/predict", jsonHeader(), 200<<10, `{"goal": "`+strings.Repeat("b", 100<<10))
	wantError(t, a.resp, a.body, 429, KindQueueFull, "request bodies")
	if !a.closed || !a.resp.Close {
		t.Errorf("the connection stays open after a 429 mid-body (closed %v, Connection: close %v)", a.closed, a.resp.Close)
	}
	// Small requests still fit beside it.
	resp, body := post(t, context.Background(), ts.URL, featureRequest(t, "small"))
	wantPrediction(t, resp.StatusCode, body)
	conn.Close()
	waitFor(t, "the slow body's bytes to come back", func() bool {
		s.bodies.mu.Lock()
		defer s.bodies.mu.Unlock()
		return s.bodies.used == 0
	})
}

// TestDefaultMaxPixels: serve's own screen cap (phones and tablets) applies
// unless the config raises it.
func TestDefaultMaxPixels(t *testing.T) {
	m := tinyModel(t)
	big := api.PredictRequest{Goal: "g", Screen: imagetest.HostilePNG(3000, 3000, 0)} // 9 Mpx
	_, ts := start(t, Config{}, &m)
	resp, body := post(t, context.Background(), ts.URL, big)
	wantError(t, resp, body, 413, KindTooLarge, fmt.Sprint(DefaultMaxPixels))
	_, ts = start(t, Config{}.withDecode(10_000_000), &m)
	resp, body = post(t, context.Background(), ts.URL, big)
	wantError(t, resp, body, 400, KindBadRequest, "screen") // past the cap: a header without pixels
}

func (c Config) withDecode(maxPixels int) Config {
	c.Decode.MaxPixels = maxPixels
	return c
}

// TestEarlyErrorsClose: an answer given before the body is read closes the
// connection at once instead of waiting for the body.
func TestEarlyErrorsClose(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{Token: "tok", MaxBody: 1 << 20}, &m, shortLinger)
	_, loading := start(t, Config{}, nil, shortLinger)
	auth := "Bearer tok"
	for _, c := range []struct {
		name    string
		ts      *httptest.Server
		header  http.Header
		length  int
		status  int
		kind    string
		mention string
	}{
		// Under 256 KiB unread, net/http used to read the rest before answering.
		{"no token", ts, jsonHeader(), 100 << 10, 401, KindUnauthorized, "bearer token"},
		{"too large", ts, jsonHeader("Authorization", auth), 2 << 20, 413, KindTooLarge, "over the limit"},
		{"not JSON", ts, http.Header{"Content-Type": {"image/png"}, "Authorization": {auth}}, 100 << 10, 415, KindUnsupportedType, "application/json"},
		{"loading", loading, jsonHeader(), 100 << 10, 503, KindNotReady, "loading"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := rawPost(t, c.ts, "/v1/predict", c.header, c.length, `{"goal": "slow`)
			wantError(t, a.resp, a.body, c.status, c.kind, c.mention)
			if !a.closed || !a.resp.Close {
				t.Errorf("connection not closed (closed %v, Connection: close %v)", a.closed, a.resp.Close)
			}
		})
	}
	// A client that writes its whole (big) body before reading still reads
	// its answer, not a reset.
	_, ts = start(t, Config{Token: "tok"}, &m)
	big := api.PredictRequest{Goal: "g", Screen: bytes.Repeat([]byte{1}, 4<<20)}
	resp, body := post(t, context.Background(), ts.URL, big)
	wantError(t, resp, body, 401, KindUnauthorized, "bearer token")
}

func TestContentType(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{}, &m)
	raw, _ := json.Marshal(featureRequest(t, "Open Chrome"))
	for ct, want := range map[string]int{
		"": 200, "application/json": 200, "application/json; charset=utf-8": 200, "application/merge-patch+json": 200,
		"text/plain": 415, "application/x-www-form-urlencoded": 415, "application/jsonx": 415, "bogus/": 415,
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/predict", bytes.NewReader(raw))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if want == 415 {
			wantError(t, r, b, 415, KindUnsupportedType, "application/json")
		} else if r.StatusCode != want {
			t.Errorf("Content-Type %q: %d %s", ct, r.StatusCode, b)
		}
	}
}

func TestNotFoundJSON(t *testing.T) {
	_, ts := start(t, Config{}, nil)
	for _, path := range []string{"/", "/v1/predicts", "/v1/predict/", "/v2/predict"} {
		r, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		wantError(t, r, b, 404, KindNotFound, "/v1/predict")
	}
}

// TestClientGoneMidUpload: a client that hangs up before its body ends is
// counted as gone (499, autoui_canceled_total), not as a bad request.
func TestClientGoneMidUpload(t *testing.T) {
	m := tinyModel(t)
	s, ts := start(t, Config{}, &m)
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	part := `{"goal": "g", "features": [0.5, `
	fmt.Fprintf(conn, "POST /v1/predict HTTP/1.1\r\nHost: autoui\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", 10*len(part), part)
	conn.Close()
	waitFor(t, "the request to end", func() bool {
		return countMetric(t, s, "autoui_canceled_total")+countMetric(t, s, "autoui_errors_total", "kind", KindBadRequest) > 0
	})
	if n := countMetric(t, s, "autoui_errors_total", "kind", KindBadRequest); n != 0 {
		t.Errorf("a client gone mid-upload counted as %v bad requests", n)
	}
	if n := countMetric(t, s, "autoui_canceled_total"); n != 1 {
		t.Errorf("autoui_canceled_total %v, want 1", n)
	}
	waitFor(t, "the request's duration", func() bool {
		text := metricsText(t, ts)
		return strings.Contains(text, `autoui_request_duration_seconds_count{code="499"} 1`)
	})
}

func metricsText(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	_, text := get(t, ts.URL+"/metrics")
	return text
}
