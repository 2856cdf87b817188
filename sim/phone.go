// Package sim is a simulated Android-like phone: a procedurally generated
// UI (home screen, app drawer, Settings, list apps with search, a browser,
// Clock, Calculator...) that renders deterministically from a seed and reacts
// to the same input an ADB shell gives a real device (tap, swipe, text,
// keyevent). It also reports its layout as AITW-style UI annotations and
// exposes its state for success checks and scripted experts.
package sim

import (
	"fmt"
	"image"
	"math"
	"strings"
	"sync"
	"time"
)

// Android key codes the simulator handles.
const (
	KeyHome      = 3
	KeyBack      = 4
	KeyEnter     = 66
	KeyDel       = 67
	KeyAppSwitch = 187
)

// Options configure a phone. Zero Width/Height mean 1080x2400.
type Options struct {
	Width, Height int
	Seed          int64
	// Animate gives the screen what moves on a real phone: a page that
	// opens slides in, a focused field's cursor blinks, list apps and web
	// pages show a spinning progress indicator. Off, equal states render
	// equal bytes whenever they are captured (the dataset relies on it).
	Animate bool
	// Now is the animations' clock; nil means time.Now.
	Now func() time.Time
}

// Phone is one simulated device. Its methods are safe for concurrent use.
type Phone struct {
	mu       sync.Mutex
	w, h     int
	s        float64 // pixels per dp
	c        *Content
	stack    []*page
	settings map[string]bool
	fields   map[string]string
	focus    string
	history  []string // submitted browser queries
	recents  []string // app ids, most recent first
	calc     string   // calculator expression / result
	frame    *ui
	img      *image.Paletted
	png      []byte

	// Animations (Options.Animate): the clock, when the phone was made,
	// when the top page last changed and when input last arrived, and the
	// phase the rendered screen shows.
	animate     bool
	now         func() time.Time
	born        time.Time
	navigatedAt time.Time
	inputAt     time.Time
	drawn       animPhase
}

// page is one entry of the back stack.
type page struct {
	app    string // "" for the launcher pages
	view   string // home, drawer, recents, main, detail, page, results, web
	item   int    // detail item / settings page / result index
	query  string // browser query shown by results and web pages
	scroll float64
	max    float64 // scroll limit, set when the frame is built
}

// New returns a phone on its home screen.
func New(o Options) *Phone {
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 1080, 2400
	}
	p := &Phone{w: o.Width, h: o.Height, s: float64(o.Width) / 360, c: NewContent(o.Seed),
		settings: map[string]bool{}, fields: map[string]string{}, animate: o.Animate, now: o.Now, drawn: still}
	if p.now == nil {
		p.now = time.Now
	}
	if p.animate {
		p.born = p.now()
		p.navigatedAt = p.born.Add(-transitionDur)
	}
	for k, v := range p.c.Initial {
		p.settings[k] = v
	}
	p.stack = []*page{{view: "home"}}
	return p
}

// Content returns what the seed generated. Do not modify it.
func (p *Phone) Content() *Content { return p.c }

// Size returns the screen size in pixels.
func (p *Phone) Size() (width, height int) { return p.w, p.h }

// Screencap returns the current screen as PNG bytes (identical bytes for
// identical states).
func (p *Phone) Screencap() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tickLocked()
	if p.png == nil {
		b, err := encodePNG(p.renderLocked())
		if err != nil {
			return nil, fmt.Errorf("encode screen: %w", err)
		}
		p.png = b
	}
	return append([]byte(nil), p.png...), nil
}

// Image returns a copy of the current screen.
func (p *Phone) Image() *image.RGBA {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tickLocked()
	src := p.renderLocked()
	dst := image.NewRGBA(src.Rect)
	var lut [256][4]uint8
	for i, c := range src.Palette {
		r, g, b, a := c.RGBA()
		lut[i] = [4]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
	}
	for i, v := range src.Pix {
		copy(dst.Pix[4*i:4*i+4], lut[v][:])
	}
	return dst
}

