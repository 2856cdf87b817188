package sim

import (
	"image"
	"image/color"
	"math"
	"time"
)

// Animation timings (Options.Animate), close to Android's: a page slides
// in for 300 ms, the text cursor blinks 500 ms on and 500 ms off, and an
// indeterminate spinner moves every frame (60 per second) like Material's:
// the ring turns 270 degrees a second while its arc's head runs ahead, then
// its tail catches up, every 1333 ms. Moving every frame, it never looks
// still to captures taken at any pace.
const (
	transitionDur = 300 * time.Millisecond
	blinkHalf     = 500 * time.Millisecond
	frameDur      = time.Second / 60
	spinFrames    = 60 * 60 // the spinner's frame count wraps after a minute
)

// animPhase is what animations add to a screen at one moment. Equal phases
// draw equal pixels, so a screen is rendered again only when it moves.
type animPhase struct {
	slide  int  // pixels the page that just opened is still shifted right
	cursor bool // the focused field's cursor is shown
	spin   int  // the spinner's frame, 0 to spinFrames-1
}

// still is the phase of a phone without animations: cursor always shown.
var still = animPhase{cursor: true}

// phaseLocked is the animation phase now; parts that are not on screen
// (no focused field, no spinner) stay at rest.
func (p *Phone) phaseLocked() animPhase {
	if !p.animate {
		return still
	}
	now := p.now()
	ph := still
	if d := now.Sub(p.navigatedAt); d < transitionDur {
		left := 1 - float64(d)/float64(transitionDur)
		ph.slide = int(float64(p.w) * left * left) // ease out
	}
	if p.focus != "" {
		ph.cursor = now.Sub(p.inputAt)/blinkHalf%2 == 0 // shown right after input, as on Android
	}
	if !p.frameLocked().spinner.empty() {
		ph.spin = int(now.Sub(p.born)/frameDur) % spinFrames
	}
	return ph
}

// tickLocked drops the rendered screen when the animation moved on.
func (p *Phone) tickLocked() {
	if ph := p.phaseLocked(); ph != p.drawn {
		p.drawn = ph
		p.img, p.png = nil, nil
	}
}

// inputLocked notes an input: the cursor blink restarts, and a new page on
// top starts a transition.
func (p *Phone) inputLocked(before *page) {
	if !p.animate {
		return
	}
	p.inputAt = p.now()
	if p.top() != before {
		p.navigatedAt = p.inputAt
	}
}

// animateLocked draws the moving parts over a rendered screen: the spinner,
// then the slide of a page that just opened (the content between the status
// and navigation bars shifted right, the strip it left filled with the
// row's first colour).
func (p *Phone) animateLocked(cv *canvas, f *ui) {
	if !f.spinner.empty() {
		drawSpinner(cv, f.spinner, f.spinnerCol, p.drawn.spin)
	}
	off := p.drawn.slide
	if off <= 0 {
		return
	}
	img := cv.img
	w := img.Rect.Dx()
	for y := cv.px(statusH); y < cv.px(f.h-navH); y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+w]
		fill := row[0]
		copy(row[off:], row[:w-off])
		for x := 0; x < off; x++ {
			row[x] = fill
		}
	}
}

// drawSpinner draws an indeterminate progress ring in r at a frame: an arc
// 4 dp thick whose head runs 250 degrees ahead in the first half of each
// 1333 ms cycle and whose tail follows in the second, on a ring turning
// 270 degrees a second.
func drawSpinner(cv *canvas, r rectF, col color.RGBA, frame int) {
	cx, cy := (r.x+r.w/2)*cv.s, (r.y+r.h/2)*cv.s
	ro := r.w / 2 * cv.s
	ri := ro - 4*cv.s
	t := float64(frame) * frameDur.Seconds()
	cycles := t / 1.333
	k, c := math.Floor(cycles), cycles-math.Floor(cycles)
	tail, head := k*250, k*250+10+500*c
	if c >= 0.5 {
		tail, head = k*250+500*(c-0.5), k*250+260
	}
	rad := math.Pi / 180
	start, length := math.Mod(270*t+tail, 360)*rad, (head-tail)*rad
	v := cv.index(col)
	b := cv.rectPx(r).Intersect(cv.img.Rect)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
			d := math.Hypot(dx, dy)
			if d > ro || d < ri {
				continue
			}
			a := math.Mod(math.Atan2(dy, dx)-start+4*math.Pi, 2*math.Pi)
			if a < length {
				cv.img.Pix[cv.img.PixOffset(x, y)] = v
			}
		}
	}
}

// slideRect is r in pixels as it shows during a slide: shifted right by
// the phase's offset and cut at the screen's edge.
func (p *Phone) slideRect(r image.Rectangle) image.Rectangle {
	return r.Add(image.Pt(p.drawn.slide, 0)).Intersect(image.Rect(0, 0, p.w, p.h))
}
