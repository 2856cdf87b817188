// Package aitwtest writes AITW records for tests and benchmarks.
package aitwtest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
)

// WriteFullSize writes episodes x perEpisode full-size AITW steps to path
// (a gzip TFRecord file), the episodes named "ep<i>" for i from first, and
// returns the steps written. A screen is 1080x2400 RGB: a third bands of
// colour (flat UI), a third noise over a gradient (a photo), a third black,
// so that a record compresses to ~2.7 MB, like a screenshot with a photo.
func WriteFullSize(path string, first, episodes, perEpisode int) (int, error) {
	const w, h = 1080, 2400
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rw := aitw.NewRecordWriter(f, path)
	x := uint32(first + 1)
	for e := first; e < first+episodes; e++ {
		for s := range perEpisode {
			pix := make([]byte, w*h*3)
			for i := range pix[:len(pix)/3] {
				pix[i] = byte(i/(w*3*40)*37 + e + s)
			}
			for i := len(pix) / 3; i < 2*len(pix)/3; i++ {
				x = x*1664525 + 1013904223
				pix[i] = byte(int(pix[i-3]) + int(x>>29) - 4)
			}
			st := aitw.Step{EpisodeID: fmt.Sprint("ep", e), StepID: s, EpisodeLength: perEpisode, Goal: "open the clock",
				Height: h, Width: w, Channels: 3, Pixels: pix,
				Action: action.Action{Type: action.PressHome, Touch: action.NoPoint, Lift: action.NoPoint}}
			if err := rw.WriteExample(aitw.StepExample(st)); err != nil {
				return 0, err
			}
		}
	}
	if err := rw.Close(); err != nil {
		return 0, err
	}
	return episodes * perEpisode, f.Close()
}
