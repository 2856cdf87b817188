package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/predict"
)

// docBlock is the fenced block after the marker comment in docs/serve.md.
func docBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	i := strings.Index(doc, "<!-- "+marker+" -->")
	if i < 0 {
		t.Fatalf("docs/serve.md has no <!-- %s -->", marker)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```")
	if start < 0 {
		t.Fatalf("no block after <!-- %s -->", marker)
	}
	rest = rest[start+3:]
	rest = rest[strings.Index(rest, "\n")+1:]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		t.Fatalf("unclosed block after <!-- %s -->", marker)
	}
	return rest[:end+1]
}

func strict(t *testing.T, what, text string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s example: %v", what, err)
	}
	if dec.More() {
		t.Fatalf("%s example: more than one JSON value", what)
	}
}

// TestDocs checks docs/serve.md: the examples decode strictly into the wire
// types, the request example gets the response example's prediction from
// the server, and the OpenAPI paths are the server's.
func TestDocs(t *testing.T) {
	raw, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var req api.PredictRequest
	strict(t, "request", docBlock(t, doc, "example: predict-request"), &req)
	var want api.Prediction
	strict(t, "response", docBlock(t, doc, "example: predict-response"), &want)
	var eb api.ErrorBody
	strict(t, "error", docBlock(t, doc, "example: error"), &eb)
	if want.Serve == nil || eb.Kind != KindBadRequest {
		t.Errorf("examples: serve %+v, error %+v", want.Serve, eb)
	}

	// The request, sent, answers the documented prediction.
	m := tinyModel(t)
	_, ts := start(t, Config{}, &m)
	resp, body := post(t, context.Background(), ts.URL, []byte(docBlock(t, doc, "example: predict-request")))
	got := wantPrediction(t, resp.StatusCode, body)
	got.Serve, got.Timings, want.Serve, want.Timings = nil, predict.Timings{}, nil, predict.Timings{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the documented request now answers\n%+v\nnot the documented\n%+v", got, want)
	}
	resp, body = post(t, context.Background(), ts.URL, `{"goal": "g", "features": [0.5], "temperature": 0.7}`)
	var gotErr api.ErrorBody
	if json.Unmarshal(body, &gotErr) != nil || gotErr != eb || resp.StatusCode != 400 {
		t.Errorf("the documented error is now %d %s", resp.StatusCode, body)
	}

	// Every documented path is served (not the mux's 404), and every
	// served path is documented.
	spec := docBlock(t, doc, "openapi")
	var paths []string
	inPaths := false
	pathLine := regexp.MustCompile(`^  (/[^:\s]*):\s*$`)
	sc := bufio.NewScanner(strings.NewReader(spec))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "paths:":
			inPaths = true
		case inPaths && l != "" && !strings.HasPrefix(l, " "):
			inPaths = false
		case inPaths:
			if m := pathLine.FindStringSubmatch(l); m != nil {
				paths = append(paths, m[1])
			}
		}
	}
	if !reflect.DeepEqual(paths, Paths) {
		t.Errorf("OpenAPI paths %v, the server's %v", paths, Paths)
	}
	s := New(Config{})
	for _, p := range paths {
		_, pattern := s.mux.Handler(httptest.NewRequest(http.MethodGet, p, nil))
		if pattern != p {
			t.Errorf("documented path %s is not in the server's mux (matched %q)", p, pattern)
		}
	}
	if !bytes.Contains(raw, []byte("\n## Scaling\n")) {
		t.Error("docs/serve.md lost its Scaling section")
	}
}

// The Kubernetes example probes paths the server has, and runs `serve`.
func TestDocsKubernetes(t *testing.T) {
	raw, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	k8s := docBlock(t, string(raw), "example: kubernetes")
	paths := regexp.MustCompile(`path: (/\S+?)[,}]`).FindAllStringSubmatch(k8s, -1)
	if len(paths) != 2 {
		t.Fatalf("want a readiness and a liveness probe, found %v", paths)
	}
	for _, m := range paths {
		found := false
		for _, p := range Paths {
			found = found || p == m[1]
		}
		if !found {
			t.Errorf("probe path %s is not served (%v)", m[1], Paths)
		}
	}
	if !strings.Contains(k8s, "path: /readyz") || !strings.Contains(k8s, "args: [serve,") {
		t.Error("the Deployment must gate traffic on /readyz and run `autoui serve`")
	}
}
