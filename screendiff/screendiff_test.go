package screendiff

import (
	"image"
	"image/color"
	"testing"
)

func solid(w, h int, c color.RGBA) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	return img
}

func paint(img *image.RGBA, r image.Rectangle, c color.RGBA) *image.RGBA {
	out := image.NewRGBA(img.Rect)
	copy(out.Pix, img.Pix)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			out.SetRGBA(x, y, c)
		}
	}
	return out
}

func TestCompare(t *testing.T) {
	gray := color.RGBA{120, 120, 120, 255}
	base := solid(1080, 2400, gray)
	f := NewFrame(base)
	cases := []struct {
		name    string
		img     image.Image
		changed bool
	}{
		{"same", solid(1080, 2400, gray), false},
		{"status bar clock", paint(base, image.Rect(900, 0, 1080, 80), color.RGBA{255, 255, 255, 255}), false},
		{"compression noise", solid(1080, 2400, color.RGBA{130, 112, 120, 255}), false},
		{"blinking cursor", paint(base, image.Rect(500, 1000, 503, 1060), color.RGBA{0, 0, 0, 255}), false},
		{"one typed character", paint(base, image.Rect(500, 1000, 530, 1045), color.RGBA{0, 0, 0, 255}), true},
		{"new page", solid(1080, 2400, color.RGBA{250, 250, 250, 255}), true},
		{"rotated", solid(2400, 1080, gray), true},
	}
	for _, c := range cases {
		if got := Compare(f, NewFrame(c.img), Options{}).Changed; got != c.changed {
			t.Errorf("%s: changed = %v", c.name, got)
		}
	}
}

func TestBlackAndEffect(t *testing.T) {
	black := NewFrame(solid(100, 200, color.RGBA{3, 3, 3, 255}))
	gray := NewFrame(solid(100, 200, color.RGBA{120, 120, 120, 255}))
	if !black.Black() || gray.Black() {
		t.Fatal("black frames")
	}
	if e := Effect(gray, black, Options{}); e != EffectUnknown {
		t.Errorf("black after: %s", e)
	}
	if e := Effect(nil, gray, Options{}); e != EffectUnknown {
		t.Errorf("no before: %s", e)
	}
	if e := Effect(gray, gray, Options{}); e != EffectNone {
		t.Errorf("same: %s", e)
	}
	var c Counts
	for _, e := range []string{EffectChanged, EffectNone, EffectNone, EffectUnknown, ""} {
		c.Add(e)
	}
	if c != (Counts{Changed: 1, None: 2, Unknown: 1}) {
		t.Errorf("counts %+v", c)
	}
}
