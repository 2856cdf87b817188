package sim

import (
	"image/color"

	"github.com/autoui/autoui/action"
)

// rectF is a rectangle in dp (density-independent pixels; the screen is 360
// dp wide whatever its resolution).
type rectF struct{ x, y, w, h float64 }

func (r rectF) contains(x, y float64) bool {
	return x >= r.x && x < r.x+r.w && y >= r.y && y < r.y+r.h
}

func (r rectF) intersect(o rectF) rectF {
	x0, y0 := maxF(r.x, o.x), maxF(r.y, o.y)
	x1, y1 := minF(r.x+r.w, o.x+o.w), minF(r.y+r.h, o.y+o.h)
	if x1 <= x0 || y1 <= y0 {
		return rectF{}
	}
	return rectF{x0, y0, x1 - x0, y1 - y0}
}

func (r rectF) empty() bool { return r.w <= 0 || r.h <= 0 }

func maxF(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func minF(a, b float64) float64 {
	if a < b {
		return a
	}
	return b
}

// Element is one annotated thing on screen, as AITW's ui_annotations hold
// them: a normalized box, its text and a UI type ("TEXT", "ICON_SETTINGS",
// ...). ID names what it is for scripted experts ("app:settings",
// "toggle:wifi", "item:contacts:3"); Partial marks an element cut by the
// edge of its scrolling viewport.
type Element struct {
	Box     action.Box
	Text    string
	Type    string
	ID      string
	Partial bool
}

// Center returns the normalized centre of the element's box.
func (e Element) Center() action.Point {
	return action.Point{Y: float64(e.Box.Y + e.Box.H/2), X: float64(e.Box.X + e.Box.W/2)}
}

// node is one drawn thing of a frame; it may be annotated and tappable.
type node struct {
	r    rectF
	clip rectF
	draw func(c *canvas)
	ann  *Element // Box filled when the frame is annotated
	tap  func()
}

func (n *node) onTap(f func()) *node { n.tap = f; return n }

func (n *node) annotate(typ, text, id string) *node {
	n.ann = &Element{Type: typ, Text: text, ID: id}
	return n
}

// ui builds one frame: the ordered nodes of the current screen.
type ui struct {
	p       *Phone
	w, h    float64 // screen size in dp
	clip    rectF
	th      theme
	nodes   []*node
	kb      rectF // the on-screen keyboard, when shown
	kbStart int   // index of its first node; nodes before it lie beneath
	// spinner is where a progress spinner turns (Options.Animate only).
	spinner    rectF
	spinnerCol color.RGBA
}

func (u *ui) add(r rectF, draw func(c *canvas)) *node {
	n := &node{r: r, clip: u.clip, draw: draw}
	u.nodes = append(u.nodes, n)
	return n
}

func (u *ui) rect(r rectF, col color.RGBA) *node {
	return u.add(r, func(c *canvas) { c.fill(r, col) })
}

func (u *ui) roundRect(r rectF, rad float64, col color.RGBA) *node {
	return u.add(r, func(c *canvas) { c.round(r, rad, col) })
}

// label draws text at (x, y) and returns its node (box = the text extent).
func (u *ui) label(x, y float64, s string, size float64, col color.RGBA) *node {
	r := rectF{x, y, textWidth(s, size), glyphH * size}
	return u.add(r, func(c *canvas) { c.text(x, y, s, size, col) })
}

// centered draws text centred horizontally on cx.
func (u *ui) centered(cx, y float64, s string, size float64, col color.RGBA) *node {
	return u.label(cx-textWidth(s, size)/2, y, s, size, col)
}

// hit is an invisible tap target.
func (u *ui) hit(r rectF, f func()) *node {
	return u.add(r, nil).onTap(f)
}

type theme struct {
	bg, surface, text, sub, primary, divider, nav, field, onPrimary color.RGBA
	dark                                                            bool
}

var (
	lightTheme = theme{bg: rgb(0xf7f7fa), surface: rgb(0xffffff), text: rgb(0x202124), sub: rgb(0x5f6368),
		primary: rgb(0x1a73e8), divider: rgb(0xe0e0e0), nav: rgb(0xf1f3f4), field: rgb(0xeceff1), onPrimary: rgb(0xffffff)}
	darkTheme = theme{bg: rgb(0x121212), surface: rgb(0x1e1e1e), text: rgb(0xe8eaed), sub: rgb(0x9aa0a6),
		primary: rgb(0x8ab4f8), divider: rgb(0x333333), nav: rgb(0x000000), field: rgb(0x2d2f31), onPrimary: rgb(0x202124), dark: true}
	white      = rgb(0xffffff)
	black      = rgb(0x000000)
	wallpapers = []color.RGBA{rgb(0x00695c), rgb(0x283593), rgb(0x4527a0), rgb(0x37474f), rgb(0x4e342e), rgb(0x2e7d32), rgb(0x00838f), rgb(0x6a1b9a)}
)
