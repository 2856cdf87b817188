package device

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// UIElement is one node of the UI hierarchy with the attributes
// AndroidWorld compares when it waits for a stable screen (env/interface
// _get_stable_state over representation_utils.xml_dump_to_ui_elements):
// text, description, class, bounds, package, resource id and the state
// flags. Two screens are the same when their element lists are equal.
type UIElement struct {
	Text, ContentDesc, Class, Package, ResourceID string
	Bounds                                        [4]int // left, top, right, bottom in pixels
	Checkable, Checked, Clickable, Enabled        bool
	Focusable, Focused, Scrollable, LongClickable bool
	Selected                                      bool
}

// uiDumpPath is where `uiautomator dump` writes: /data/local/tmp belongs to
// the shell user on every version (shared storage may be unmounted).
const uiDumpPath = "/data/local/tmp/autoui-window_dump.xml"

// ErrUIBusy is uiautomator giving up on a UI that never went idle (events
// kept coming): the screen is still changing.
var ErrUIBusy = errors.New("the UI never went idle")

// UIElements reads the UI hierarchy with `uiautomator dump` and lists its
// nodes in document order, the root <hierarchy> left out, as AndroidWorld
// does. A UI that never goes idle is ErrUIBusy.
func (d *Device) UIElements(ctx context.Context) ([]UIElement, error) {
	out, err := d.readShellText(ctx, "uiautomator dump "+uiDumpPath)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.Contains(out, "could not get idle state"):
		return nil, ErrUIBusy
	case !strings.Contains(out, "dumped to"):
		return nil, fmt.Errorf("device %s: uiautomator dump: %s", d.serial, commandFailure(out))
	}
	x, err := d.readShellText(ctx, "cat "+uiDumpPath)
	if err != nil {
		return nil, err
	}
	els, err := ParseUIDump(x)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", d.serial, err)
	}
	return els, nil
}

// ParseUIDump reads the XML `uiautomator dump` writes.
func ParseUIDump(s string) ([]UIElement, error) {
	dec := xml.NewDecoder(strings.NewReader(s))
	els := []UIElement{}
	sawRoot := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("uiautomator dump: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		switch {
		case !ok:
		case se.Name.Local == "hierarchy":
			sawRoot = true
		case se.Name.Local == "node":
			els = append(els, uiElement(se.Attr))
		}
	}
	if !sawRoot {
		return nil, fmt.Errorf("uiautomator dump: no <hierarchy> in %.80q", s) // at most 80 runes of it
	}
	return els, nil
}

func uiElement(attrs []xml.Attr) UIElement {
	var e UIElement
	flags := map[string]*bool{"checkable": &e.Checkable, "checked": &e.Checked, "clickable": &e.Clickable, "enabled": &e.Enabled,
		"focusable": &e.Focusable, "focused": &e.Focused, "scrollable": &e.Scrollable, "long-clickable": &e.LongClickable, "selected": &e.Selected}
	strs := map[string]*string{"text": &e.Text, "content-desc": &e.ContentDesc, "class": &e.Class, "package": &e.Package, "resource-id": &e.ResourceID}
	for _, a := range attrs {
		if f, ok := flags[a.Name.Local]; ok {
			*f = a.Value == "true"
		} else if s, ok := strs[a.Name.Local]; ok {
			*s = a.Value
		} else if a.Name.Local == "bounds" {
			e.Bounds = parseBounds(a.Value)
		}
	}
	return e
}

// parseBounds reads "[left,top][right,bottom]"; anything else is zero.
func parseBounds(s string) [4]int {
	var b [4]int
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '[' || r == ']' || r == ',' })
	if len(f) != 4 {
		return b
	}
	for i, v := range f {
		b[i], _ = strconv.Atoi(v)
	}
	return b
}
