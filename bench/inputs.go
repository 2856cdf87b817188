package bench

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/autoui/autoui/action"
)

// Case is one fixed benchmark input: a screenshot (encoded, so image decoding
// is measured too), a goal and the previous actions.
type Case struct {
	ID string `json:"id"`
	// Screen is the screenshot's file; empty for the built-in synthetic screen.
	Screen      string          `json:"screen"`
	ScreenBytes []byte          `json:"-"`
	Goal        string          `json:"goal"`
	History     []action.Action `json:"history"`
}

// The fixed goals and history. The histories of 0, 4 and 8 actions give
// prompts from ~20 to ~450 tokens, spanning what Auto-UI sees (it keeps 8).
var (
	goals = []string{
		"Open the settings app and turn on Wi-Fi",
		"Search for a coffee shop near me in Google Maps",
		"Add milk and eggs to my shopping list",
	}
	fullHistory = []action.Action{
		{Type: action.DualPoint, Touch: action.Point{Y: 0.8762, X: 0.2431}, Lift: action.Point{Y: 0.8762, X: 0.2431}},
		{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}},
		{Type: action.DualPoint, Touch: action.Point{Y: 0.1121, X: 0.5013}, Lift: action.Point{Y: 0.1121, X: 0.5013}},
		{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "coffee shop near me"},
		{Type: action.PressEnter, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.DualPoint, Touch: action.Point{Y: 0.3345, X: 0.4876}, Lift: action.Point{Y: 0.3345, X: 0.4876}},
		{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.DualPoint, Touch: action.Point{Y: 0.6402, X: 0.7218}, Lift: action.Point{Y: 0.6402, X: 0.7218}},
	}
	historyLengths = []int{0, 4, 8}
)

// DefaultCases returns the fixed inputs: one case per history length (0, 4
// and 8 actions), each with its own goal and a screenshot from screensDir
// (PNG/JPEG files, sorted, reused round-robin). When screensDir has none, a
// synthetic 1080x2400 phone screen is used so the benchmark runs anywhere.
func DefaultCases(screensDir string) ([]Case, error) {
	screens, err := listScreens(screensDir)
	if err != nil {
		return nil, err
	}
	type screen struct {
		path string
		data []byte
	}
	var loaded []screen
	for _, p := range screens {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read screen %s: %w", p, err)
		}
		loaded = append(loaded, screen{p, b})
	}
	if len(loaded) == 0 {
		b, err := SyntheticScreen()
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, screen{"", b})
	}
	cases := make([]Case, len(historyLengths))
	for i, n := range historyLengths {
		s := loaded[i%len(loaded)]
		cases[i] = Case{
			ID:          fmt.Sprintf("h%d", n),
			Screen:      s.path,
			ScreenBytes: s.data,
			Goal:        goals[i%len(goals)],
			History:     append([]action.Action(nil), fullHistory[:n]...),
		}
	}
	return cases, nil
}

func listScreens(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list screens in %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// SyntheticScreen draws a deterministic 1080x2400 phone-like screen (status
// bar, search box, icon grid, dock) and returns it PNG-encoded.
func SyntheticScreen() ([]byte, error) {
	synthOnce.Do(func() { synthPNG, synthErr = drawSyntheticScreen() })
	return append([]byte(nil), synthPNG...), synthErr
}

var (
	synthOnce sync.Once
	synthPNG  []byte
	synthErr  error
)

func drawSyntheticScreen() ([]byte, error) {
	const w, h = 1080, 2400
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	fill := func(x0, y0, x1, y1 int, c color.NRGBA) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				img.SetNRGBA(x, y, c)
			}
		}
	}
	for y := 0; y < h; y++ { // vertical wallpaper gradient
		c := color.NRGBA{R: uint8(30 + y*60/h), G: uint8(60 + y*90/h), B: uint8(120 + y*100/h), A: 255}
		fill(0, y, w, y+1, c)
	}
	fill(0, 0, w, 80, color.NRGBA{R: 20, G: 20, B: 20, A: 255})
	fill(60, 200, w-60, 330, color.NRGBA{R: 250, G: 250, B: 250, A: 255})
	for row := 0; row < 5; row++ {
		for col := 0; col < 4; col++ {
			x, y := 90+col*250, 500+row*300
			c := color.NRGBA{R: uint8(60 * col), G: uint8(200 - 35*row), B: uint8(40 * (row + col)), A: 255}
			fill(x, y, x+160, y+160, c)
		}
	}
	fill(0, h-260, w, h, color.NRGBA{R: 235, G: 235, B: 240, A: 220})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode synthetic screen: %w", err)
	}
	return buf.Bytes(), nil
}
