package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A --server URL that cannot be a server's and a --duration that measures
// nothing are usage errors, before anything is sent.
func TestBenchServeUsageCLI(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "127.0.0.1:27801"}, "--server"},
		{[]string{"--server", "ftp://x"}, "--server"},
		{[]string{"--server", "http://[::1"}, "--server"},
		{[]string{"--server", "http://127.0.0.1:99999"}, "--server"},
		{[]string{"--server", "http://127.0.0.1:1", "--duration", "0s"}, "--duration"},
		{[]string{"--server", "http://127.0.0.1:1", "--duration", "-1s"}, "--duration"},
		{[]string{"--server", "http://127.0.0.1:1", "--warmup", "-1s"}, "--warmup"},
	} {
		// Short levels otherwise, so that an accepted URL ends soon.
		args := append([]string{"bench", "serve", "--screen", sampleScreen, "--concurrency", "1", "--duration", "100ms", "--warmup", "0s"}, c.args...)
		stdout, stderr, code := runCLI(t, args...)
		wantOneLineError(t, stdout, stderr, code, exitUsage, c.want)
	}
}

// Requests that fail fail the command (exit 1, after the table), and the
// clients pause after each failure instead of spinning on the server.
func TestBenchServeErrorsCLI(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error": "no", "kind": "bad_request"}`, http.StatusBadRequest)
	}))
	defer ts.Close()
	for _, server := range []string{ts.URL, "http://127.0.0.1:1"} {
		calls.Store(0)
		stdout, stderr, code := runCLI(t, "bench", "serve", "--server", server, "--concurrency", "2", "--duration", "400ms",
			"--warmup", "0s", "--screen", sampleScreen)
		if code != 1 || !strings.Contains(stdout, "concurrency") || !strings.Contains(stderr, "measured requests failed (") ||
			!strings.Contains(stderr, "at concurrency 2") {
			t.Errorf("%s: exit %d\nstdout: %s\nstderr: %s", server, code, stdout, stderr)
		}
		// 50, 100, 200 ms pauses: a few requests per client, not thousands.
		if n := calls.Load(); n > 20 {
			t.Errorf("%s: %d requests in 400 ms from 2 clients", server, n)
		}
	}
}
