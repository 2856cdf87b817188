// Package annotate draws actions on screenshots for people to look at: a
// ring and dot where a tap lands, an arrow for a swipe, a banner naming the
// typed text or the key pressed. Compare draws a gold and a predicted action
// together in two colours with a legend.
//
// Sizes scale with the image, so a 224x224 thumbnail and a 1080x2400 screen
// both read well. Drawing never panics on odd inputs: tiny images, points
// outside the screen and any text are clipped or replaced.
package annotate

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/autoui/autoui/action"
)

// Colours of the markers: one action alone uses Single; Compare uses Gold
// and Pred.
var (
	Single = color.RGBA{255, 45, 85, 255}
	Gold   = color.RGBA{30, 200, 90, 255}
	Pred   = color.RGBA{255, 60, 200, 255}
)

var (
	white  = color.RGBA{255, 255, 255, 255}
	shadow = color.RGBA{0, 0, 0, 255}
)

// Action returns a copy of img (origin at 0,0) with a drawn on it.
func Action(img image.Image, a action.Action) *image.RGBA {
	c := newCanvas(img)
	c.action(a, Single, c.ringRadius())
	return c.dst
}

// Compare returns a copy of img (origin at 0,0) with the gold action and the
// predicted one drawn in two colours (the gold ring larger, so coinciding
// taps stay visible) and a "gold" / "pred" legend in the lower left corner.
func Compare(img image.Image, gold, pred action.Action) *image.RGBA {
	c := newCanvas(img)
	r := c.ringRadius()
	c.action(gold, Gold, r*1.35)
	c.action(pred, Pred, r)
	c.legend([]string{"gold", "pred"}, []color.RGBA{Gold, Pred})
	return c.dst
}

// canvas is the copy being drawn on, with the size unit everything scales by.
type canvas struct {
	dst     *image.RGBA
	w, h    int
	unit    float64 // about 1/300 of the shorter side, at least 1 pixel
	banners int     // banners drawn so far, stacked from the top
}

func newCanvas(img image.Image) *canvas {
	b := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Bounds(), img, b.Min, draw.Src)
	short := min(b.Dx(), b.Dy())
	return &canvas{dst: dst, w: b.Dx(), h: b.Dy(), unit: math.Max(1, float64(short)/300)}
}

func (c *canvas) ringRadius() float64 { return 14 * c.unit }

// action draws one action.
func (c *canvas) action(a action.Action, col color.RGBA, radius float64) {
	switch a.Type {
	case action.DualPoint:
		x1, y1 := c.pixel(a.Touch)
		if action.IsTap(a) {
			c.tap(x1, y1, radius, col)
			return
		}
		x2, y2 := c.pixel(a.Lift)
		c.arrow(x1, y1, x2, y2, col)
	case action.TypeText:
		c.banner("TYPE \""+a.Text+"\"", col)
	default:
		c.banner(a.Type.String(), col)
	}
}

// pixel is the centre of the pixel the normalized point falls on, clamped
// to the screen as the device would.
func (c *canvas) pixel(p action.Point) (float64, float64) {
	x, y := action.ToPixels(p, c.w, c.h)
	return float64(x) + 0.5, float64(y) + 0.5
}

// tap draws a dark-outlined ring with a dot in the middle.
func (c *canvas) tap(x, y, radius float64, col color.RGBA) {
	t := 2.4 * c.unit
	c.ring(x, y, radius, t+2*c.unit, shadow, 0.55)
	c.ring(x, y, radius, t, col, 1)
	c.disc(x, y, 2.6*c.unit+c.unit, shadow, 0.55)
	c.disc(x, y, 2.6*c.unit, col, 1)
}

// arrow draws a line from (x1, y1) to (x2, y2) with a head at the end and a
// dot at the start.
func (c *canvas) arrow(x1, y1, x2, y2 float64, col color.RGBA) {
	t := 2.4 * c.unit
	head := 12 * c.unit
	dx, dy := x2-x1, y2-y1
	l := math.Hypot(dx, dy)
	var hx1, hy1, hx2, hy2 float64
	if l > 0 {
		ux, uy := dx/l, dy/l
		// Two strokes at +-150 degrees from the direction.
		cos, sin := math.Cos(5*math.Pi/6), math.Sin(5*math.Pi/6)
		hx1, hy1 = x2+head*(ux*cos-uy*sin), y2+head*(ux*sin+uy*cos)
		hx2, hy2 = x2+head*(ux*cos+uy*sin), y2+head*(-ux*sin+uy*cos)
	}
	for _, pass := range []struct {
		width float64
		col   color.RGBA
		alpha float64
	}{{t + 2*c.unit, shadow, 0.55}, {t, col, 1}} {
		c.line(x1, y1, x2, y2, pass.width, pass.col, pass.alpha)
		if l > 0 {
			c.line(x2, y2, hx1, hy1, pass.width, pass.col, pass.alpha)
			c.line(x2, y2, hx2, hy2, pass.width, pass.col, pass.alpha)
		}
	}
	c.disc(x1, y1, 3*c.unit+c.unit, shadow, 0.55)
	c.disc(x1, y1, 3*c.unit, col, 1)
}

// blend mixes col over the pixel at (x, y) with coverage a in [0, 1].
func (c *canvas) blend(x, y int, col color.RGBA, a float64) {
	if a <= 0 || x < 0 || y < 0 || x >= c.w || y >= c.h {
		return
	}
	if a > 1 {
		a = 1
	}
	i := c.dst.PixOffset(x, y)
	p := c.dst.Pix[i : i+4 : i+4]
	p[0] = mix(p[0], col.R, a)
	p[1] = mix(p[1], col.G, a)
	p[2] = mix(p[2], col.B, a)
	p[3] = mix(p[3], 255, a)
}

