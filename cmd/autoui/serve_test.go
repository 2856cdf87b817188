package main

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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/serve"
	"github.com/autoui/autoui/serve/servetest"
)

// TestServeCLI runs `autoui serve` in a child process, batching and
// continuous: it reports its address, loads the model, answers a
// prediction, and exits 0 on SIGTERM, also with a client still sending its
// request (its connection is closed after a grace).
func TestServeCLI(t *testing.T) {
	t.Run("batches", func(t *testing.T) { serveCLI(t, true, "--concurrent-batches", "2") })
	t.Run("continuous", func(t *testing.T) { serveCLI(t, false, "--continuous", "--cuda-graph") })
	t.Run("continuous-overlap", func(t *testing.T) { serveCLI(t, false, "--continuous", "--cuda-graph", "--overlap-joins") })
}

func serveCLI(t *testing.T, stalled bool, args ...string) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	enc, _ := json.Marshal(append([]string{"serve", "--model", "../../models/testdata/tiny", "--addr", "127.0.0.1:0",
		"--max-batch", "2", "--batch-wait", "1ms", "--token-file", tokenFile, "--threads", "1"}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIHelperProcess$")
	cmd.Env = append(os.Environ(), cliArgsEnv+"="+string(enc), "ORT_DISABLE_TELEMETRY=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var log []string
	next := func(prefix string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stderr closed before %q: %q", prefix, log)
				}
				log = append(log, l)
				if strings.HasPrefix(l, prefix) {
					return strings.TrimPrefix(l, prefix)
				}
			case <-timeout:
				t.Fatalf("no %q in %q", prefix, log)
			}
		}
	}
	url := next("autoui serve: listening on ")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("listening on %q", url)
	}
	if r, err := http.Get(url + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", r, err)
	}
	if ready := next("autoui serve: ready ("); !strings.Contains(ready, "models/testdata/tiny") {
		t.Errorf("ready line %q", ready)
	}
	if r, err := http.Get(url + "/readyz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("/readyz: %v %v", r, err)
	}

	screen, err := os.ReadFile("../../models/testdata/screens/home_720x1280.png")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.PredictRequest{Goal: "Open Chrome", Screen: screen})
	send := func(token string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/predict", bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := send(""); resp.StatusCode != 401 {
		t.Errorf("without the token: %d %s", resp.StatusCode, b)
	}
	resp, b := send("t0ken")
	var p api.Prediction
	if resp.StatusCode != 200 || json.Unmarshal(b, &p) != nil || p.Raw == "" || p.Serve == nil || p.Serve.BatchSize != 1 {
		t.Fatalf("predict: %d %s", resp.StatusCode, b)
	}

	if stalled { // half a request line, never finished: it held the exit at 1
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("POST /v1/pre"))
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if stalled {
		next("autoui serve: closed the connections still sending a request")
	}
	if slices.Contains(args, "--continuous") {
		// where the continuous decode's time went: the one request's join
		if l := next("autoui serve: continuous decode: "); !strings.HasPrefix(l, "1 joins of 1.0 requests") {
			t.Errorf("continuous decode: %q", l)
		}
	}
	next("autoui serve: stopped")
	for l := range lines {
		log = append(log, l)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM; stderr %q", code, log)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q", stdout.String())
	}
	for _, l := range log {
		if strings.Contains(l, "panic") || strings.Contains(l, "goroutine ") {
			t.Errorf("stderr: %q", log)
		}
	}
}

func TestServeCLIErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve"}, exitUsage, "--model is required"},
		{[]string{"serve", "--model", "x", "--max-batch", "-1"}, exitUsage, "--max-batch -1"},
		// The batch-size histogram and the engine's rows are bounded.
		{[]string{"serve", "--model", "x", "--max-batch", "10000000"}, exitUsage, "--max-batch 10000000: want 1 to 1024"},
		{[]string{"serve", "--model", "x", "--max-batch", "1025"}, exitUsage, "want 1 to 1024"},
		{[]string{"serve", "--model", "x", "--queue", "0"}, exitUsage, "--queue 0"},
		{[]string{"serve", "--model", "x", "--concurrent-batches", "0"}, exitUsage, "--concurrent-batches 0"},
		{[]string{"serve", "--model", "x", "--concurrent-batches", "1000000000"}, exitUsage, "want 1 to --queue (64)"},
		{[]string{"serve", "--model", "x", "--max-pixels", "-1"}, exitUsage, "--max-pixels"},
		{[]string{"serve", "--model", "x", "--continuous"}, exitUsage, "--continuous needs --cuda-graph"},
		{[]string{"serve", "--model", "x", "--continuous", "--cuda-graph", "--concurrent-batches", "2"}, exitUsage, "one continuous decode"},
		{[]string{"serve", "--model", "x", "--continuous", "--cuda-graph", "--join-min", "-1"}, exitUsage, "--join-min -1"},
		{[]string{"serve", "--model", "x", "--cuda-graph", "--overlap-joins"}, exitUsage, "--overlap-joins needs --continuous"},
		{[]string{"serve", "--model", "x", "--continuous", "--cuda-graph", "--join-wait", "0s"}, exitUsage, "--join-wait 0s"},
		{[]string{"serve", "--model", "x", "--continuous", "--cuda-graph", "--max-batch", "5000"}, exitUsage, "want 1 to 1024"},
		{[]string{"serve", "--model", "x", "--token-file", empty}, exitError, "is empty"},
		{[]string{"serve", "--model", "x", "--addr", "256.0.0.1:1"}, exitError, "--addr"},
	} {
		stdout, stderr, code := runCLI(t, tc.args...)
		wantOneLineError(t, stdout, stderr, code, tc.code, tc.want)
	}
	// A bundle that fails to load: the address was announced, then exit 1.
	stdout, stderr, code := runCLI(t, "serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0")
	if code != exitError || !strings.HasPrefix(stderr, "autoui serve: listening on http://127.0.0.1:") || strings.Contains(stdout+stderr, "panic") {
		t.Errorf("bad bundle: exit %d, stderr %q", code, stderr)
	}
	// Concurrent batches under CUDA graphs run one at a time: said at the start.
	_, stderr, _ = runCLI(t, "serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0", "--provider", "cuda", "--cuda-graph", "--concurrent-batches", "2")
	if !strings.HasPrefix(stderr, "autoui serve: --concurrent-batches 2 with --cuda-graph: the engine runs the batches one at a time") {
		t.Errorf("--concurrent-batches under --cuda-graph: stderr %q", stderr)
	}
}

// TestServeHelpMaxPixels: serve's --max-pixels help names serve's own
// screen cap (phones and tablets), not the one for local files.
func TestServeHelpMaxPixels(t *testing.T) {
	stdout, stderr, _ := runCLI(t, "serve", "-h")
	out := stdout + stderr
	i := strings.Index(out, "-max-pixels")
	if i < 0 {
		t.Fatalf("no --max-pixels in serve -h: %q", out)
	}
	if line, _, _ := strings.Cut(out[i:], "\n  -"); !strings.Contains(line, fmt.Sprint(serve.DefaultMaxPixels)) {
		t.Errorf("--max-pixels help %q does not name serve's cap %d", line, serve.DefaultMaxPixels)
	}
}

