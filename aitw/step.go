package aitw

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/autoui/autoui/action"
)

// Subsets are the five AITW datasets, in the order reports list them.
var Subsets = []string{"general", "install", "google_apps", "single", "web_shopping"}

// ValidSubset reports whether s is one of Subsets.
func ValidSubset(s string) bool {
	for _, n := range Subsets {
		if n == s {
			return true
		}
	}
	return false
}

// SubsetFromPath guesses the subset from a file path: the last path element
// (directory or file name) that starts with a subset name, so
// ".../android-in-the-wild/general/x.tfrecord.gz" and
// "dataset/blip/general_blip_test.obj" both give "general". "" if none.
func SubsetFromPath(path string) string {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(path)), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		p := strings.ToLower(parts[i])
		best := ""
		for _, s := range Subsets {
			if strings.HasPrefix(p, s) && len(s) > len(best) {
				best = s
			}
		}
		if best != "" {
			return best
		}
	}
	return ""
}

// DatasetFile, in a directory above record files, describes the dataset
// they belong to; its "subset" field (as `autoui dataset` writes it) names
// their AITW subset when their path does not.
const DatasetFile = "dataset.json"

// SubsetOf is the subset of a data file: from its path (SubsetFromPath),
// else from the nearest DatasetFile in its directory or one above it. ""
// if neither says.
func SubsetOf(path string) string {
	if s := SubsetFromPath(path); s != "" {
		return s
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, DatasetFile)); err == nil {
			var d struct {
				Subset string `json:"subset"`
			}
			if json.Unmarshal(b, &d) == nil && ValidSubset(d.Subset) {
				return d.Subset
			}
			return ""
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// Step is one AITW example: the screen, the goal and the gold action.
type Step struct {
	EpisodeID     string
	StepID        int
	EpisodeLength int // 0 when the source does not say (Auto-UI pickles)
	Goal          string
	Subset        string

	// Raw screenshot: Height x Width x Channels uint8, row-major. Nil when
	// the source holds features instead, or when pixels were not kept.
	Height, Width, Channels int
	Pixels                  []byte
	// Features are precomputed vision features (Auto-UI pickles).
	Features []float32

	Boxes   []action.Box
	UIText  []string
	UITypes []string

	Action action.Action

	DeviceType      string
	AndroidAPILevel int
	CurrentActivity string

	// Source locates the step for messages: "file@offset" or "file#index".
	Source string
}

// checkValues refuses what no recorder writes and the run cannot use: an
// episode id, goal or typed text that is not UTF-8 (the id would not
// survive predictions.jsonl, so a resumed run would predict its steps
// again), a gold point that is not a number in [0, 1] (or -1 for none),
// which would stop the run where the step is history.
func (s *Step) checkValues() error {
	for _, f := range []struct{ name, v string }{{"episode_id", s.EpisodeID}, {"goal", s.Goal}} { // the typed text: Validate's
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s %q is not UTF-8", f.name, f.v)
		}
	}
	if err := s.Action.Validate(); err != nil {
		return fmt.Errorf("gold action: %w", err)
	}
	return nil
}

// StepFromExample reads the AITW features of one tf.train.Example. Pixels
// alias ex's buffers; copy them if the record buffer is reused.
func StepFromExample(ex Example) (Step, error) {
	var s Step
	var err error
	get := func(f func() error) {
		if err == nil {
			err = f()
		}
	}
	var b []byte
	var n int64
	get(func() error { b, err = ex.bytes1("episode_id"); s.EpisodeID = string(b); return err })
	get(func() error { n, err = ex.int1("step_id"); s.StepID = int(n); return err })
	get(func() error { n, err = ex.int1("episode_length"); s.EpisodeLength = int(n); return err })
	get(func() error { b, err = ex.bytes1("goal_info"); s.Goal = string(b); return err })
	get(func() error { n, err = ex.int1("image/height"); s.Height = int(n); return err })
	get(func() error { n, err = ex.int1("image/width"); s.Width = int(n); return err })
	get(func() error { n, err = ex.int1("image/channels"); s.Channels = int(n); return err })
	get(func() error { s.Pixels, err = ex.bytes1("image/encoded"); return err })
	var t int64
	var touch, lift, pos []float32
	get(func() error { t, err = ex.int1("results/action_type"); return err })
	get(func() error { touch, err = ex.floats("results/yx_touch", 2); return err })
	get(func() error { lift, err = ex.floats("results/yx_lift", 2); return err })
	get(func() error { b, err = ex.bytes1("results/type_action"); return err })
	get(func() error { pos, err = ex.floats("image/ui_annotations_positions", -1); return err })
	get(func() error { s.UIText, err = ex.strings("image/ui_annotations_text"); return err })
	get(func() error { s.UITypes, err = ex.strings("image/ui_annotations_ui_types"); return err })
	if err != nil {
		return Step{}, err
	}
	if s.Height <= 0 || s.Width <= 0 || (s.Channels != 3 && s.Channels != 4 && s.Channels != 1) {
		return Step{}, fmt.Errorf("bad image shape %dx%dx%d", s.Height, s.Width, s.Channels)
	}
	if n, ok := elements([]int{s.Height, s.Width, s.Channels}, len(s.Pixels)); !ok || n != len(s.Pixels) {
		return Step{}, fmt.Errorf("image/encoded has %d bytes, want %dx%dx%d raw pixels",
			len(s.Pixels), s.Height, s.Width, s.Channels)
	}
	if len(pos)%4 != 0 {
		return Step{}, fmt.Errorf("image/ui_annotations_positions has %d values, not a multiple of 4", len(pos))
	}
	s.Boxes = boxesFromFlat(pos)
	typ := action.Type(t)
	if !typ.Valid() {
		return Step{}, fmt.Errorf("results/action_type %d is not an AITW action type", t)
	}
	s.Action = action.Action{
		Type:  typ,
		Touch: action.Point{Y: float64(touch[0]), X: float64(touch[1])},
		Lift:  action.Point{Y: float64(lift[0]), X: float64(lift[1])},
		Text:  string(b),
	}
	if err := s.checkValues(); err != nil {
		return Step{}, err
	}
	// Optional device metadata.
	if v, e := ex.bytes1("device_type"); e == nil {
		s.DeviceType = string(v)
	}
	if v, e := ex.bytes1("current_activity"); e == nil {
		s.CurrentActivity = string(v)
	}
	if v, e := ex.int1("android_api_level"); e == nil {
		s.AndroidAPILevel = int(v)
	}
	return s, nil
}

func boxesFromFlat(pos []float32) []action.Box {
	if len(pos) == 0 {
		return nil
	}
	boxes := make([]action.Box, len(pos)/4)
	for i := range boxes {
		boxes[i] = action.Box{Y: pos[4*i], X: pos[4*i+1], H: pos[4*i+2], W: pos[4*i+3]}
	}
	return boxes
}
