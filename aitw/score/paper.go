package score

import (
	"fmt"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/runinfo"
)

// PaperDifferences lists how a run made its predictions differently from
// Auto-GUI's main.py, whose number the autoui protocol reproduces: each
// option `eval run --preset autoui` sets, the scroll map the gold is scored
// with against the one the prompts were written with (main.py uses one for
// both), and where the screens came from (main.py reads Auto-UI's feature
// pickles: fp16 BLIP-2 features, already split). Empty for main.py's setup.
func PaperDifferences(run *runinfo.Info, scoring action.ScrollMap) []string {
	p, o := runinfo.AutoUIPreset, run.Options
	var d []string
	differ := func(what string, got, want any) {
		if got != want {
			d = append(d, fmt.Sprintf("%s %v (main.py: %v)", what, got, want))
		}
	}
	differ("history", o.History, p.History)
	differ("history window", o.HistoryWindow, p.HistoryWindow)
	differ("truncation", o.Truncation, p.Truncation)
	differ("max new tokens", o.MaxNewTokens, p.MaxNewTokens)
	differ("constrained", o.Constrained, p.Constrained)
	if o.ScrollMap != "" && o.ScrollMap != scoring.String() {
		d = append(d, fmt.Sprintf("gold scored with the %s scroll map, prompts written with the %s one", scoring, o.ScrollMap))
	}
	for _, f := range run.Data.Files {
		if !aitw.IsPickle(f.Path) {
			d = append(d, "screens from records, not Auto-UI's feature pickles (main.py: their fp16 BLIP-2 features and split)")
			break
		}
	}
	return d
}
