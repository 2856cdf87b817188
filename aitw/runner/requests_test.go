package runner

import (
	"strings"
	"testing"

	"github.com/autoui/autoui/aitw"
)

// A batch's screens are decoded in parallel: each request gets its own
// screen, given features are left alone, and a bad screen fails with its step.
func TestRequestsDecodeEveryScreen(t *testing.T) {
	var jobs []job
	for i := 0; i < 9; i++ {
		s := aitw.Step{StepID: i, Height: 2, Width: 3, Channels: 3, Pixels: make([]byte, 18)}
		s.Pixels[0] = byte(i)
		j := job{episode: aitw.Episode{ID: "e"}, step: s}
		if i == 4 {
			j.req.Features = []float32{1}
		}
		jobs = append(jobs, j)
	}
	reqs, err := requests(jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if i == 4 {
			if r.Screen != nil || len(r.Features) != 1 {
				t.Fatalf("request 4 (features given): %+v", r)
			}
			continue
		}
		if r.Screen == nil || r.Screen.Bounds().Dx() != 3 {
			t.Fatalf("request %d: no 3x2 screen", i)
		}
		if rr, _, _, _ := r.Screen.At(0, 0).RGBA(); rr>>8 != uint32(i) {
			t.Fatalf("request %d got the screen of step %d", i, rr>>8)
		}
	}
	jobs[6].step.Pixels = jobs[6].step.Pixels[:5]
	jobs[8].step.Pixels = nil
	if _, err := requests(jobs); err == nil || !strings.Contains(err.Error(), "step 6") {
		t.Fatalf("bad screen: %v", err)
	}
}
