// Package score computes AITW action-matching metrics of predictions against
// gold episodes.
package score

import (
	"encoding/json"
	"io"
	"sort"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// Metrics are one subset's scores. Accuracies are percentages; an accuracy
// whose denominator is zero (e.g. no gold swipes) is null.
//
//   - screen_accuracy: steps whose prediction matches (action.Match) over all
//     steps, Auto-UI's headline number;
//   - episode_accuracy: the mean over episodes of each episode's screen
//     accuracy, as AITW's paper averages;
//   - action_type_accuracy: predicted type equals the gold type;
//   - click_accuracy / scroll_accuracy: match rate over gold taps / swipes;
//   - text_accuracy: aitw protocol: over gold TYPE steps, the prediction
//     matches and the texts contain one another, case-insensitive
//     (action.TextMatch); autoui protocol: the same test over all steps, as
//     Auto-GUI's main.py counts it.
//
// Steps without a prediction count as wrong everywhere and are counted in
// missing.
type Metrics struct {
	ScreenAccuracy     *float64 `json:"screen_accuracy"`
	EpisodeAccuracy    *float64 `json:"episode_accuracy"`
	ActionTypeAccuracy *float64 `json:"action_type_accuracy"`
	ClickAccuracy      *float64 `json:"click_accuracy"`
	ScrollAccuracy     *float64 `json:"scroll_accuracy"`
	TextAccuracy       *float64 `json:"text_accuracy"`
	Steps              int      `json:"steps"`
	Episodes           int      `json:"episodes"`
	Missing            int      `json:"missing"`
}

// Report is the --json output: overall is the mean of each metric over the
// subsets present (counts are summed).
type Report struct {
	// Protocol names the rules used; ScrollMap is the autoui protocol's
	// rewrite of gold swipes.
	Protocol  Protocol `json:"protocol"`
	ScrollMap string   `json:"scroll_map,omitempty"`
	// About says what was scored (set by the caller; nil: not known).
	About *About `json:"about,omitempty"`
	// PaperDifferences says how the run differs from Auto-GUI's main.py
	// (PaperDifferences; set by the caller under the autoui protocol).
	PaperDifferences []string           `json:"paper_differences,omitempty"`
	Overall          Metrics            `json:"overall"`
	Subsets          map[string]Metrics `json:"subsets"`
	// Unmatched counts predictions for steps not in the gold data (not in
	// the JSON: the shape is fixed).
	Unmatched int `json:"-"`
	// Confusion counts gold type -> predicted type over all steps (missing
	// predictions under the predicted type 0).
	Confusion map[action.Type]map[action.Type]int `json:"-"`
}

// GoldKind classifies a gold step for the per-kind accuracies.
type GoldKind int

// Gold step kinds.
const (
	KindOther GoldKind = iota
	KindTap
	KindSwipe
	KindType
)

// StepResult is one scored step.
type StepResult struct {
	EpisodeID string
	StepID    int
	Subset    string
	Kind      GoldKind
	Match     bool
	TypeMatch bool
	TextMatch bool
	Missing   bool
	Gold      action.Action
	Pred      action.Action
}

type counter struct {
	steps, episodes, missing int
	match, typeMatch         int
	taps, tapMatch           int
	swipes, swipeMatch       int
	textSteps, textMatch     int
	episodeAccSum            float64
}

// Score scores preds against the gold episodes under opts' rules. Results
// come in episode order (as given), steps in order.
func Score(eps []aitw.Episode, preds map[aitw.StepKey]aitw.Prediction, opts Options) (*Report, []StepResult) {
	rules := opts.rules()
	counts := map[string]*counter{}
	results := make([]StepResult, 0, len(eps)*8)
	used := 0
	conf := map[action.Type]map[action.Type]int{}
	for _, ep := range eps {
		c := counts[ep.Subset]
		if c == nil {
			c = &counter{}
			counts[ep.Subset] = c
		}
		if len(ep.Steps) == 0 {
			continue
		}
		c.episodes++
		epMatch := 0
		for _, s := range ep.Steps {
			r := StepResult{EpisodeID: ep.ID, StepID: s.StepID, Subset: ep.Subset, Gold: rules.gold(s.Action)}
			p, ok := preds[aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}]
			switch {
			case s.Action.Type == action.TypeText:
				r.Kind = KindType
			case action.IsTap(ftzAction(s.Action)):
				r.Kind = KindTap
			case s.Action.Type == action.DualPoint:
				r.Kind = KindSwipe
			}
			if ok {
				used++
				var judged bool
				r.Pred, judged = rules.pred(p)
				r.Match = judged && rules.match(r.Pred, r.Gold, s.Boxes)
				r.TypeMatch = r.Pred.Type == r.Gold.Type
				r.TextMatch = (r.Kind == KindType || rules.textOverAll) && r.Match && action.TextMatch(r.Pred.Text, r.Gold.Text)
			} else {
				r.Missing = true
				c.missing++
			}
			row := conf[s.Action.Type]
			if row == nil {
				row = map[action.Type]int{}
				conf[s.Action.Type] = row
			}
			row[r.Pred.Type]++
			c.steps++
			if r.Match {
				c.match++
				epMatch++
			}
			if r.TypeMatch {
				c.typeMatch++
			}
			switch r.Kind {
			case KindTap:
				c.taps++
				if r.Match {
					c.tapMatch++
				}
			case KindSwipe:
				c.swipes++
				if r.Match {
					c.swipeMatch++
				}
			}
			if r.Kind == KindType || rules.textOverAll {
				c.textSteps++
				if r.TextMatch {
					c.textMatch++
				}
			}
			results = append(results, r)
		}
		c.episodeAccSum += float64(epMatch) / float64(len(ep.Steps))
	}
	rep := &Report{Protocol: rules.protocol, Subsets: map[string]Metrics{}, Unmatched: len(preds) - used, Confusion: conf}
	if rules.protocol == AutoUI {
		rep.ScrollMap = opts.ScrollMap.String()
	}
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	sums := map[string]float64{}
	ns := map[string]int{}
	add := func(key string, v *float64) {
		if v != nil {
			sums[key] += *v
			ns[key]++
		}
	}
	for _, name := range names {
		c := counts[name]
		m := Metrics{
			ScreenAccuracy:     pct(c.match, c.steps),
			ActionTypeAccuracy: pct(c.typeMatch, c.steps),
			ClickAccuracy:      pct(c.tapMatch, c.taps),
			ScrollAccuracy:     pct(c.swipeMatch, c.swipes),
			TextAccuracy:       pct(c.textMatch, c.textSteps),
			Steps:              c.steps, Episodes: c.episodes, Missing: c.missing,
		}
		if c.episodes > 0 {
			v := 100 * c.episodeAccSum / float64(c.episodes)
			m.EpisodeAccuracy = &v
		}
		rep.Subsets[name] = m
		add("screen", m.ScreenAccuracy)
		add("episode", m.EpisodeAccuracy)
		add("type", m.ActionTypeAccuracy)
		add("click", m.ClickAccuracy)
		add("scroll", m.ScrollAccuracy)
		add("text", m.TextAccuracy)
		rep.Overall.Steps += c.steps
		rep.Overall.Episodes += c.episodes
		rep.Overall.Missing += c.missing
	}
	mean := func(key string) *float64 {
		if ns[key] == 0 {
			return nil
		}
		v := sums[key] / float64(ns[key])
		return &v
	}
	rep.Overall.ScreenAccuracy = mean("screen")
	rep.Overall.EpisodeAccuracy = mean("episode")
	rep.Overall.ActionTypeAccuracy = mean("type")
	rep.Overall.ClickAccuracy = mean("click")
	rep.Overall.ScrollAccuracy = mean("scroll")
	rep.Overall.TextAccuracy = mean("text")
	return rep, results
}

func pct(n, d int) *float64 {
	if d == 0 {
		return nil
	}
	v := 100 * float64(n) / float64(d)
	return &v
}

// WritePerStep writes one JSON line per step:
// {"episode_id", "step_id", "match", "type_match"}.
func WritePerStep(w io.Writer, results []StepResult) error {
	type line struct {
		EpisodeID string `json:"episode_id"`
		StepID    int    `json:"step_id"`
		Match     bool   `json:"match"`
		TypeMatch bool   `json:"type_match"`
	}
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(line{r.EpisodeID, r.StepID, r.Match, r.TypeMatch}); err != nil {
			return err
		}
	}
	return nil
}
