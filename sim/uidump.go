package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"strings"
)

// UIAutomatorDump describes the screen as `uiautomator dump` writes it:
// a <hierarchy> holding a window-sized FrameLayout whose children are the
// annotated and tappable elements, in drawing order, with their pixel
// bounds as they show now (a page sliding in has moving bounds; a blinking
// cursor or a turning spinner changes nothing here, as on a phone).
func (p *Phone) UIAutomatorDump() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tickLocked()
	f := p.frameLocked()
	pkg := "com.autoui.sim.launcher"
	if app := p.top().app; app != "" {
		pkg = "com.autoui.sim." + app
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0">`)
	full := image.Rect(0, 0, p.w, p.h)
	writeUINode(&b, uiNode{index: 0, class: "android.widget.FrameLayout", pkg: pkg, enabled: true, bounds: full}, false)
	i := 0
	for k, n := range f.nodes {
		if n.ann == nil && n.tap == nil {
			continue
		}
		r := n.r
		if !n.clip.empty() {
			r = r.intersect(n.clip)
		}
		if !f.kb.empty() && k < f.kbStart {
			r = r.intersect(rectF{0, 0, f.w, f.kb.y}) // hidden under the keyboard
		}
		px := p.slideRect(p.rectPx(r))
		if px.Empty() {
			continue
		}
		un := uiNode{index: i, class: "android.view.View", pkg: pkg, enabled: true, clickable: n.tap != nil, bounds: px}
		if n.ann != nil {
			un.describe(*n.ann, p.focus)
		}
		writeUINode(&b, un, true)
		i++
	}
	if !f.spinner.empty() {
		writeUINode(&b, uiNode{index: i, class: "android.widget.ProgressBar", pkg: pkg, enabled: true, bounds: p.slideRect(p.rectPx(f.spinner))}, true)
	}
	b.WriteString(`</node></hierarchy>`)
	return b.Bytes(), nil
}

// rectPx is r (dp) in pixels, as the canvas rounds it.
func (p *Phone) rectPx(r rectF) image.Rectangle {
	px := func(v float64) int { return int(v*p.s + 0.5) }
	return image.Rect(px(r.x), px(r.y), px(r.x+r.w), px(r.y+r.h))
}

// uiNode is one <node> of a dump.
type uiNode struct {
	index                                  int
	text, id, class, pkg, desc             string
	checkable, checked, clickable, enabled bool
	focusable, focused, scrollable         bool
	bounds                                 image.Rectangle
}

// describe fills in what an annotated element is: its text, view class,
// resource id and state (a switch's checked, a field's focus).
func (n *uiNode) describe(e Element, focus string) {
	n.id = "com.autoui.sim:id/" + strings.NewReplacer(":", "_", ".", "_", " ", "_").Replace(e.ID)
	kind, name, _ := strings.Cut(e.ID, ":")
	switch {
	case kind == "field":
		n.class, n.text, n.focusable, n.focused = "android.widget.EditText", e.Text, true, name == focus
	case strings.HasPrefix(e.Type, "ICON_TOGGLE_"):
		n.class, n.checkable, n.checked = "android.widget.Switch", true, e.Type == "ICON_TOGGLE_ON"
	case strings.HasPrefix(e.Type, "ICON_"):
		n.class, n.desc = "android.widget.ImageView", strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(e.Type, "ICON_"), "_", " "))
	default:
		n.class, n.text = "android.widget.TextView", e.Text
	}
}

func writeUINode(b *bytes.Buffer, n uiNode, closed bool) {
	attr := func(name, v string) {
		b.WriteString(" " + name + `="`)
		xml.EscapeText(b, []byte(v)) //nolint:errcheck // a bytes.Buffer does not fail
		b.WriteString(`"`)
	}
	b.WriteString("<node")
	attr("index", fmt.Sprint(n.index))
	for _, kv := range [][2]string{{"text", n.text}, {"resource-id", n.id}, {"class", n.class}, {"package", n.pkg}, {"content-desc", n.desc}} {
		attr(kv[0], kv[1])
	}
	for _, f := range []struct {
		name string
		v    bool
	}{{"checkable", n.checkable}, {"checked", n.checked}, {"clickable", n.clickable}, {"enabled", n.enabled}, {"focusable", n.focusable},
		{"focused", n.focused}, {"scrollable", n.scrollable}, {"long-clickable", false}, {"password", false}, {"selected", false}} {
		attr(f.name, fmt.Sprint(f.v))
	}
	attr("bounds", fmt.Sprintf("[%d,%d][%d,%d]", n.bounds.Min.X, n.bounds.Min.Y, n.bounds.Max.X, n.bounds.Max.Y))
	if closed {
		b.WriteString(" />")
	} else {
		b.WriteString(">")
	}
}