func mix(dst, src uint8, a float64) uint8 {
	return uint8(math.Round(float64(dst)*(1-a) + float64(src)*a))
}

// coverage turns a signed distance outside a shape's edge into an
// antialiasing weight.
func coverage(outside float64) float64 { return math.Max(0, math.Min(1, 0.5-outside)) }

// span clips [lo, hi) to [0, n).
func span(lo, hi float64, n int) (int, int) {
	a := int(math.Floor(lo))
	b := int(math.Ceil(hi))
	return max(a, 0), min(b, n)
}

func (c *canvas) disc(cx, cy, r float64, col color.RGBA, alpha float64) {
	x0, x1 := span(cx-r-1, cx+r+1, c.w)
	y0, y1 := span(cy-r-1, cy+r+1, c.h)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			d := math.Hypot(float64(x)+0.5-cx, float64(y)+0.5-cy)
			c.blend(x, y, col, alpha*coverage(d-r))
		}
	}
}

func (c *canvas) ring(cx, cy, r, width float64, col color.RGBA, alpha float64) {
	outer := r + width/2
	x0, x1 := span(cx-outer-1, cx+outer+1, c.w)
	y0, y1 := span(cy-outer-1, cy+outer+1, c.h)
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			d := math.Hypot(float64(x)+0.5-cx, float64(y)+0.5-cy)
			c.blend(x, y, col, alpha*coverage(math.Abs(d-r)-width/2))
		}
	}
}

func (c *canvas) line(x1, y1, x2, y2, width float64, col color.RGBA, alpha float64) {
	hw := width / 2
	x0, xe := span(math.Min(x1, x2)-hw-1, math.Max(x1, x2)+hw+1, c.w)
	y0, ye := span(math.Min(y1, y2)-hw-1, math.Max(y1, y2)+hw+1, c.h)
	dx, dy := x2-x1, y2-y1
	l2 := dx*dx + dy*dy
	for y := y0; y < ye; y++ {
		for x := x0; x < xe; x++ {
			px, py := float64(x)+0.5, float64(y)+0.5
			t := 0.0
			if l2 > 0 {
				t = math.Max(0, math.Min(1, ((px-x1)*dx+(py-y1)*dy)/l2))
			}
			d := math.Hypot(px-(x1+t*dx), py-(y1+t*dy))
			c.blend(x, y, col, alpha*coverage(d-hw))
		}
	}
}

func (c *canvas) fillRect(r image.Rectangle, col color.RGBA, alpha float64) {
	r = r.Intersect(image.Rect(0, 0, c.w, c.h))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c.blend(x, y, col, alpha)
		}
	}
}

// Text is drawn with the 7x13 bitmap font, scaled up by a whole factor on
// large screens so it stays legible.
var face = basicfont.Face7x13

func (c *canvas) textScale() int { return max(1, int(math.Round(c.unit))) }

// cleanText keeps the text on one line; runes outside the font become the
// font's replacement glyph (basicfont maps them to U+FFFD itself).
func cleanText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f:
			return '\ufffd'
		}
		return r
	}, s)
}

// fitText cuts s to at most n runes, marking the cut with "...".
func fitText(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	if n <= 3 {
		return string(rs[:max(n, 0)])
	}
	return string(rs[:n-3]) + "..."
}

// banner draws a strip across the top of the screen, below any earlier
// banner, with a colour swatch and the text.
func (c *canvas) banner(text string, col color.RGBA) {
	s := c.textScale()
	pad := 3 * s
	lineH := face.Height*s + 2*pad
	swatch := face.Height * s
	maxRunes := (c.w - 3*pad - swatch) / (face.Advance * s)
	text = fitText(cleanText(text), maxRunes)
	top := c.banners * lineH
	c.banners++
	c.fillRect(image.Rect(0, top, c.w, top+lineH), shadow, 0.7)
	c.fillRect(image.Rect(pad, top+pad, pad+swatch, top+pad+swatch), col, 1)
	c.text(2*pad+swatch, top+pad, text, white)
}

// legend draws colour swatches with labels in the lower left corner.
func (c *canvas) legend(labels []string, cols []color.RGBA) {
	s := c.textScale()
	pad := 3 * s
	lineH := face.Height*s + pad
	longest := 0
	for _, l := range labels {
		longest = max(longest, len(l))
	}
	swatch := face.Height * s
	boxW := 3*pad + swatch + longest*face.Advance*s
	boxH := pad + len(labels)*lineH
	top := c.h - boxH - pad
	c.fillRect(image.Rect(pad, top, pad+boxW, top+boxH), shadow, 0.7)
	for i, l := range labels {
		y := top + pad + i*lineH
		c.fillRect(image.Rect(2*pad, y, 2*pad+swatch, y+swatch), cols[i], 1)
		c.text(3*pad+swatch, y, l, white)
	}
}

// text draws s with its top-left corner at (x, y), scaled by textScale.
func (c *canvas) text(x, y int, s string, col color.RGBA) {
	scale := c.textScale()
	n := len([]rune(s))
	if n == 0 {
		return
	}
	// Render at 1x into a mask, then blow it up pixel by pixel.
	mask := image.NewAlpha(image.Rect(0, 0, n*face.Advance, face.Height))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	for my := 0; my < face.Height; my++ {
		for mx := 0; mx < mask.Rect.Dx(); mx++ {
			a := mask.AlphaAt(mx, my).A
			if a == 0 {
				continue
			}
			for sy := 0; sy < scale; sy++ {
				for sx := 0; sx < scale; sx++ {
					c.blend(x+mx*scale+sx, y+my*scale+sy, col, float64(a)/255)
				}
			}
		}
	}
}