func (p *Phone) renderLocked() *image.Paletted {
	if p.img != nil {
		return p.img
	}
	f := p.frameLocked()
	cv := newCanvas(p.w, p.h, p.s)
	img := cv.img
	full := img.Rect
	for _, n := range f.nodes {
		if n.draw == nil {
			continue
		}
		cv.clip = full
		if !n.clip.empty() {
			cv.clip = cv.rectPx(n.clip).Intersect(full)
		}
		n.draw(cv)
	}
	if p.animate {
		cv.clip = full
		p.animateLocked(cv, f)
	}
	p.img = img
	return img
}

// Annotations lists the annotated elements on screen, top to bottom in
// drawing order, with boxes clipped to what is visible.
func (p *Phone) Annotations() []Element {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.frameLocked()
	var out []Element
	for i, n := range f.nodes {
		if n.ann == nil {
			continue
		}
		r := n.r
		if !n.clip.empty() {
			r = r.intersect(n.clip)
		}
		r = r.intersect(rectF{0, 0, f.w, f.h})
		if !f.kb.empty() && i < f.kbStart {
			r = r.intersect(rectF{0, 0, f.w, f.kb.y}) // hidden under the keyboard
		}
		if r.empty() {
			continue
		}
		e := *n.ann
		e.Partial = r.h < n.r.h-0.01 || r.w < n.r.w-0.01
		e.Box.Y, e.Box.X = float32(r.y/f.h), float32(r.x/f.w)
		e.Box.H, e.Box.W = float32(r.h/f.h), float32(r.w/f.w)
		out = append(out, e)
	}
	return out
}

func (p *Phone) changed() {
	p.frame, p.img, p.png = nil, nil, nil
}

func (p *Phone) top() *page { return p.stack[len(p.stack)-1] }

// Tap taps the screen at pixel (x, y).
func (p *Phone) Tap(x, y int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.inputLocked(p.top())
	p.tapLocked(float64(x)+0.5, float64(y)+0.5)
}

func (p *Phone) tapLocked(x, y float64) {
	f := p.frameLocked()
	dx, dy := x/p.s, y/p.s
	for i := len(f.nodes) - 1; i >= 0; i-- {
		n := f.nodes[i]
		if n.tap == nil || !n.r.contains(dx, dy) || (!n.clip.empty() && !n.clip.contains(dx, dy)) {
			continue
		}
		n.tap()
		p.changed()
		return
	}
}

// Swipe drags from (x1, y1) to (x2, y2) pixels. Scrolling follows the finger
// exactly, without momentum, so equal swipes give equal offsets.
func (p *Phone) Swipe(x1, y1, x2, y2, durationMs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.inputLocked(p.top())
	dx, dy := float64(x2-x1)/p.s, float64(y2-y1)/p.s
	if math.Hypot(dx, dy) < 10 {
		p.tapLocked(float64(x1)+0.5, float64(y1)+0.5)
		return
	}
	if math.Abs(dx) > math.Abs(dy) {
		return // no horizontal gestures
	}
	p.frameLocked() // sets the page's scroll limit
	t := p.top()
	switch {
	case t.view == "home" && dy < 0:
		delete(p.fields, "drawer.search")
		p.push(&page{view: "drawer"})
	case t.view == "drawer" && dy > 0 && t.scroll == 0:
		p.back()
	default:
		t.scroll = math.Max(0, math.Min(t.max, t.scroll-dy))
	}
	p.changed()
}

// Text types s into the focused field; without focus it goes nowhere.
func (p *Phone) Text(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.inputLocked(p.top())
	p.typeLocked(s)
}

func (p *Phone) typeLocked(s string) {
	if p.focus == "" {
		return
	}
	p.fields[p.focus] += s
	p.top().scroll = 0
	p.changed()
}

// KeyEvent presses an Android key (HOME, BACK, ENTER, DEL, APP_SWITCH).
func (p *Phone) KeyEvent(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.inputLocked(p.top())
	p.keyLocked(code)
	p.changed()
}

