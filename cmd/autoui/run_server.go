package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/autoui/autoui/agent"
	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/serve/client"
)

// serverFlags choose a remote `autoui serve` instead of a local model.
type serverFlags struct {
	url       string
	tokenFile string
	wait      time.Duration
}

func addServerFlags(fs *flag.FlagSet) *serverFlags {
	s := &serverFlags{}
	fs.StringVar(&s.url, "server", "", "predict on this autoui serve (e.g. http://gpu-host:8080) instead of loading --model here")
	fs.StringVar(&s.tokenFile, "token-file", "", "with --server: the bearer token, read from this file")
	fs.DurationVar(&s.wait, "server-wait", 2*time.Minute, "with --server: how long one prediction may keep retrying while the server is unreachable, restarting or full")
	return s
}

// localOnly are the model flags that configure a model loaded here: a
// server was started with its own.
var localOnly = []string{"model", "threads", "spin", "provider", "ort-lib", "truncation", "history-window", "graph-opt", "decoding", "verify-positions", "max-draft", "align-positions", "prompt-groups", "tf32", "cuda-graph", "no-verify"}

// remotePredictor predicts on a server; the per-request settings a server
// takes (token limit, grammar) come from this command's flags.
type remotePredictor struct {
	c         *client.Client
	url       string // the base URL, for the trajectory's summary
	maxTokens int
	constrain bool
}

func (r remotePredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	res, err := r.c.Predict(ctx, r.settings(req))
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return res, nil
}

func (r remotePredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	reqs = slices.Clone(reqs)
	for i := range reqs {
		reqs[i] = r.settings(reqs[i])
	}
	res, err := r.c.PredictBatch(ctx, reqs)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return res, nil
}

// settings gives req this command's token limit and grammar.
func (r remotePredictor) settings(req predict.Request) predict.Request {
	if req.MaxNewTokens == 0 {
		req.MaxNewTokens = r.maxTokens
	}
	req.Constrained = req.Constrained || r.constrain
	return req
}

// validate refuses flag combinations before anything slow happens: with
// --server, model flags that only configure a local model.
func (s *serverFlags) validate(fs *flag.FlagSet, mf *modelFlags) error {
	if s.url == "" {
		if s.tokenFile != "" {
			return usageErrorf("--token-file needs --server")
		}
		if mf.model == "" {
			return usageErrorf("--model DIR or --server URL is required (the model to predict with)")
		}
		_, err := mf.options() // a bad model flag is refused before the device is reached
		return err
	}
	var conflict error
	fs.Visit(func(f *flag.Flag) {
		for _, n := range localOnly {
			if f.Name == n && conflict == nil {
				conflict = usageErrorf("--%s: the server holds the model and its settings; not with --server", n)
			}
		}
	})
	if conflict != nil {
		return conflict
	}
	if mf.maxTokens < 0 {
		return usageErrorf("--max-new-tokens %d: must be >= 0", mf.maxTokens)
	}
	if _, err := client.New(s.url, client.Options{}); err != nil {
		return usageErrorf("--server: %v", err)
	}
	return nil
}

// open returns the predictor `run` uses: the server's when --server is
// given, else the local model's (validate first).
func (s *serverFlags) open(mf *modelFlags) (predict.Predictor, func(), error) {
	if s.url == "" {
		p, closeP, err := mf.open()
		if err != nil {
			return nil, nil, err
		}
		return p, closeP, nil
	}
	token, err := readTokenFile(s.tokenFile)
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(s.url, client.Options{Token: token, MaxWait: s.wait})
	if err != nil {
		return nil, nil, err
	}
	return remotePredictor{c: c, url: s.url, maxTokens: mf.maxTokens, constrain: mf.constrain}, func() {}, nil
}

// predictorSource says what pred is, for summary.json: a bundle loaded here
// (its manifest's name and SHA-256, as eval's run.json) or a server (its URL
// without a password); nil for anything else (tests' fakes).
func predictorSource(pred predict.Predictor) *agent.Source {
	switch p := pred.(type) {
	case *engine.Predictor:
		m, _, err := runinfo.ModelOf(p.Bundle().Dir)
		if err != nil {
			return &agent.Source{Name: p.Bundle().Manifest.Name, Dir: p.Bundle().Dir}
		}
		return &agent.Source{Name: m.Name, Dir: m.Dir, ManifestSHA256: m.ManifestSHA256}
	case remotePredictor:
		if u, err := url.Parse(p.url); err == nil {
			return &agent.Source{Server: u.Redacted()}
		}
		return &agent.Source{Server: p.url}
	}
	return nil
}
