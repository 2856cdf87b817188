package sim

import (
	"image"
	"image/color"
	"math"

	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// canvas draws flat, unantialiased shapes in dp coordinates onto a
// paletted image scaled by s pixels per dp. Without antialiasing a screen has
// a few dozen colours, so a paletted PNG holds it exactly, encodes ~10x
// faster than RGBA and compresses well; palette indexes are assigned in
// drawing order, so equal states give equal bytes.
type canvas struct {
	img  *image.Paletted
	s    float64
	clip image.Rectangle // pixels
	idx  map[color.RGBA]uint8
}

func newCanvas(w, h int, s float64) *canvas {
	return &canvas{img: image.NewPaletted(image.Rect(0, 0, w, h), nil), s: s, idx: map[color.RGBA]uint8{}}
}

func (c *canvas) index(col color.RGBA) uint8 {
	if i, ok := c.idx[col]; ok {
		return i
	}
	if len(c.img.Palette) == 256 {
		panic("sim: more than 256 colours on one screen")
	}
	i := uint8(len(c.img.Palette))
	c.img.Palette = append(c.img.Palette, col)
	c.idx[col] = i
	return i
}

func (c *canvas) px(v float64) int { return int(math.Floor(v*c.s + 0.5)) }

func (c *canvas) rectPx(r rectF) image.Rectangle {
	return image.Rect(c.px(r.x), c.px(r.y), c.px(r.x+r.w), c.px(r.y+r.h))
}

// fillPx fills a pixel rectangle, clipped.
func (c *canvas) fillPx(r image.Rectangle, col color.RGBA) {
	r = r.Intersect(c.clip)
	if r.Empty() {
		return
	}
	v := c.index(col)
	pix, stride := c.img.Pix, c.img.Stride
	row := r.Min.Y*stride + r.Min.X
	w := r.Dx()
	first := pix[row : row+w]
	for i := range first {
		first[i] = v
	}
	for y := r.Min.Y + 1; y < r.Max.Y; y++ {
		o := y*stride + r.Min.X
		copy(pix[o:o+w], first)
	}
}

func (c *canvas) fill(r rectF, col color.RGBA) { c.fillPx(c.rectPx(r), col) }

// round fills a rectangle with rounded corners of radius rad (dp).
func (c *canvas) round(r rectF, rad float64, col color.RGBA) {
	p := c.rectPx(r)
	rp := rad * c.s
	if m := math.Min(float64(p.Dx()), float64(p.Dy())) / 2; rp > m {
		rp = m
	}
	for y := p.Min.Y; y < p.Max.Y; y++ {
		fy := float64(y) + 0.5
		inset := 0.0
		if d := float64(p.Min.Y) + rp - fy; d > 0 {
			inset = rp - math.Sqrt(math.Max(0, rp*rp-d*d))
		} else if d := fy - (float64(p.Max.Y) - rp); d > 0 {
			inset = rp - math.Sqrt(math.Max(0, rp*rp-d*d))
		}
		in := int(math.Floor(inset + 0.5))
		c.fillPx(image.Rect(p.Min.X+in, y, p.Max.X-in, y+1), col)
	}
}

// disc fills the ring between radii rin and rout (dp) around (cx, cy); rin 0 is a disc.
func (c *canvas) disc(cx, cy, rout, rin float64, col color.RGBA) {
	X, Y, ro, ri := cx*c.s, cy*c.s, rout*c.s, rin*c.s
	for y := int(math.Floor(Y - ro)); y <= int(math.Ceil(Y+ro)); y++ {
		dy := float64(y) + 0.5 - Y
		if dy*dy > ro*ro {
			continue
		}
		ho := math.Sqrt(ro*ro - dy*dy)
		x0, x1 := int(math.Floor(X-ho+0.5)), int(math.Floor(X+ho+0.5))
		if dy*dy < ri*ri {
			hi := math.Sqrt(ri*ri - dy*dy)
			c.fillPx(image.Rect(x0, y, int(math.Floor(X-hi+0.5)), y+1), col)
			c.fillPx(image.Rect(int(math.Floor(X+hi+0.5)), y, x1, y+1), col)
			continue
		}
		c.fillPx(image.Rect(x0, y, x1, y+1), col)
	}
}

// poly fills a convex polygon given in dp.
func (c *canvas) poly(col color.RGBA, pts ...float64) {
	n := len(pts) / 2
	minY, maxY := math.Inf(1), math.Inf(-1)
	for i := 0; i < n; i++ {
		minY, maxY = math.Min(minY, pts[2*i+1]*c.s), math.Max(maxY, pts[2*i+1]*c.s)
	}
	for y := int(math.Floor(minY)); y < int(math.Ceil(maxY)); y++ {
		fy := float64(y) + 0.5
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := 0; i < n; i++ {
			x1, y1 := pts[2*i]*c.s, pts[2*i+1]*c.s
			x2, y2 := pts[2*((i+1)%n)]*c.s, pts[2*((i+1)%n)+1]*c.s
			if (fy < y1) == (fy < y2) {
				continue
			}
			x := x1 + (fy-y1)*(x2-x1)/(y2-y1)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		if lo < hi {
			c.fillPx(image.Rect(int(math.Floor(lo+0.5)), y, int(math.Floor(hi+0.5)), y+1), col)
		}
	}
}

// line draws a thick segment (dp) as a quadrilateral.
func (c *canvas) line(x1, y1, x2, y2, thick float64, col color.RGBA) {
	dx, dy := x2-x1, y2-y1
	l := math.Hypot(dx, dy)
	if l == 0 {
		return
	}
	nx, ny := -dy/l*thick/2, dx/l*thick/2
	c.poly(col, x1+nx, y1+ny, x2+nx, y2+ny, x2-nx, y2-ny, x1-nx, y1-ny)
}

// Text uses the 7x13 X11 bitmap font scaled by size*s: glyph pixels become
// solid blocks, so text stays flat-coloured at any resolution.
const (
	glyphW = 7
	glyphH = 13
)

type glyph [glyphH][glyphW]bool

var glyphs = map[rune]*glyph{}

func init() {
	face := basicfont.Face7x13
	for r := rune(32); r < 256; r++ {
		dr, mask, mp, _, ok := face.Glyph(fixed.P(0, face.Ascent), r)
		if !ok {
			continue
		}
		g := new(glyph)
		for y := dr.Min.Y; y < dr.Max.Y; y++ {
			for x := dr.Min.X; x < dr.Max.X; x++ {
				if y < 0 || y >= glyphH || x < 0 || x >= glyphW {
					continue
				}
				_, _, _, a := mask.At(mp.X+x-dr.Min.X, mp.Y+y-dr.Min.Y).RGBA()
				g[y][x] = a > 0x7fff
			}
		}
		glyphs[r] = g
	}
}

func textWidth(s string, size float64) float64 { return float64(len([]rune(s))) * glyphW * size }

// text draws s with its top-left corner at (x, y) dp.
func (c *canvas) text(x, y float64, s string, size float64, col color.RGBA) {
	k := size * c.s
	ox, oy := x*c.s, y*c.s
	for i, r := range []rune(s) {
		g := glyphs[r]
		if g == nil {
			g = glyphs['?']
		}
		gx0 := ox + float64(i*glyphW)*k
		for gy := 0; gy < glyphH; gy++ {
			y0, y1 := int(math.Floor(oy+float64(gy)*k+0.5)), int(math.Floor(oy+float64(gy+1)*k+0.5))
			for gx := 0; gx < glyphW; gx++ {
				if !g[gy][gx] {
					continue
				}
				// Merge horizontal runs into one fill.
				end := gx
				for end+1 < glyphW && g[gy][end+1] {
					end++
				}
				x0, x1 := int(math.Floor(gx0+float64(gx)*k+0.5)), int(math.Floor(gx0+float64(end+1)*k+0.5))
				c.fillPx(image.Rect(x0, y0, x1, y1), col)
				gx = end
			}
		}
	}
}

// fit shortens s with "..." so that it is at most w dp wide at size.
func fit(s string, w, size float64) string {
	r := []rune(s)
	max := int(w / (glyphW * size))
	if len(r) <= max {
		return s
	}
	if max <= 3 {
		return string(r[:maxInt(max, 0)])
	}
	return string(r[:max-3]) + "..."
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
