package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/serve/servetest"
)

// startServe serves the tiny bundle on addr ("127.0.0.1:0" for any port) and
// returns the base URL and a stop function that drains like SIGTERM.
func startServe(t *testing.T, addr string) (string, func()) {
	t.Helper()
	p, s := servetest.Start(t, tinyBundle, "tiny")
	var ln net.Listener
	var err error
	for i := 0; ; i++ { // a port just closed may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(ln)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Shutdown(ctx)
		p.Close()
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// runSampleEpisode runs one 3-step episode of `autoui run args...` (which
// choose the predictor: --model or --server) on a fake phone showing the
// sample home screen, behind a real adb server; during runs beside it.
func runSampleEpisode(t *testing.T, during func(phone *fakephone.RecordingPhone), args ...string) (*fakephone.RecordingPhone, string, error) {
	t.Helper()
	screenPNG, err := os.ReadFile(sampleScreen)
	if err != nil {
		t.Fatal(err)
	}
	phone, err := fakephone.NewRecordingPhone(screenPNG)
	if err != nil {
		t.Fatal(err)
	}
	srv := phonetest.StartServer(t)
	fake := phonetest.New(t, fakephone.Options{Phone: phone})
	phonetest.Connect(t, srv, fake)
	out := filepath.Join(t.TempDir(), "traj")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	mf := addModelFlags(fs)
	rf := addRunFlags(fs)
	sf := addServerFlags(fs)
	args = append([]string{"--goal", "Open the settings app", "--max-steps", "3", "--settle-min", "0",
		"--adb-host", "127.0.0.1", "--adb-port", strconv.Itoa(srv.Port), "--out", out}, args...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := rf.validate(); err != nil {
		t.Fatal(err)
	}
	if err := sf.validate(fs, mf); err != nil {
		t.Fatal(err)
	}
	dev := connect(t, rf)
	pred, closeFn, err := sf.open(mf)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if during != nil {
		go during(phone)
	}
	err = runEpisode(context.Background(), dev, pred, rf, strings.NewReader(""), io.Discard, io.Discard)
	return phone, out, err
}

// The agent loop runs near the phone and predicts on the server: the same
// first action as with the model loaded here (TestRunEpisodeWithTinyBundle).
func TestRunWithServer(t *testing.T) {
	url, _ := startServe(t, "127.0.0.1:0")
	phone, out, err := runSampleEpisode(t, nil, "--server", url, "--no-annotate")
	if err != nil && !strings.Contains(err.Error(), "does not parse") {
		t.Fatal(err)
	}
	events := phone.Events()
	if len(events) == 0 || events[0].Kind != fakephone.EventTap || events[0].X1 != 167 || events[0].Y1 != 972 {
		t.Fatalf("first input %+v, want a tap at 167,972 (Settings)", events)
	}
	if _, err := os.Stat(filepath.Join(out, "steps.jsonl")); err != nil {
		t.Fatal(err)
	}
	// summary.json says which server predicted.
	var sum struct {
		Model map[string]string `json:"model"`
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(raw, &sum); err != nil || sum.Model["server"] != url {
		t.Fatalf("summary.json model %v (%v), want the server %s", sum.Model, err, url)
	}
}

// The server restarts in the middle of the episode: the agent waits for it
// and finishes every step; nothing is lost from the trajectory.
func TestRunWithServerRestart(t *testing.T) {
	url, stop := startServe(t, "127.0.0.1:0")
	addr := strings.TrimPrefix(url, "http://")
	restarted := make(chan struct{})
	during := func(phone *fakephone.RecordingPhone) {
		defer close(restarted)
		for len(phone.Events()) == 0 { // after the first action
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		time.Sleep(300 * time.Millisecond) // down while the agent asks for step 2
		startServe(t, addr)
	}
	_, out, err := runSampleEpisode(t, during, "--server", url, "--no-annotate", "--repeat-limit", "5")
	<-restarted
	if err != nil && !strings.Contains(err.Error(), "does not parse") {
		t.Fatal(err)
	}
	raw, rerr := os.ReadFile(filepath.Join(out, "steps.jsonl"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if n := strings.Count(string(raw), "\n"); n < 2 {
		t.Fatalf("%d steps recorded across the restart:\n%s", n, raw)
	}
	var sum struct {
		Error string `json:"error"`
	}
	raw, _ = os.ReadFile(filepath.Join(out, "summary.json"))
	if json.Unmarshal(raw, &sum); strings.Contains(sum.Error, "server") {
		t.Fatalf("the restart reached the trajectory: %s", sum.Error)
	}
}

// Flags for a local model are refused with --server; --token-file needs it.
func TestRunServerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--server", "http://127.0.0.1:1", "--model", tinyBundle},
		{"--server", "http://127.0.0.1:1", "--threads", "2"},
		{"--token-file", "x"},
		{"--server", "ftp://x"},
		{"--server", "http://[::1"},
		{"--server", "http://127.0.0.1:99999"},
		{"--server", "http://exa mple.com"},
		{"--server", "127.0.0.1:8080"},
	} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		mf := addModelFlags(fs)
		sf := addServerFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var usage usageError
		if err := sf.validate(fs, mf); !errors.As(err, &usage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
