package annotate

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/action"
)

func gray(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 128, 128, 128, 255
	}
	return img
}

func tap(y, x float64) action.Action {
	p := action.Point{Y: y, X: x}
	return action.Action{Type: action.DualPoint, Touch: p, Lift: p}
}

func swipe(y1, x1, y2, x2 float64) action.Action {
	return action.Action{Type: action.DualPoint, Touch: action.Point{Y: y1, X: x1}, Lift: action.Point{Y: y2, X: x2}}
}

func near(c color.RGBA, want color.RGBA, tol int) bool {
	d := func(a, b uint8) bool { v := int(a) - int(b); return v <= tol && v >= -tol }
	return d(c.R, want.R) && d(c.G, want.G) && d(c.B, want.B)
}

func TestTapMarksThePoint(t *testing.T) {
	for _, size := range [][2]int{{224, 224}, {1080, 2400}, {40, 30}} {
		w, h := size[0], size[1]
		src := gray(w, h)
		out := Action(src, tap(0.25, 0.75))
		if out.Bounds() != image.Rect(0, 0, w, h) {
			t.Fatalf("%dx%d: bounds %v", w, h, out.Bounds())
		}
		x, y := action.ToPixels(action.Point{Y: 0.25, X: 0.75}, w, h)
		if got := out.RGBAAt(x, y); !near(got, Single, 2) {
			t.Errorf("%dx%d: tap point (%d,%d) = %v, want marker colour %v", w, h, x, y, got, Single)
		}
		// The input is untouched and far pixels are unchanged.
		if got := src.NRGBAAt(x, y); got != (color.NRGBA{128, 128, 128, 255}) {
			t.Errorf("%dx%d: input modified: %v", w, h, got)
		}
		if got := out.RGBAAt(0, h-1); got != (color.RGBA{128, 128, 128, 255}) {
			t.Errorf("%dx%d: far corner changed to %v", w, h, got)
		}
	}
}

func TestSwipeDrawsArrow(t *testing.T) {
	out := Action(gray(300, 600), swipe(0.8, 0.5, 0.2, 0.5))
	// Midway along the arrow shaft is painted.
	if got := out.RGBAAt(150, 300); !near(got, Single, 2) {
		t.Errorf("shaft pixel = %v", got)
	}
	// The start dot too.
	x, y := action.ToPixels(action.Point{Y: 0.8, X: 0.5}, 300, 600)
	if got := out.RGBAAt(x, y); !near(got, Single, 2) {
		t.Errorf("start pixel = %v", got)
	}
}

func TestBanners(t *testing.T) {
	for _, a := range []action.Action{
		{Type: action.TypeText, Text: "hello world", Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.TypeText, Text: "ünïcødé 日本語 \x00\n🙂 and a very long text that will not fit on the banner at all, not at all", Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.PressHome},
		{Type: action.PressEnter},
		{Type: action.StatusTaskComplete},
		{Type: action.StatusTaskImpossible},
		{Type: action.Type(42)},
	} {
		out := Action(gray(224, 224), a)
		// The banner darkens the top rows; its swatch has the marker colour.
		if got := out.RGBAAt(223, 1); got.R >= 128 {
			t.Errorf("%v: top row not darkened: %v", a.Type, got)
		}
		if got := out.RGBAAt(6, 6); !near(got, Single, 2) {
			t.Errorf("%v: swatch = %v", a.Type, got)
		}
		if got := out.RGBAAt(112, 200); got != (color.RGBA{128, 128, 128, 255}) {
			t.Errorf("%v: screen body changed: %v", a.Type, got)
		}
	}
}

func TestCompare(t *testing.T) {
	w, h := 540, 1200
	gold, pred := tap(0.3, 0.3), tap(0.6, 0.7)
	out := Compare(gray(w, h), gold, pred)
	gx, gy := action.ToPixels(gold.Touch, w, h)
	px, py := action.ToPixels(pred.Touch, w, h)
	if got := out.RGBAAt(gx, gy); !near(got, Gold, 2) {
		t.Errorf("gold tap = %v", got)
	}
	if got := out.RGBAAt(px, py); !near(got, Pred, 2) {
		t.Errorf("pred tap = %v", got)
	}
	// Legend in the lower left corner: a dark box holding both swatches.
	found := map[color.RGBA]bool{}
	for y := h - 100; y < h; y++ {
		for x := 0; x < 100; x++ {
			c := out.RGBAAt(x, y)
			if near(c, Gold, 0) {
				found[Gold] = true
			}
			if near(c, Pred, 0) {
				found[Pred] = true
			}
		}
	}
	if !found[Gold] || !found[Pred] {
		t.Errorf("legend swatches found: %v", found)
	}
	// Same point: both colours still visible (gold ring is larger).
	out = Compare(gray(w, h), gold, gold)
	if got := out.RGBAAt(gx, gy); !near(got, Pred, 2) {
		t.Errorf("coinciding taps: centre = %v, want pred", got)
	}
	// Text gold vs swipe pred: banner plus arrow, no panic.
	_ = Compare(gray(w, h), action.Action{Type: action.TypeText, Text: "abc"}, swipe(0.2, 0.5, 0.8, 0.5))
}

func TestNoPanics(t *testing.T) {
	odd := []action.Action{
		tap(-3, 7), tap(2, -1), swipe(-1, -1, 5, 5), swipe(0.5, 0.5, 0.5, 0.5000001),
		{Type: action.DualPoint, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.TypeText, Text: "x"}, {Type: action.PressHome},
	}
	sizes := [][2]int{{1, 1}, {1, 50}, {50, 1}, {3, 2}, {17, 9}}
	for _, s := range sizes {
		for _, a := range odd {
			out := Action(gray(s[0], s[1]), a)
			if out.Bounds().Dx() != s[0] || out.Bounds().Dy() != s[1] {
				t.Fatalf("size %v -> %v", s, out.Bounds())
			}
			_ = Compare(gray(s[0], s[1]), a, odd[0])
		}
	}
	// Empty image and an image with an offset origin.
	_ = Action(image.NewRGBA(image.Rect(0, 0, 0, 0)), tap(0.5, 0.5))
	sub := gray(100, 100).SubImage(image.Rect(20, 30, 70, 90))
	if out := Action(sub, tap(0.5, 0.5)); out.Bounds() != image.Rect(0, 0, 50, 60) {
		t.Fatalf("sub-image bounds %v", out.Bounds())
	}
}

// TestWriteSamples writes example PNGs for eyeballing when
// ANNOTATE_SAMPLES=dir is set.
func TestWriteSamples(t *testing.T) {
	dir := os.Getenv("ANNOTATE_SAMPLES")
	if dir == "" {
		t.Skip("set ANNOTATE_SAMPLES=dir to write sample images")
	}
	save := func(name string, img image.Image) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
	}
	save("tap.png", Action(gray(1080, 2400), tap(0.3, 0.4)))
	save("swipe.png", Action(gray(1080, 2400), swipe(0.8, 0.5, 0.2, 0.5)))
	save("type.png", Action(gray(1080, 2400), action.Action{Type: action.TypeText, Text: "coffee near me ☕"}))
	save("compare.png", Compare(gray(1080, 2400), tap(0.3, 0.4), swipe(0.2, 0.5, 0.8, 0.5)))
	save("compare_small.png", Compare(gray(224, 224), tap(0.3, 0.4), action.Action{Type: action.PressBack}))
}
