package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/preprocess/imagetest"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

const testdata = "../models/testdata"

var (
	tinyOnce sync.Once
	tinyPred *engine.Predictor
	tinyErr  error
)

// tiny is a predictor on the committed tiny bundle, shared by the tests.
func tiny(t testing.TB) *engine.Predictor {
	t.Helper()
	tinyOnce.Do(func() {
		b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
		if err != nil {
			tinyErr = err
			return
		}
		tinyPred, tinyErr = engine.NewPredictor(b, engine.Options{})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyPred
}

func tinyModel(t testing.TB) Model {
	t.Helper()
	return ModelOf(tiny(t), "")
}

// start runs a server with the tiny model (when m is not nil) on a real
// listener; it is shut down when the test ends.
func start(t *testing.T, cfg Config, m *Model, hooks ...func(*Server)) (*Server, *httptest.Server) {
	t.Helper()
	s := New(cfg)
	for _, h := range hooks {
		h(s)
	}
	if m != nil {
		s.SetModel(*m)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		ts.Close()
	})
	return s, ts
}

func screenBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "screens", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeScreen(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, err := preprocess.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// post sends a JSON body (any value, or raw bytes) to /v1/predict.
func post(t testing.TB, ctx context.Context, url string, body any, header ...string) (*http.Response, []byte) {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/predict", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		t.Error(err)
		return nil, nil
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp, out
}

func wantPrediction(t testing.TB, status int, body []byte) api.Prediction {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var p api.Prediction
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if p.Serve == nil || p.Serve.BatchSize < 1 || p.Serve.Batch < 1 || p.Serve.QueueMS < 0 {
		t.Errorf("serve info %+v", p.Serve)
	}
	return p
}

func wantError(t testing.TB, resp *http.Response, body []byte, status int, kind, mention string) {
	t.Helper()
	if resp == nil {
		t.Fatalf("no response, want %d %s", status, kind)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	var e api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Kind != kind || !strings.Contains(e.Error, mention) {
		t.Errorf("error %+v, want kind %s mentioning %q", e, kind, mention)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// sameResult checks that a served prediction is the engine's own result:
// the wire form of both, timings and serve info aside.
func sameResult(t testing.TB, what string, got api.Prediction, want *predict.Result) {
	t.Helper()
	w := api.FromResult(want)
	got.Serve, got.Timings, w.Timings = nil, predict.Timings{}, predict.Timings{}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("%s: served %+v\nengine %+v", what, got, w)
	}
}

func TestPredictScreenAndFeatures(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{}, &m)
	p := tiny(t)
	png := screenBytes(t, "home_1080x2400.png")
	history := []action.Action{{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.25}, Lift: action.Point{Y: 0.5, X: 0.25}}}
	want, err := p.Predict(context.Background(), predict.Request{Screen: decodeScreen(t, png), Goal: "Open the settings app", History: history})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := post(t, context.Background(), ts.URL, api.PredictRequest{Goal: "Open the settings app", Screen: png, History: history})
	got := wantPrediction(t, resp.StatusCode, body)
	sameResult(t, "screen", got, want)
	if got.Timings.Total <= 0 || got.Timings.Vision <= 0 {
		t.Errorf("timings %+v", got.Timings)
	}

	resp, body = post(t, context.Background(), ts.URL, api.PredictRequest{Goal: "Open the settings app", Features: want.Features, History: history})
	sameResult(t, "features", wantPrediction(t, resp.StatusCode, body), want)

	// Options reach the engine: a token limit and the grammar.
	opt := predict.Request{Features: want.Features, Goal: "Open Chrome", MaxNewTokens: 80, Constrained: true}
	want, err = p.Predict(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	resp, body = post(t, context.Background(), ts.URL, api.PredictRequest{Goal: "Open Chrome", Features: want.Features,
		Options: api.Options{MaxNewTokens: 80, Constrain: true}})
	sameResult(t, "options", wantPrediction(t, resp.StatusCode, body), want)
}

// TestWireRequestFields: the server's strict reading of a request has the
// fields of api.PredictRequest.
func TestWireRequestFields(t *testing.T) {
	a, b := reflect.TypeFor[api.PredictRequest](), reflect.TypeFor[wireRequest]()
	if a.NumField() != b.NumField() {
		t.Fatalf("api.PredictRequest has %d fields, wireRequest %d", a.NumField(), b.NumField())
	}
	for i := range a.NumField() {
		if a.Field(i).Name != b.Field(i).Name || a.Field(i).Tag != b.Field(i).Tag {
			t.Errorf("field %d: api.PredictRequest %s %q, wireRequest %s %q", i, a.Field(i).Name, a.Field(i).Tag, b.Field(i).Name, b.Field(i).Tag)
		}
	}
}

type goldenCase struct {
	Screen  string          `json:"screen"`
	Goal    string          `json:"goal"`
	History []action.Action `json:"history"`
}

func goldenCases(t testing.TB) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testdata, "golden", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

// TestBatchingEquivalence sends 12 different requests at once to a server
// batching up to 4: every answer is the one-by-one prediction, and some
// engine calls held more than one request.
func TestBatchingEquivalence(t *testing.T) {
	m := tinyModel(t)
	var sizes []int
	var mu sync.Mutex
	s, ts := start(t, Config{MaxBatch: 4, BatchWait: 100 * time.Millisecond}, &m, func(s *Server) {
		s.beforeBatch = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }
	})
	reqs, want := goldenRequests(t, 12)
	got := postAll(t, ts.URL, reqs)
	maxSize := 0
	for i := range reqs {
		sameResult(t, fmt.Sprintf("case %d", i), got[i], want[i])
		if got[i].Serve != nil {
			maxSize = max(maxSize, got[i].Serve.BatchSize)
			if got[i].Serve.BatchSize > 4 {
				t.Errorf("case %d in a batch of %d, over --max-batch 4", i, got[i].Serve.BatchSize)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxSize < 2 || slices.Max(sizes) < 2 {
		t.Errorf("no batch held more than one request: %v", sizes)
	}
	if total := sum(sizes); total != len(reqs) {
		t.Errorf("batches %v hold %d requests, want %d", sizes, total, len(reqs))
	}
	if n := countMetric(t, s, "autoui_batches_total"); n != float64(len(sizes)) {
		t.Errorf("autoui_batches_total %v, want %d", n, len(sizes))
	}
}

// goldenRequests are the first n golden cases as requests with their
// screens' features, and the tiny model's one-by-one predictions of them.
func goldenRequests(t *testing.T, n int) ([]api.PredictRequest, []*predict.Result) {
	t.Helper()
	p := tiny(t)
	cases := goldenCases(t)[:n]
	feats := map[string][]float32{}
	want := make([]*predict.Result, len(cases))
	reqs := make([]api.PredictRequest, len(cases))
	for i, c := range cases {
		if feats[c.Screen] == nil {
			f, err := p.ImageFeatures(context.Background(), decodeScreen(t, screenBytes(t, filepath.Base(c.Screen))))
			if err != nil {
				t.Fatal(err)
			}
			feats[c.Screen] = f
		}
		reqs[i] = api.PredictRequest{Goal: c.Goal, Features: feats[c.Screen], History: c.History}
		var err error
		if want[i], err = p.Predict(context.Background(), predict.Request{Goal: c.Goal, Features: feats[c.Screen], History: c.History}); err != nil {
			t.Fatal(err)
		}
	}
	return reqs, want
}

// postAll sends every request at once and returns the predictions, in
// request order.
func postAll(t *testing.T, url string, reqs []api.PredictRequest) []api.Prediction {
	t.Helper()
	got := make([]api.Prediction, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			resp, body := post(t, context.Background(), url, reqs[i])
			if resp != nil {
				got[i] = wantPrediction(t, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	return got
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

func TestLimits(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{MaxBody: 64 << 10}, &m)
	ctx := context.Background()
	dim := tiny(t).Bundle().Manifest.Model.ImageDim
	feats := make([]float32, dim)

	resp, body := post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Screen: make([]byte, 100<<10)})
	wantError(t, resp, body, 413, KindTooLarge, "over the limit of 65536 bytes")
	// Without a Content-Length (chunked), the reader's cap applies.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/predict", io.MultiReader(strings.NewReader(`{"goal": "`),
		strings.NewReader(strings.Repeat("a", 100<<10)), strings.NewReader(`"}`)))
	if r, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		wantError(t, r, b, 413, KindTooLarge, "over the limit")
	}

	hostile := imagetest.HostilePNG(200000, 200000, 0)
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Screen: hostile})
	wantError(t, resp, body, 413, KindTooLarge, "200000x200000")

	resp, body = post(t, ctx, ts.URL, `{"goal": "g", "features": [0], "temperature": 0.7}`)
	wantError(t, resp, body, 400, KindBadRequest, `unknown field "temperature"`)
	resp, body = post(t, ctx, ts.URL, `{"goal": "g", "features": [0], "options": {"beams": 2}}`)
	wantError(t, resp, body, 400, KindBadRequest, `unknown field "beams"`)
	resp, body = post(t, ctx, ts.URL, `{"goal": "g"`)
	wantError(t, resp, body, 400, KindBadRequest, "request body")
	// Wrong JSON types are named in JSON's terms, not Go's (issue 22).
	for raw, want := range map[string]string{
		`{"goal": "g", "screen": 5}`:                                         "screen: want a base64 string, got number",
		`{"goal": 1, "features": [0]}`:                                       "goal: want a string, got number",
		`{"goal": "g", "features": "x"}`:                                     "features: want an array of numbers, got string",
		`{"goal": "g", "features": [0], "options": {"max_new_tokens": "9"}}`: "options.max_new_tokens: want an integer, got string",
		`[1]`:                                   "want a JSON object (api.PredictRequest), got array",
		`{"goal": "g", "features": [0, -1e39]}`: "features: -1e39 is outside the range of a 32-bit float",
	} {
		resp, body = post(t, ctx, ts.URL, raw)
		wantError(t, resp, body, 400, KindBadRequest, want)
		for _, goName := range []string{"wireRequest", "uint8", "float32", "of type"} {
			if strings.Contains(string(body), goName) {
				t.Errorf("%s: the answer names Go's %q: %s", raw, goName, body)
			}
		}
	}
	resp, body = post(t, ctx, ts.URL, ``)
	wantError(t, resp, body, 400, KindBadRequest, "empty")
	resp, body = post(t, ctx, ts.URL, `{"goal": "g", "features": [0]} {}`)
	wantError(t, resp, body, 400, KindBadRequest, "more than one JSON value")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Features: feats, Screen: screenBytes(t, "home_720x1280.png")})
	wantError(t, resp, body, 400, KindBadRequest, "not both")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g"})
	wantError(t, resp, body, 400, KindBadRequest, "screen (base64 PNG or JPEG) or features is required")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Features: feats})
	wantError(t, resp, body, 400, KindBadRequest, "goal is required")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Features: feats[1:]})
	wantError(t, resp, body, 400, KindBadRequest, fmt.Sprintf("image_dim is %d", dim))
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Screen: []byte("GIF89a....")})
	wantError(t, resp, body, 400, KindBadRequest, "not a PNG or JPEG")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Features: feats, History: []action.Action{{Type: action.DualPoint, Touch: action.Point{Y: 2, X: 0.5}, Lift: action.Point{Y: 2, X: 0.5}}}})
	wantError(t, resp, body, 400, KindBadRequest, "history action 0")
	resp, body = post(t, ctx, ts.URL, `{"goal": "g", "features": [0], "history": [{"action_type": "PRESS_BACK", "touch_point": [-1, -1], "lift": [0.5, 0.5]}]}`)
	wantError(t, resp, body, 400, KindBadRequest, `unknown field "lift"`)
	resp, body = post(t, ctx, ts.URL, `{"goal": "g", "features": [0], "history": [{"action_type": "FLY"}]}`)
	wantError(t, resp, body, 400, KindBadRequest, "request body")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Features: feats, Options: api.Options{MaxNewTokens: -1}})
	wantError(t, resp, body, 400, KindBadRequest, "max_new_tokens -1")
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g", Features: feats, Options: api.Options{MaxNewTokens: 5, Constrain: true}})
	wantError(t, resp, body, 400, KindBadRequest, "constrained decoding needs a limit")

	r, err := http.Get(ts.URL + "/v1/predict")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	wantError(t, r, b, 405, KindMethodNotAllowed, "POST")
	if r.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.Header.Get("Allow"))
	}
}

