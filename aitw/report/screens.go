package report

import (
	"fmt"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/score"
	"github.com/autoui/autoui/engine/preprocess"
)

// Screens re-reads the gold files for just the sampled episodes, keeping
// their pixels, and pairs each sampled step with its screenshot and goal.
// Steps whose gold has no pixels (pickles) get a nil Image.
func Screens(files []string, ro aitw.ReadOptions, right, wrong []score.StepResult) ([]Screen, []Screen, error) {
	want := map[aitw.StepKey]bool{}
	eps := map[string]bool{}
	for _, r := range append(append([]score.StepResult(nil), right...), wrong...) {
		want[aitw.StepKey{EpisodeID: r.EpisodeID, StepID: r.StepID}] = true
		eps[r.EpisodeID] = true
	}
	type found struct {
		goal string
		step aitw.Step
	}
	got := map[aitw.StepKey]found{}
	ro.KeepPixels = true
	ro.Keep = func(id string) bool { return eps[id] }
	_, err := aitw.StreamEpisodes(files, ro, func(ep aitw.Episode) error {
		for _, s := range ep.Steps {
			k := aitw.StepKey{EpisodeID: ep.ID, StepID: s.StepID}
			if want[k] {
				got[k] = found{goal: ep.Goal, step: s}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("html report: %w", err)
	}
	conv := func(rs []score.StepResult) ([]Screen, error) {
		var out []Screen
		for _, r := range rs {
			f := got[aitw.StepKey{EpisodeID: r.EpisodeID, StepID: r.StepID}]
			sc := Screen{Result: r, Goal: f.goal}
			if f.step.Pixels != nil {
				img, err := preprocess.FromRaw(f.step.Pixels, f.step.Height, f.step.Width, f.step.Channels)
				if err != nil {
					return nil, fmt.Errorf("html report: %s: %w", f.step.Source, err)
				}
				sc.Image = img
			}
			out = append(out, sc)
		}
		return out, nil
	}
	rs, err := conv(right)
	if err != nil {
		return nil, nil, err
	}
	ws, err := conv(wrong)
	return rs, ws, err
}
