package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/models"
)

// Options read as the CLI's flags do: 0 is the default, NoHistory the one
// "none", any other negative value an error.
func TestOptionsConvention(t *testing.T) {
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o             Options
		window, limit int
		err           string
	}{
		{Options{}, b.Manifest.Prompt.HistoryWindow, b.Manifest.Prompt.MaxTargetTokens, ""},
		{Options{HistoryWindow: NoHistory, MaxNewTokens: 5}, 0, 5, ""},
		{Options{HistoryWindow: 3}, 3, b.Manifest.Prompt.MaxTargetTokens, ""},
		{Options{HistoryWindow: -2}, 0, 0, "history window -2"},
		{Options{MaxNewTokens: -1}, 0, 0, "max new tokens -1"},
		{Options{MaxNewTokens: MaxNewTokensLimit + 1}, 0, 0, "max new tokens"},
		{Options{Session: SessionOptions{IntraOpThreads: -1}}, 0, 0, "intra-op threads: -1"},
		{Options{PromptGroups: 1}, b.Manifest.Prompt.HistoryWindow, b.Manifest.Prompt.MaxTargetTokens, ""},
		{Options{PromptGroups: -1}, 0, 0, "prompt groups -1"},
		{Options{PromptGroups: 5}, 0, 0, "prompt groups 5"},
		{Options{DecodePriority: true}, 0, 0, "decode priority"},
		{Options{DecodePriority: true, CUDAGraph: true}, 0, 0, "decode priority"}, // the cpu provider
	} {
		p, err := NewPredictor(b, c.o)
		if c.err != "" {
			if err == nil {
				p.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: got %v, want an error with %q", c.o, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c.o, err)
		}
		if s := p.Settings(); s.HistoryWindow != c.window || s.MaxNewTokens != c.limit {
			t.Errorf("%+v: window %d, limit %d; want %d, %d", c.o, s.HistoryWindow, s.MaxNewTokens, c.window, c.limit)
		}
		p.Close()
	}
}