// holdingServer is a server whose batcher waits in beforeBatch until
// released; entered receives each batch's size as it waits.
func holdingServer(t *testing.T, cfg Config, hooks ...func(*Server)) (s *Server, ts *httptest.Server, entered chan int, release func()) {
	t.Helper()
	m := tinyModel(t)
	entered = make(chan int, 100)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	hooks = append(hooks, func(s *Server) {
		s.beforeBatch = func(n int) { entered <- n; <-gate }
	})
	s, ts = start(t, cfg, &m, hooks...)
	t.Cleanup(release)
	return s, ts, entered, release
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func featureRequest(t testing.TB, goal string) api.PredictRequest {
	return api.PredictRequest{Goal: goal, Features: make([]float32, tiny(t).Bundle().Manifest.Model.ImageDim)}
}

func TestQueueFull(t *testing.T) {
	s, ts, entered, release := holdingServer(t, Config{Queue: 1, MaxBatch: 1, BatchWait: -1})
	ctx := context.Background()
	results := make(chan int, 2)
	go func() { r, _ := post(t, ctx, ts.URL, featureRequest(t, "first")); results <- code(r) }()
	<-entered // the first request is in the engine call, held
	go func() { r, _ := post(t, ctx, ts.URL, featureRequest(t, "second")); results <- code(r) }()
	waitFor(t, "the second request to be queued", func() bool { return len(s.queue) == 1 })
	if d := countMetric(t, s, "autoui_queue_depth"); d != 1 {
		t.Errorf("autoui_queue_depth %v, want 1", d)
	}
	resp, body := post(t, ctx, ts.URL, featureRequest(t, "third"))
	wantError(t, resp, body, 429, KindQueueFull, "queue of 1 requests is full")
	if resp.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want 1", resp.Header.Get("Retry-After"))
	}
	release()
	for range 2 {
		if c := <-results; c != 200 {
			t.Errorf("held request answered %d", c)
		}
	}
	if n := countMetric(t, s, "autoui_errors_total", "kind", KindQueueFull); n != 1 {
		t.Errorf("queue_full errors %v", n)
	}
}

