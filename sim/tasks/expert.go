package tasks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/sim"
)

// goal is one state-based sub-goal of a task. ok is the success check (read
// from the phone's state, like AndroidWorld's rewards); next is the expert's
// step toward it, with done = true once the expert considers it finished
// (sometimes one step after ok, e.g. pressing ENTER to close the keyboard).
type goal interface {
	ok(p *sim.Phone) bool
	next(p *sim.Phone) (a action.Action, done bool)
}

// Expert actions. Swipes use AITW's fixed vectors, so recorded demos are
// already in normalized form.
var (
	scrollDown = action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}
	scrollUp   = action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.2, X: 0.5}, Lift: action.Point{Y: 0.8, X: 0.5}}
	pressBack  = key(action.PressBack)
	pressHome  = key(action.PressHome)
	pressEnter = key(action.PressEnter)
	complete   = key(action.StatusTaskComplete)
)

func key(t action.Type) action.Action {
	return action.Action{Type: t, Touch: action.NoPoint, Lift: action.NoPoint}
}

func typeText(s string) action.Action {
	return action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: s}
}

// tap taps an element's centre, rounded to 4 decimals as the model writes it.
func tap(e sim.Element) action.Action {
	c := e.Center()
	pt := action.Point{Y: action.PyRound4(c.Y), X: action.PyRound4(c.X)}
	return action.Action{Type: action.DualPoint, Touch: pt, Lift: pt}
}

// find returns the fully visible element with the given id.
func find(els []sim.Element, id string) (sim.Element, bool) {
	for _, e := range els {
		if e.ID == id && !e.Partial {
			return e, true
		}
	}
	return sim.Element{}, false
}

// reveal taps the element id if it is fully visible, else scrolls toward it.
// order lists the ids of the scrolling list in screen order.
func reveal(els []sim.Element, id string, order []string) action.Action {
	if e, ok := find(els, id); ok {
		return tap(e)
	}
	pos := map[string]int{}
	for i, o := range order {
		pos[o] = i
	}
	first := -1
	for _, e := range els {
		if i, ok := pos[e.ID]; ok && !e.Partial && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 && pos[id] < first {
		return scrollUp
	}
	return scrollDown
}

// toApp steps toward having app in the foreground (any of its pages).
func toApp(p *sim.Phone, app string) (action.Action, bool) {
	s := p.Screen()
	if s.App == app {
		return action.Action{}, true
	}
	els := p.Annotations()
	switch s.View {
	case "home":
		if e, ok := find(els, "app:"+app); ok {
			return tap(e), false
		}
		return scrollDown, false // swipe up opens the drawer
	case "drawer":
		if e, ok := find(els, "app:"+app); ok {
			return tap(e), false
		}
		if p.Field("drawer.search") == "" && s.Scroll < s.Max {
			return scrollDown, false
		}
	}
	return pressHome, false
}

// toView steps toward the app's page view ("main", ...): into the app, then
// BACK out of deeper pages.
func toMain(p *sim.Phone, app string) (action.Action, bool) {
	if a, ok := toApp(p, app); !ok {
		return a, false
	}
	if p.Screen().View != "main" {
		return pressBack, false
	}
	return action.Action{}, true
}

// appOpen: the app is in the foreground.
type appOpen struct{ app string }

func (g appOpen) ok(p *sim.Phone) bool { return p.Screen().App == g.app }
func (g appOpen) next(p *sim.Phone) (action.Action, bool) {
	return toApp(p, g.app)
}

// atHome: the home screen with nothing above it.
type atHome struct{}

func (atHome) ok(p *sim.Phone) bool { s := p.Screen(); return s.View == "home" && s.Depth == 1 }
func (g atHome) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	return pressHome, false
}

// atPage: a given page is on top (used for "go back" tasks).
type atPage struct {
	app, view string
	item      int
}

func (g atPage) ok(p *sim.Phone) bool {
	s := p.Screen()
	return s.App == g.app && s.View == g.view && (g.view != "detail" && g.view != "page" || s.Item == g.item)
}
func (g atPage) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	return pressBack, false
}

// drawerOpen: the app drawer is on top.
type drawerOpen struct{}

func (drawerOpen) ok(p *sim.Phone) bool { return p.Screen().View == "drawer" }
func (g drawerOpen) next(p *sim.Phone) (action.Action, bool) {
	switch p.Screen().View {
	case "drawer":
		return action.Action{}, true
	case "home":
		return scrollDown, false
	}
	return pressHome, false
}

// recentsOpen: the recent apps screen is on top.
type recentsOpen struct{}

func (recentsOpen) ok(p *sim.Phone) bool { return p.Screen().View == "recents" }
func (g recentsOpen) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	if e, ok := find(p.Annotations(), "nav:recents"); ok {
		return tap(e), false
	}
	return pressHome, false
}

// settingIs: a Settings switch (or a Clock alarm) is on or off.
type settingIs struct {
	id string
	on bool
}

func (g settingIs) alarm() bool { return strings.HasPrefix(g.id, "alarm_") }

func (g settingIs) ok(p *sim.Phone) bool { return p.Setting(g.id) == g.on }
func (g settingIs) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	app := "settings"
	if g.alarm() {
		app = "clock"
	}
	if a, ok := toMain(p, app); !ok {
		return a, false
	}
	var order []string
	for _, r := range p.Content().Settings {
		order = append(order, "setting:"+r.ID)
	}
	for _, al := range p.Content().Alarms {
		order = append(order, "setting:"+al.ID)
	}
	els := p.Annotations()
	if e, ok := find(els, "toggle:"+g.id); ok {
		return tap(e), false
	}
	return reveal(els, "setting:"+g.id, order), false
}

