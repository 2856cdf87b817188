package score

import (
	"fmt"
	"strings"

	"github.com/autoui/autoui/aitw/runinfo"
)

// About says what a report scores, so that a published number can be traced
// to the model, options and data that produced it.
type About struct {
	Date        string   `json:"date"`
	Gold        []string `json:"gold"`
	Split       string   `json:"split,omitempty"`
	Predictions []string `json:"predictions"`
	// Run is the predictions' provenance (their run.json; merged shards
	// agree on everything but the shard, so one stands for all); nil when
	// the predictions came without one.
	Run *runinfo.Info `json:"run,omitempty"`
	// Notes are what reading the predictions found: an unfinished run, a
	// shard not given, a torn last line, repeated steps.
	Notes []string `json:"notes,omitempty"`
}

// Describe gives the report's provenance as lines of text, for the text
// table and the HTML report.
func (r *Report) Describe() []string {
	proto := "protocol: " + string(r.Protocol)
	if r.ScrollMap != "" {
		proto += " (gold swipes rewritten with the " + r.ScrollMap + " scroll map)"
	}
	lines := []string{proto}
	if len(r.PaperDifferences) > 0 {
		lines = append(lines, "not Auto-GUI's main.py setup, so not the paper's number: "+strings.Join(r.PaperDifferences, "; "))
	}
	a := r.About
	if a == nil {
		return lines
	}
	if run := a.Run; run != nil {
		o := run.Options
		opts := "options: "
		if o.Preset != "" {
			opts += "preset " + o.Preset + ", "
		}
		opts += fmt.Sprintf("history %s, history window %d, truncation %s, max new tokens %d, decoding %s, constrained %v, provider %s, graph opt %s, batch %d",
			o.History, o.HistoryWindow, o.Truncation, o.MaxNewTokens, o.Decoding, o.Constrained, o.Provider, o.GraphOpt, o.Batch)
		if o.ScrollMap != "" {
			opts += ", scroll map " + o.ScrollMap
		}
		lines = append(lines,
			fmt.Sprintf("model: %s (manifest sha256 %s), autoui %s", run.Model.Name, run.Model.ManifestSHA256, run.Version), opts)
	} else {
		lines = append(lines, "model: unknown (the predictions have no run.json)")
	}
	gold := "gold: " + strings.Join(a.Gold, ", ")
	if a.Split != "" {
		gold += "; split " + a.Split
	}
	lines = append(lines, gold, "predictions: "+strings.Join(a.Predictions, ", "), "date: "+a.Date)
	for _, n := range a.Notes {
		lines = append(lines, "note: "+n)
	}
	return lines
}