func code(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

func TestAuth(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{Token: "s3cret-token"}, &m)
	ctx := context.Background()
	req := featureRequest(t, "Open Chrome")
	resp, body := post(t, ctx, ts.URL, req)
	wantError(t, resp, body, 401, KindUnauthorized, "bearer token")
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
	}
	resp, body = post(t, ctx, ts.URL, req, "Authorization", "Bearer s3cret-tokeN")
	wantError(t, resp, body, 401, KindUnauthorized, "bearer token")
	resp, body = post(t, ctx, ts.URL, req, "Authorization", "Basic s3cret-token")
	wantError(t, resp, body, 401, KindUnauthorized, "bearer token")
	resp, body = post(t, ctx, ts.URL, req, "Authorization", "Bearer s3cret-token")
	wantPrediction(t, resp.StatusCode, body)
	// all of /v1 wants the token before it says more: no path, no method
	for _, path := range []string{"/v1/predict", "/v1/models", "/v1/"} {
		if c, b := get(t, ts.URL+path); c != 401 || !strings.Contains(b, KindUnauthorized) {
			t.Errorf("GET %s without a token: %d %s", path, c, b)
		}
	}
	r, err := http.NewRequest(http.MethodGet, ts.URL+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer s3cret-token")
	if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /v1/models with the token: %v %v", code(resp), err)
	} else {
		resp.Body.Close()
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		r, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Errorf("%s without a token: %d", path, r.StatusCode)
		}
	}
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

