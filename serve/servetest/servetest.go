// Package servetest starts an autoui server on a bundle for the tests of
// its clients and stops it when the test ends. Like phonetest, it is the
// only part that imports testing.
package servetest

import (
	"context"
	"testing"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/serve"
)

// Start loads the bundle in dir and serves it as model name ("" for the
// server's default); when the test ends the server drains and the
// predictor closes (both may be stopped earlier: they stop once).
func Start(tb testing.TB, dir, name string) (*engine.Predictor, *serve.Server) {
	tb.Helper()
	b, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := engine.NewPredictor(b, engine.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s := serve.New(serve.Config{})
	s.SetModel(serve.ModelOf(p, name))
	tb.Cleanup(func() {
		s.Shutdown(context.Background())
		p.Close()
	})
	return p, s
}
