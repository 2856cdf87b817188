package fakephone

import (
	"bytes"
	_ "embed"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"sync"
)

// EventKind names what a RecordingPhone received.
type EventKind string

// Event kinds.
const (
	EventTap   EventKind = "tap"
	EventSwipe EventKind = "swipe"
	EventText  EventKind = "text"
	EventKey   EventKind = "key"
)

// Event is one input a RecordingPhone received.
type Event struct {
	Kind           EventKind
	X1, Y1, X2, Y2 int // tap uses X1, Y1
	DurationMs     int
	Text           string
	KeyCode        int
}

// RecordingPhone is the default Phone: a fixed screen (a PNG that tests may
// replace) and a log of every input.
type RecordingPhone struct {
	mu     sync.Mutex
	png    []byte
	ui     []byte // SetUI's hierarchy; nil: one window-sized node
	w, h   int
	events []Event
	// OnEvent, when set, is called after each event is recorded, under no
	// lock; tests use it to change the screen in response to input.
	OnEvent func(Event)
}

// NewRecordingPhone holds the given PNG as the screen.
func NewRecordingPhone(pngBytes []byte) (*RecordingPhone, error) {
	p := &RecordingPhone{}
	if err := p.SetScreen(pngBytes); err != nil {
		return nil, err
	}
	return p, nil
}

// SetScreen replaces the screen; the size follows the PNG.
func (p *RecordingPhone) SetScreen(pngBytes []byte) error {
	cfg, err := png.DecodeConfig(bytes.NewReader(pngBytes))
	if err != nil {
		return fmt.Errorf("recording phone screen: %w", err)
	}
	p.mu.Lock()
	p.png, p.w, p.h = append([]byte(nil), pngBytes...), cfg.Width, cfg.Height
	p.mu.Unlock()
	return nil
}

// Size implements Phone.
func (p *RecordingPhone) Size() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w, p.h
}

// Screencap implements Phone.
func (p *RecordingPhone) Screencap() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.png...), nil
}

// SetUI replaces what `uiautomator dump` writes.
func (p *RecordingPhone) SetUI(hierarchy []byte) {
	p.mu.Lock()
	p.ui = append([]byte(nil), hierarchy...)
	p.mu.Unlock()
}

// UIAutomatorDump implements UIDumper: SetUI's hierarchy, else one
// window-sized FrameLayout.
func (p *RecordingPhone) UIAutomatorDump() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ui != nil {
		return append([]byte(nil), p.ui...), nil
	}
	return []byte(fmt.Sprintf(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0"><node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.android.launcher3" content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,0][%d,%d]" /></hierarchy>`, p.w, p.h)), nil
}

func (p *RecordingPhone) record(e Event) {
	p.mu.Lock()
	p.events = append(p.events, e)
	hook := p.OnEvent
	p.mu.Unlock()
	if hook != nil {
		hook(e)
	}
}

// Tap implements Phone.
func (p *RecordingPhone) Tap(x, y int) { p.record(Event{Kind: EventTap, X1: x, Y1: y}) }

// Swipe implements Phone.
func (p *RecordingPhone) Swipe(x1, y1, x2, y2, ms int) {
	p.record(Event{Kind: EventSwipe, X1: x1, Y1: y1, X2: x2, Y2: y2, DurationMs: ms})
}

// Text implements Phone.
func (p *RecordingPhone) Text(s string) { p.record(Event{Kind: EventText, Text: s}) }

// KeyEvent implements Phone.
func (p *RecordingPhone) KeyEvent(code int) { p.record(Event{Kind: EventKey, KeyCode: code}) }

// Events returns the inputs received so far.
func (p *RecordingPhone) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// TypedText joins the text of every EventText, i.e. what ended up typed.
func (p *RecordingPhone) TypedText() string {
	var b bytes.Buffer
	for _, e := range p.Events() {
		if e.Kind == EventText {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// GrayPNG encodes a w x h mid-gray image. The default 1080x2400 one is
// stored pre-encoded: encoding 10 MB of pixels takes seconds under -race.
func GrayPNG(w, h int) []byte {
	if w == 1080 && h == 2400 {
		return append([]byte(nil), defaultScreen...)
	}
	return SolidPNG(w, h, color.RGBA{128, 128, 128, 255})
}

// defaultScreen is SolidPNG(1080, 2400, mid-gray).
//
//go:embed testdata/screen_1080x2400.png
var defaultScreen []byte

// SolidPNG encodes a w x h image of one color, with a darker band at the
// top so orientation mistakes show.
func SolidPNG(w, h int, c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	band := h / 20
	dark := []byte{c.R / 2, c.G / 2, c.B / 2, 255}
	light := []byte{c.R, c.G, c.B, 255}
	row := func(px []byte) []byte { return bytes.Repeat(px, w) }
	darkRow, lightRow := row(dark), row(light)
	for y := 0; y < h; y++ {
		src := lightRow
		if y < band {
			src = darkRow
		}
		copy(img.Pix[y*img.Stride:], src)
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		panic("encode solid png: " + err.Error()) // in-memory encode of a valid image cannot fail
	}
	return b.Bytes()
}