func TestMetrics(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{MaxBatch: 4}, &m)
	ctx := context.Background()
	resp, body := post(t, ctx, ts.URL, featureRequest(t, "Open Chrome"))
	wantPrediction(t, resp.StatusCode, body)
	resp, body = post(t, ctx, ts.URL, api.PredictRequest{Goal: "g"})
	wantError(t, resp, body, 400, KindBadRequest, "required")
	code, text := get(t, ts.URL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics %d", code)
	}
	for _, want := range []string{
		`autoui_request_duration_seconds_bucket{code="200",`, `autoui_request_duration_seconds_count{code="400"} 1`,
		`autoui_batch_requests_bucket{le="4"} 1`, "autoui_queue_depth 0", `autoui_errors_total{kind="bad_request"} 1`,
		"autoui_batches_total 1", "autoui_batches_running 0", "autoui_dropped_total 0", "autoui_canceled_total 0", "autoui_engine_seconds_count 1",
		"go_goroutines", "process_",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	for _, st := range Stages {
		if !strings.Contains(text, `autoui_stage_seconds_count{stage="`+st+`"} 1`) {
			t.Errorf("/metrics has no stage %s", st)
		}
	}
	// Conventional names: no unit-less "size", no whole beside its parts,
	// no client cancellation counted as an error.
	for _, bad := range []string{"autoui_batch_size", `stage="total"`, `kind="canceled"`} {
		if strings.Contains(text, bad) {
			t.Errorf("/metrics has %q", bad)
		}
	}
	// Every error kind is exported from the start (at 0).
	for _, k := range Kinds {
		if !strings.Contains(text, `autoui_errors_total{kind="`+k+`"}`) {
			t.Errorf("/metrics has no error kind %s", k)
		}
	}
}