func (p *Phone) keyLocked(code int) {
	switch code {
	case KeyHome:
		p.focus = ""
		p.stack = p.stack[:1]
	case KeyBack:
		if p.focus != "" {
			p.focus = "" // first BACK hides the keyboard, as on Android
			return
		}
		p.back()
	case KeyEnter:
		p.enter()
	case KeyDel:
		if v := []rune(p.fields[p.focus]); p.focus != "" && len(v) > 0 {
			p.fields[p.focus] = string(v[:len(v)-1])
		}
	case KeyAppSwitch:
		p.focus = ""
		if p.top().view != "recents" {
			p.push(&page{view: "recents"})
		}
	}
}

func (p *Phone) back() {
	if len(p.stack) > 1 {
		p.stack = p.stack[:len(p.stack)-1]
	}
}

func (p *Phone) push(pg *page) {
	p.focus = ""
	p.stack = append(p.stack, pg)
}

// enter submits the focused field: the browser searches, other fields just
// close the keyboard (their lists filter as you type).
func (p *Phone) enter() {
	f := p.focus
	p.focus = ""
	if f == "browser.url" {
		q := strings.TrimSpace(p.fields[f])
		if q == "" {
			return
		}
		p.history = append(p.history, q)
		t := p.top()
		if t.app == "browser" && t.view != "main" {
			p.stack = p.stack[:len(p.stack)-1]
		}
		p.stack = append(p.stack, &page{app: "browser", view: "results", query: q})
	}
}

// launch starts an app fresh on its main screen above the home screen.
func (p *Phone) launch(id string) {
	p.focus = ""
	for k := range p.fields {
		if strings.HasPrefix(k, id+".") {
			delete(p.fields, k)
		}
	}
	if id == "calculator" {
		p.calc = ""
	}
	p.stack = []*page{p.stack[0], {app: id, view: "main"}}
	rec := []string{id}
	for _, r := range p.recents {
		if r != id {
			rec = append(rec, r)
		}
	}
	p.recents = rec
}

// Screen describes the page on top of the back stack.
type Screen struct {
	App    string // "" on the launcher (home, drawer, recents)
	View   string // home, drawer, recents, main, detail, page, results, web
	Item   int    // detail item index, settings page index or result index
	Query  string // browser results/web pages: the query
	Depth  int    // pages on the back stack including home
	Scroll float64
	Max    float64 // scroll limit in dp
}

// Screen returns the current page.
func (p *Phone) Screen() Screen {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frameLocked()
	t := p.top()
	return Screen{App: t.app, View: t.view, Item: t.item, Query: t.query, Depth: len(p.stack), Scroll: t.scroll, Max: t.max}
}

// Setting reports a Settings switch or an alarm (by id).
func (p *Phone) Setting(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings[id]
}

// Focus returns the id of the focused text field ("" when none).
func (p *Phone) Focus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.focus
}

// Field returns the text in a field ("contacts.search", "browser.url", ...).
func (p *Phone) Field(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fields[id]
}

// BrowserHistory returns the submitted browser queries, oldest first.
func (p *Phone) BrowserHistory() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.history...)
}

// Calculator returns the calculator display.
func (p *Phone) Calculator() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calc
}

// Filtered returns the indexes of a list app's items that match its search
// field, in screen order.
func (p *Phone) Filtered(app string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.filtered(app)
}

func (p *Phone) filtered(app string) []int {
	q := strings.ToLower(strings.TrimSpace(p.fields[app+".search"]))
	var out []int
	for i, it := range p.c.Items[app] {
		if q == "" || strings.Contains(strings.ToLower(it.Title), q) || strings.Contains(strings.ToLower(it.Sub), q) {
			out = append(out, i)
		}
	}
	return out
}

func (p *Phone) frameLocked() *ui {
	if p.frame == nil {
		p.frame = p.build()
	}
	return p.frame
}