// serve --replay: every request, batched or alone, decodes the replayed
// action through the engine (what bench --replay does), and a client's
// shorter token limit does not cut it.
func TestServeReplay(t *testing.T) {
	p, _ := servetest.Start(t, tinyBundle, "")
	m, err := replayModel(serve.ModelOf(p, ""), p, "typical")
	if err != nil {
		t.Fatal(err)
	}
	reqs := []predict.Request{
		{Goal: "Open Chrome", Features: make([]float32, p.Bundle().Manifest.Model.ImageDim), MaxNewTokens: 8},
		{Goal: "Search for cats", Features: make([]float32, p.Bundle().Manifest.Model.ImageDim)},
	}
	for _, r := range reqs {
		if err := m.Check(r); err != nil {
			t.Fatalf("check: %v", err)
		}
	}
	res, err := m.Engine.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	one, err := m.Engine.Predict(context.Background(), reqs[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(res, one) {
		if r.Raw != bench.TypicalAction {
			t.Errorf("raw %q, want the replayed action", r.Raw)
		}
	}
	if _, err := replayModel(serve.ModelOf(p, ""), p, strings.Repeat("tap ", 200)); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("a replay over the token limit: %v", err)
	}
	// --replay mixed: the requests decode bench.MixedActions in turn, a
	// check taking no turn; each parses as the action it replays
	if m, err = replayModel(serve.ModelOf(p, ""), p, bench.MixedReplay); err != nil {
		t.Fatal(err)
	}
	var mixed []predict.Request
	for range 2 * len(bench.MixedActions) {
		r := reqs[1]
		if err := m.Check(r); err != nil {
			t.Fatalf("check: %v", err)
		}
		mixed = append(mixed, r)
	}
	res, err = m.Engine.PredictBatch(context.Background(), mixed)
	if err != nil {
		t.Fatal(err)
	}
	lengths := map[int]bool{}
	for i, r := range res {
		if want := bench.MixedActions[i%len(bench.MixedActions)]; r.Raw != want || r.ParseErr != nil {
			t.Errorf("request %d: raw %q (%v), want %q", i, r.Raw, r.ParseErr, want)
		}
		lengths[len(r.TokenIDs)] = true
	}
	if len(lengths) < 4 {
		t.Errorf("mixed answers of %d lengths: %v", len(lengths), lengths)
	}
	if _, _, err := bench.ReplayTokens(p.Tokenizer(), bench.MixedReplay); err == nil {
		t.Error("bench --replay mixed: no error")
	}

	// serve --continuous --replay: the jobs of the continuous decode too
	b, err := models.Load(tinyBundle, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := engine.NewPredictor(b, engine.Options{CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if m, err = replayModel(serve.ModelOf(sp, ""), sp, "typical"); err != nil {
		t.Fatal(err)
	}
	var raws []string
	given := false
	err = m.Engine.(predict.Streamer).Stream(context.Background(), 2, func(int, bool) ([]predict.Job, bool) {
		if given {
			return nil, false
		}
		given = true
		var jobs []predict.Job
		for _, r := range reqs {
			jobs = append(jobs, predict.Job{Ctx: context.Background(), Req: r, Done: func(res *predict.Result, err error) {
				if err != nil {
					t.Error(err)
					return
				}
				raws = append(raws, res.Raw)
			}})
		}
		return jobs, true
	})
	if err != nil || !slices.Equal(raws, []string{bench.TypicalAction, bench.TypicalAction}) {
		t.Errorf("continuous replay: %q, %v", raws, err)
	}
}

// --max-batch 0 (the default) is 8 on the cpu and 64 under cuda; a value
// given is kept.
func TestServeMaxBatchDefault(t *testing.T) {
	for _, tc := range []struct {
		flag     int
		provider engine.Provider
		want     int
	}{{0, engine.ProviderCPU, serve.DefaultMaxBatch}, {0, engine.ProviderCUDA, serve.DefaultMaxBatchCUDA}, {3, engine.ProviderCUDA, 3}, {100, engine.ProviderCPU, 100}} {
		if got := serveMaxBatch(tc.flag, tc.provider); got != tc.want {
			t.Errorf("--max-batch %d --provider %q: %d, want %d", tc.flag, tc.provider, got, tc.want)
		}
	}
}

// --join-min 0 (the default) is 1 on the cpu and a quarter of the rows
// under cuda (at least 1); a value given is kept.
func TestServeJoinMinDefault(t *testing.T) {
	for _, tc := range []struct {
		flag     int
		provider engine.Provider
		rows     int
		want     int
	}{{0, engine.ProviderCPU, 64, 1}, {0, engine.ProviderCUDA, 64, 16}, {0, engine.ProviderCUDA, 2, 1}, {5, engine.ProviderCUDA, 64, 5}, {3, engine.ProviderCPU, 8, 3}} {
		if got := defaultJoinMin(tc.flag, tc.provider, tc.rows); got != tc.want {
			t.Errorf("--join-min %d --provider %q, %d rows: %d, want %d", tc.flag, tc.provider, tc.rows, got, tc.want)
		}
	}
}