// TestBatchBuckets: the batch-size histogram counts every size up to 64,
// then powers of two, so its scrape stays small at the largest --max-batch;
// a larger MaxBatch is the limit.
func TestBatchBuckets(t *testing.T) {
	upto := func(n int) []float64 {
		var b []float64
		for i := 1; i <= n; i++ {
			b = append(b, float64(i))
		}
		return b
	}
	for _, tc := range []struct {
		maxBatch int
		want     []float64
	}{
		{4, upto(4)},
		{64, upto(64)},
		{100, append(upto(64), 100)},
		{1024, append(upto(64), 128, 256, 512, 1024)},
	} {
		s := New(Config{MaxBatch: tc.maxBatch})
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got []float64
		for _, mf := range mfs {
			if mf.GetName() == "autoui_batch_requests" {
				for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
					got = append(got, b.GetUpperBound())
				}
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("--max-batch %d: buckets %v, want %v", tc.maxBatch, got, tc.want)
		}
	}
	if n := (Config{MaxBatch: 10_000_000}).withDefaults().MaxBatch; n != 1024 {
		t.Fatalf("MaxBatch 10000000 is %d, want the limit 1024", n)
	}
	_, ts := start(t, Config{MaxBatch: 10_000_000}, nil)
	if c, text := get(t, ts.URL+"/metrics"); c != 200 || len(text) > 64<<10 {
		t.Errorf("/metrics at the largest batch: %d, %d bytes", c, len(text))
	}
}

// TestReadOnlyPaths: /healthz, /readyz and /metrics take GET and HEAD only.
func TestReadOnlyPaths(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{}, &m)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
			req, _ := http.NewRequest(method, ts.URL+path, nil)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if method == http.MethodGet || method == http.MethodHead {
				if r.StatusCode != 200 {
					t.Errorf("%s %s: %d", method, path, r.StatusCode)
				}
				continue
			}
			wantError(t, r, b, 405, KindMethodNotAllowed, "GET, HEAD")
			if r.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, path, r.Header.Get("Allow"))
			}
		}
	}
}

