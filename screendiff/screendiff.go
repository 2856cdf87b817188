// Package screendiff compares screenshots the way an agent needs to: with
// the status bar masked (its clock and notification icons change on their
// own), a per-pixel tolerance (compression and dithering noise) and a
// threshold on how much of the screen must differ, so a blinking cursor is
// not a change but a typed character is. It also recognizes black frames
// (screen off, or a FLAG_SECURE window that screencap returns as black).
package screendiff

import (
	"image"
	"image/draw"
)

// Options tune the comparison; the zero value means the defaults.
type Options struct {
	// StatusBar is the fraction of the height masked at the top; 0 means
	// 0.04 (Android's 24-32 dp status bar on a 700-900 dp tall screen).
	StatusBar float64
	// PixelTolerance is the largest per-channel difference (0-255) still
	// counted as the same pixel; 0 means 24.
	PixelTolerance int
	// ChangedFraction is the fraction of unmasked pixels that must differ
	// for two screens to count as different; 0 means 0.0002 (about 500
	// pixels of a 1080x2400 screen: more than a blinking cursor, less than
	// one typed character).
	ChangedFraction float64
}

func (o Options) withDefaults() Options {
	if o.StatusBar <= 0 {
		o.StatusBar = 0.04
	}
	if o.PixelTolerance <= 0 {
		o.PixelTolerance = 24
	}
	if o.ChangedFraction <= 0 {
		o.ChangedFraction = 0.0002
	}
	return o
}

// Frame is a screenshot prepared for comparisons: RGBA pixels and whether
// it is black.
type Frame struct {
	img   *image.RGBA
	black bool
}

// blackLevel is the brightest channel value a black frame may have:
// secure windows capture as pure black, a screen that is off as near black.
const blackLevel = 16

// NewFrame prepares img (nil gives nil).
func NewFrame(img image.Image) *Frame {
	if img == nil {
		return nil
	}
	rgba, ok := img.(*image.RGBA)
	if !ok {
		b := img.Bounds()
		rgba = image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(rgba, rgba.Rect, img, b.Min, draw.Src)
	}
	return &Frame{img: rgba, black: isBlack(rgba)}
}

// Black reports whether every pixel is (near) black.
func (f *Frame) Black() bool { return f != nil && f.black }

func isBlack(img *image.RGBA) bool {
	for i := 0; i < len(img.Pix); i += 4 {
		p := img.Pix[i : i+3 : i+3]
		if p[0] > blackLevel || p[1] > blackLevel || p[2] > blackLevel {
			return false
		}
	}
	return true
}

// Diff is the outcome of comparing two frames.
type Diff struct {
	// Differing is the number of unmasked pixels that differ beyond the
	// tolerance; Compared the number of unmasked pixels (0 when the sizes
	// differ, e.g. after a rotation).
	Differing, Compared int
	// Changed is the verdict: the sizes differ or enough pixels do.
	Changed bool
}

// Compare compares two frames outside the status bar.
func Compare(a, b *Frame, o Options) Diff {
	o = o.withDefaults()
	ra, rb := a.img.Rect, b.img.Rect
	if ra.Dx() != rb.Dx() || ra.Dy() != rb.Dy() {
		return Diff{Changed: true}
	}
	w, h := ra.Dx(), ra.Dy()
	top := int(o.StatusBar*float64(h) + 0.5)
	d := Diff{Compared: w * (h - top)}
	tol := o.PixelTolerance
	for y := top; y < h; y++ {
		pa := a.img.Pix[y*a.img.Stride : y*a.img.Stride+4*w]
		pb := b.img.Pix[y*b.img.Stride : y*b.img.Stride+4*w]
		for i := 0; i < len(pa); i += 4 {
			if absDiff(pa[i], pb[i]) > tol || absDiff(pa[i+1], pb[i+1]) > tol || absDiff(pa[i+2], pb[i+2]) > tol {
				d.Differing++
			}
		}
	}
	d.Changed = float64(d.Differing) > o.ChangedFraction*float64(d.Compared)
	return d
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// Effect values: what an action visibly did to the screen.
const (
	EffectChanged = "changed" // the settled screen differs from the one the model saw
	EffectNone    = "none"    // it does not: the action did nothing visible
	EffectUnknown = "unknown" // cannot tell: a black frame, or no screen to compare
)

// Effect compares the screen before an action with the settled one after.
func Effect(before, after *Frame, o Options) string {
	if before == nil || after == nil || before.Black() || after.Black() {
		return EffectUnknown
	}
	if Compare(before, after, o).Changed {
		return EffectChanged
	}
	return EffectNone
}

// Policies for an action that had no visible effect (--on-no-effect).
const (
	OnNoEffectContinue = "continue" // record it and go on
	// OnNoEffectRetry sends the same action once more: the device may have
	// dropped the input. Re-predicting instead would not help, as the model
	// decodes greedily and would see the same screen and history.
	OnNoEffectRetry = "retry"
	OnNoEffectStop  = "stop" // end the episode (stop reason "no_effect")
)

// ValidOnNoEffect reports whether s is one of the policies ("" counts as
// continue).
func ValidOnNoEffect(s string) bool {
	switch s {
	case "", OnNoEffectContinue, OnNoEffectRetry, OnNoEffectStop:
		return true
	}
	return false
}

// Counts tallies effects over an episode.
type Counts struct {
	Changed int `json:"changed"`
	None    int `json:"none"`
	Unknown int `json:"unknown"`
	// Retried counts actions sent a second time by the retry policy.
	Retried int `json:"retried"`
}

// Add counts one effect.
func (c *Counts) Add(effect string) {
	switch effect {
	case EffectChanged:
		c.Changed++
	case EffectNone:
		c.None++
	case EffectUnknown:
		c.Unknown++
	}
}