// listSearch: a list app's search field holds the query.
type listSearch struct{ app, query string }

func (g listSearch) field() string { return g.app + ".search" }
func (g listSearch) ok(p *sim.Phone) bool {
	return p.Screen().App == g.app && strings.EqualFold(strings.TrimSpace(p.Field(g.field())), g.query)
}
func (g listSearch) next(p *sim.Phone) (action.Action, bool) {
	if a, ok := toApp(p, g.app); !ok {
		return a, false
	}
	if p.Screen().View != "main" {
		if g.ok(p) {
			return action.Action{}, true // already searched and went on (multi-step)
		}
		return pressBack, false
	}
	return fillField(p, g.field(), g.query)
}

// fillField focuses a field, clears wrong text, types the query and presses
// ENTER; done when the field holds the query and the keyboard is closed.
func fillField(p *sim.Phone, field, query string) (action.Action, bool) {
	v := p.Field(field)
	focused := p.Focus() == field
	els := p.Annotations()
	switch {
	case strings.EqualFold(strings.TrimSpace(v), query):
		if focused {
			return pressEnter, false
		}
		return action.Action{}, true
	case !focused:
		if e, ok := find(els, "field:"+field); ok {
			return tap(e), false
		}
		return pressBack, false
	case v != "":
		if e, ok := find(els, "clear:"+field); ok {
			return tap(e), false
		}
		return pressBack, false
	}
	return typeText(query), false
}

// browserSearch: the browser searched for the query (and shows its results).
type browserSearch struct{ query string }

func (g browserSearch) ok(p *sim.Phone) bool {
	for _, q := range p.BrowserHistory() {
		if strings.EqualFold(q, g.query) {
			return true
		}
	}
	return false
}
func (g browserSearch) next(p *sim.Phone) (action.Action, bool) {
	s := p.Screen()
	if s.App == "browser" && s.View == "results" && strings.EqualFold(s.Query, g.query) {
		return action.Action{}, true
	}
	if g.ok(p) && (s.App != "browser" || s.View == "web" && strings.EqualFold(s.Query, g.query)) {
		return action.Action{}, true // searched already; a later sub-goal moved on
	}
	if a, ok := toApp(p, "browser"); !ok {
		return a, false
	}
	if s.View == "web" {
		return pressBack, false
	}
	a, done := fillField(p, "browser.url", g.query)
	if done { // typed but not submitted: focus the field again to press ENTER
		if e, ok := find(p.Annotations(), "field:browser.url"); ok {
			return tap(e), false
		}
		return pressBack, false
	}
	return a, false
}

// openResult: the browser shows result n of the query.
type openResult struct {
	query string
	n     int
}

func (g openResult) ok(p *sim.Phone) bool {
	s := p.Screen()
	return s.App == "browser" && s.View == "web" && s.Item == g.n && strings.EqualFold(s.Query, g.query)
}
func (g openResult) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	s := p.Screen()
	if s.App != "browser" || s.View != "results" || !strings.EqualFold(s.Query, g.query) {
		return browserSearch{g.query}.next(p)
	}
	var order []string
	for i := 0; i < 6; i++ {
		order = append(order, fmt.Sprintf("result:%d", i))
	}
	return reveal(p.Annotations(), fmt.Sprintf("result:%d", g.n), order), false
}

// openItem: a list app shows the detail page of item i.
type openItem struct {
	app  string
	item int
}

func (g openItem) ok(p *sim.Phone) bool {
	s := p.Screen()
	return s.App == g.app && s.View == "detail" && s.Item == g.item
}
func (g openItem) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	if a, ok := toMain(p, g.app); !ok {
		return a, false
	}
	if p.Focus() != "" {
		return pressBack, false // hide the keyboard first
	}
	shown := p.Filtered(g.app)
	visible := false
	var order []string
	for _, i := range shown {
		order = append(order, "item:"+g.app+":"+strconv.Itoa(i))
		visible = visible || i == g.item
	}
	if !visible { // a search hides it: clear the field
		a, _ := fillField(p, g.app+".search", "")
		return a, false
	}
	return reveal(p.Annotations(), "item:"+g.app+":"+strconv.Itoa(g.item), order), false
}

// openSettingPage: Settings shows the page of a row.
type openSettingPage struct{ id string }

func (g openSettingPage) row(p *sim.Phone) int {
	for i, r := range p.Content().Settings {
		if r.ID == g.id {
			return i
		}
	}
	return -1
}
func (g openSettingPage) ok(p *sim.Phone) bool {
	s := p.Screen()
	return s.App == "settings" && s.View == "page" && s.Item == g.row(p)
}
func (g openSettingPage) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	if a, ok := toMain(p, "settings"); !ok {
		return a, false
	}
	var order []string
	for _, r := range p.Content().Settings {
		order = append(order, "setting:"+r.ID)
	}
	return reveal(p.Annotations(), "setting:"+g.id, order), false
}

// calcResult: the calculator shows the result of an expression.
type calcResult struct{ expr, result string }

func (g calcResult) ok(p *sim.Phone) bool {
	return p.Screen().App == "calculator" && p.Calculator() == g.result
}
func (g calcResult) next(p *sim.Phone) (action.Action, bool) {
	if g.ok(p) {
		return action.Action{}, true
	}
	if a, ok := toApp(p, "calculator"); !ok {
		return a, false
	}
	cur := p.Calculator()
	want := g.expr + "="
	keyID := "calc:C"
	if strings.HasPrefix(g.expr, cur) {
		keyID = "calc:" + want[len(cur):len(cur)+1]
	}
	if e, ok := find(p.Annotations(), keyID); ok {
		return tap(e), false
	}
	return pressBack, false
}