func TestReadyz(t *testing.T) {
	s, ts := start(t, Config{}, nil)
	if c, _ := get(t, ts.URL+"/healthz"); c != 200 {
		t.Errorf("/healthz %d while loading", c)
	}
	if c, _ := get(t, ts.URL+"/readyz"); c != 503 {
		t.Errorf("/readyz %d before the model is set", c)
	}
	resp, body := post(t, context.Background(), ts.URL, featureRequest(t, "g"))
	wantError(t, resp, body, 503, KindNotReady, "loading")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	s.SetModel(tinyModel(t))
	if c, _ := get(t, ts.URL+"/readyz"); c != 200 {
		t.Errorf("/readyz %d after the model is set", c)
	}
	resp, body = post(t, context.Background(), ts.URL, featureRequest(t, "g"))
	wantPrediction(t, resp.StatusCode, body)
}

// TestShutdown: a request in a running batch and one queued behind it are
// answered after shutdown begins; new ones get 503; Shutdown returns when
// both are answered.
func TestShutdown(t *testing.T) {
	s, ts, entered, release := holdingServer(t, Config{MaxBatch: 1, BatchWait: -1})
	ctx := context.Background()
	results := make(chan int, 2)
	go func() {
		r, b := post(t, ctx, ts.URL, featureRequest(t, "in flight"))
		wantPrediction(t, code(r), b)
		results <- code(r)
	}()
	<-entered
	go func() {
		r, b := post(t, ctx, ts.URL, featureRequest(t, "queued"))
		wantPrediction(t, code(r), b)
		results <- code(r)
	}()
	waitFor(t, "the second request to be queued", func() bool { return len(s.queue) == 1 })
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	waitFor(t, "/readyz to turn 503", func() bool { c, _ := get(t, ts.URL+"/readyz"); return c == 503 })
	resp, body := post(t, ctx, ts.URL, featureRequest(t, "late"))
	wantError(t, resp, body, 503, KindShuttingDown, "shutting down")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a batch running", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	for range 2 {
		if c := <-results; c != 200 {
			t.Errorf("answered %d", c)
		}
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if s.SetModel(tinyModel(t)) {
		t.Error("SetModel after Shutdown made the server ready")
	}
}

// TestShutdownAnswersDecoding: a request admitted before shutdown began and
// still decoding its screen is answered (docs: the queue includes it),
// while one arriving after is refused; a drain that runs out of time does
// not wait for the decode, and the request is then refused.
func TestShutdownAnswersDecoding(t *testing.T) {
	m := tinyModel(t)
	png := screenBytes(t, "home_720x1280.png")
	for _, outOfTime := range []bool{false, true} {
		decoding := make(chan struct{}, 1)
		gate := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(gate) }) }
		s, ts := start(t, Config{}, &m, func(s *Server) {
			s.beforeDecode = func() { decoding <- struct{}{}; <-gate }
		})
		t.Cleanup(release) // before the server's: a failed test leaves no request held
		type reply struct {
			resp *http.Response
			body []byte
		}
		replied := make(chan reply, 1)
		go func() {
			r, b := post(t, context.Background(), ts.URL, api.PredictRequest{Goal: "g", Screen: png})
			replied <- reply{r, b}
		}()
		<-decoding // admitted, holding a queue place
		ctx, cancel := context.WithCancel(context.Background())
		if outOfTime {
			ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
		}
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(ctx) }()
		waitFor(t, "/readyz to turn 503", func() bool { c, _ := get(t, ts.URL+"/readyz"); return c == 503 })
		resp, body := post(t, context.Background(), ts.URL, featureRequest(t, "late"))
		wantError(t, resp, body, 503, KindShuttingDown, "shutting down")
		if outOfTime {
			select {
			case err := <-shut:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Shutdown out of time: %v, want the deadline", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a drain out of time waits for a screen decoding")
			}
			release()
			r := <-replied
			wantError(t, r.resp, r.body, 503, KindShuttingDown, "shutting down")
			cancel()
			continue
		}
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v with an admitted request decoding", err)
		case <-time.After(20 * time.Millisecond):
		}
		release()
		r := <-replied
		wantPrediction(t, code(r.resp), r.body)
		if err := <-shut; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
	}
}

// TestShutdownTimeout: when the drain runs out of time the running batch is
// cancelled and its request answered 503.
func TestShutdownTimeout(t *testing.T) {
	m := tinyModel(t)
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	s, ts := start(t, Config{}, nil)
	s.SetModel(Model{Engine: engineFunc(func(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return m.Engine.PredictBatch(ctx, reqs)
	}), Check: m.Check})
	defer close(gate)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, b := post(t, context.Background(), ts.URL, featureRequest(t, "slow"))
		wantError(t, r, b, 503, KindShuttingDown, "shutting down")
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want the deadline", err)
	}
	<-done
}

type engineFunc func(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error)

func (f engineFunc) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, f, req)
}

func (f engineFunc) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	return f(ctx, reqs)
}

// TestClientGoneDropped: a request whose client disconnects while it waits
// is dropped before the engine call.
func TestClientGoneDropped(t *testing.T) {
	var drops atomic.Int32
	var sizes []int
	var mu sync.Mutex
	m := tinyModel(t)
	entered := make(chan int, 10)
	gate := make(chan struct{})
	s, ts := start(t, Config{MaxBatch: 4, BatchWait: -1}, &m, func(s *Server) {
		s.onDrop = func() { drops.Add(1) }
		s.beforeBatch = func(n int) {
			mu.Lock()
			sizes = append(sizes, n)
			mu.Unlock()
			entered <- n
			<-gate
		}
	})
	first := make(chan int, 1)
	go func() { r, _ := post(t, context.Background(), ts.URL, featureRequest(t, "first")); first <- code(r) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() { post(t, ctx, ts.URL, featureRequest(t, "gone")); close(gone) }()
	stay := make(chan int, 1)
	waitFor(t, "the request to be queued", func() bool { return len(s.queue) == 1 })
	go func() { r, _ := post(t, context.Background(), ts.URL, featureRequest(t, "stays")); stay <- code(r) }()
	waitFor(t, "the second request to be queued", func() bool { return len(s.queue) == 2 })
	cancel()
	<-gone
	waitFor(t, "the server to see the client go", func() bool {
		return countMetric(t, s, "autoui_canceled_total") == 1
	})
	close(gate)
	if c := <-first; c != 200 {
		t.Errorf("first answered %d", c)
	}
	if c := <-stay; c != 200 {
		t.Errorf("the request that stayed answered %d", c)
	}
	if n := drops.Load(); n != 1 {
		t.Errorf("%d requests dropped, want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{1, 1}) {
		t.Errorf("batch sizes %v, want [1 1] (the gone client dropped)", sizes)
	}
	if n := countMetric(t, s, "autoui_dropped_total"); n != 1 {
		t.Errorf("autoui_dropped_total %v", n)
	}
}

// TestBatchErrorRetriedAlone: when an engine call fails for a batch, its
// requests are retried one by one and only the failing one gets the error.
func TestBatchErrorRetriedAlone(t *testing.T) {
	m := tinyModel(t)
	var calls []int
	var mu sync.Mutex
	s, ts := start(t, Config{MaxBatch: 4, BatchWait: 200 * time.Millisecond}, nil)
	s.SetModel(Model{Check: m.Check, Engine: engineFunc(func(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
		mu.Lock()
		calls = append(calls, len(reqs))
		mu.Unlock()
		for i, r := range reqs {
			if r.Goal == "poison" {
				return nil, fmt.Errorf("predict batch item %d: poisoned", i)
			}
		}
		return m.Engine.PredictBatch(ctx, reqs)
	})})
	goals := []string{"a", "poison", "b"}
	codes := make([]int, len(goals))
	bodies := make([][]byte, len(goals))
	var wg sync.WaitGroup
	for i, g := range goals {
		wg.Go(func() {
			r, b := post(t, context.Background(), ts.URL, featureRequest(t, g))
			codes[i], bodies[i] = code(r), b
		})
	}
	wg.Wait()
	if !slices.Equal(codes, []int{200, 500, 200}) {
		t.Errorf("codes %v, want [200 500 200]", codes)
	}
	if !bytes.Contains(bodies[1], []byte("poisoned")) || !bytes.Contains(bodies[1], []byte(KindInternal)) {
		t.Errorf("poisoned answer %s", bodies[1])
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []int{3, 1, 1, 1}) {
		t.Errorf("engine calls %v, want a batch of 3 then 3 alone", calls)
	}
}

func TestDeadline(t *testing.T) {
	_, ts, entered, release := holdingServer(t, Config{RequestTimeout: 50 * time.Millisecond})
	resp, body := post(t, context.Background(), ts.URL, featureRequest(t, "slow"))
	<-entered
	wantError(t, resp, body, 504, KindDeadline, "timed out")
	release()
}

// countMetric reads one metric's value from the server's registry (a
// counter or gauge, or a histogram's sample count), with labels name, value.
func countMetric(t testing.TB, s *Server, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// TestConcurrentBatches: with ConcurrentBatches 2, two engine calls run at
// once (each waits here until the other has started) and never more; every
// request is answered, the calls numbered apart; Shutdown waits for both
// batchers.
func TestConcurrentBatches(t *testing.T) {
	m := tinyModel(t)
	var inside, most, running atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	s, ts := start(t, Config{MaxBatch: 1, ConcurrentBatches: 2, BatchWait: -1}, nil)
	s.SetModel(Model{Engine: engineFunc(func(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n == 2 {
			once.Do(func() {
				running.Store(int32(countMetric(t, s, "autoui_batches_running")))
				close(both)
			})
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			return nil, errors.New("the other batch never started")
		}
		return m.Engine.PredictBatch(ctx, reqs)
	}), Check: m.Check})
	const requests = 6
	batches := make(chan uint64, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			r, b := post(t, context.Background(), ts.URL, featureRequest(t, fmt.Sprint("goal ", i)))
			if p := wantPrediction(t, code(r), b); p.Serve != nil {
				batches <- p.Serve.Batch
			}
		})
	}
	wg.Wait()
	close(batches)
	seen := map[uint64]bool{}
	for b := range batches {
		if seen[b] {
			t.Errorf("batch number %d given twice", b)
		}
		seen[b] = true
	}
	if len(seen) != requests || most.Load() != 2 {
		t.Errorf("%d batches numbered, at most %d engine calls at once; want %d and 2", len(seen), most.Load(), requests)
	}
	if r, after := running.Load(), countMetric(t, s, "autoui_batches_running"); r != 2 || after != 0 {
		t.Errorf("autoui_batches_running %d with two calls in the engine, %v after; want 2 and 0", r, after)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if n := (Config{ConcurrentBatches: 1 << 30, Queue: 3}).withDefaults().ConcurrentBatches; n != 3 {
		t.Errorf("a billion concurrent batches with a queue of 3: %d batchers, want 3", n)
	}
}

// With batchers to spare, one gathers at a time: requests arriving within
// the batch wait make one batch, not one per idle batcher.
func TestConcurrentBatchersGatherOneBatch(t *testing.T) {
	m := tinyModel(t)
	var mu sync.Mutex
	var sizes []int
	_, ts := start(t, Config{MaxBatch: 4, ConcurrentBatches: 2, BatchWait: 5 * time.Second}, &m, func(s *Server) {
		s.beforeBatch = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }
	})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r, b := post(t, context.Background(), ts.URL, featureRequest(t, fmt.Sprint("goal ", i)))
			wantPrediction(t, code(r), b)
		})
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{4}) {
		t.Errorf("batch sizes %v, want [4]: one batcher gathers while the other waits", sizes)
	}
}
