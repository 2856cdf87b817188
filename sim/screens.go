package sim

import (
	"fmt"
	"image/color"
	"math"
	"strings"
)

// Fixed layout metrics in dp.
const (
	statusH = 24.0
	navH    = 48.0
	barH    = 56.0
	rowH    = 64.0
	setRowH = 56.0
)

// build lays out the current screen. It only reads state, except for the
// scroll limit of the top page, which depends on the layout.
func (p *Phone) build() *ui {
	th := lightTheme
	if p.settings["dark_theme"] {
		th = darkTheme
	}
	u := &ui{p: p, w: 360, h: float64(p.h) / p.s, th: th, kbStart: 1 << 30}
	t := p.top()
	statusBg, statusFg := th.bg, th.text
	switch {
	case t.view == "home":
		u.home()
		statusBg, statusFg = color.RGBA{}, white
	case t.view == "drawer":
		u.drawer(t)
		statusBg = th.surface
	case t.view == "recents":
		u.recents()
		statusBg, statusFg = rgb(0x2b2b2b), white
	default:
		app, _ := p.c.App(t.app)
		statusBg, statusFg = darken(app.color), white
		u.app(t, app)
	}
	if p.focus != "" {
		u.keyboard()
	}
	u.statusBar(statusBg, statusFg)
	u.navBar()
	return u
}

func darken(c color.RGBA) color.RGBA {
	return color.RGBA{uint8(int(c.R) * 4 / 5), uint8(int(c.G) * 4 / 5), uint8(int(c.B) * 4 / 5), 0xff}
}

func (u *ui) statusBar(bg, fg color.RGBA) {
	if bg.A != 0 {
		u.rect(rectF{0, 0, u.w, statusH}, bg)
	}
	p := u.p
	u.label(12, 6, p.c.Clock, 1, fg).annotate("TEXT", p.c.Clock, "status:clock")
	bat := fmt.Sprintf("%d%%", p.c.Battery)
	x := u.w - 12 - 14
	bx := x
	u.add(rectF{bx, 7, 14, 10}, func(c *canvas) {
		x := bx
		c.fill(rectF{x, 7, 14, 10}, fg)
		c.fill(rectF{x + 1.5, 8.5, 11, 7}, bg0(bg))
		c.fill(rectF{x + 1.5, 8.5, 11 * float64(p.c.Battery) / 100, 7}, fg)
		c.fill(rectF{x + 14, 10, 2, 4}, fg)
	})
	x -= textWidth(bat, 1) + 4
	u.label(x, 6, bat, 1, fg)
	if p.settings["airplane"] {
		x -= 16
		ax := x
		u.add(rectF{ax, 5, 12, 14}, func(c *canvas) {
			c.line(ax+6, 5, ax+6, 19, 2, fg)
			c.poly(fg, ax, 13, ax+6, 9, ax+12, 13)
			c.poly(fg, ax+3, 19, ax+6, 16, ax+9, 19)
		})
	} else if p.settings["wifi"] {
		x -= 16
		wx := x
		u.add(rectF{wx, 6, 14, 12}, func(c *canvas) { c.poly(fg, wx, 8, wx+14, 8, wx+7, 18) })
	}
	if p.settings["bluetooth"] {
		x -= 12
		u.label(x, 6, "B", 1, fg)
	}
}

// bg0 is the colour used to hollow out status icons on a transparent bar.
func bg0(c color.RGBA) color.RGBA {
	if c.A == 0 {
		return rgb(0x444444)
	}
	return c
}

func (u *ui) navBar() {
	y := u.h - navH
	u.rect(rectF{0, y, u.w, navH}, u.th.nav)
	fg := u.th.sub
	cy := y + navH/2
	bx, hx, rx := u.w*0.2, u.w*0.5, u.w*0.78
	u.add(rectF{bx - 8, cy - 8, 16, 16}, func(c *canvas) { c.poly(fg, bx+7, cy-8, bx+7, cy+8, bx-7, cy) }).
		annotate("ICON_V_BACKWARD", "", "nav:back")
	u.add(rectF{hx - 9, cy - 9, 18, 18}, func(c *canvas) { c.disc(hx, cy, 9, 6.5, fg) }).
		annotate("ICON_NAV_BAR_CIRCLE", "", "nav:home")
	u.add(rectF{rx - 8, cy - 8, 16, 16}, func(c *canvas) {
		c.fill(rectF{rx - 8, cy - 8, 16, 16}, fg)
		c.fill(rectF{rx - 5.5, cy - 5.5, 11, 11}, u.th.nav)
	}).annotate("ICON_NAV_BAR_RECT", "", "nav:recents")
	p := u.p
	u.hit(rectF{0, y, u.w / 3, navH}, func() { p.keyLocked(KeyBack) })
	u.hit(rectF{u.w / 3, y, u.w / 3, navH}, func() { p.keyLocked(KeyHome) })
	u.hit(rectF{2 * u.w / 3, y, u.w / 3, navH}, func() { p.keyLocked(KeyAppSwitch) })
}

// appIcon draws an app's round icon centred on (cx, cy) with its label below.
func (u *ui) appIcon(a App, cx, cy, r float64, labelCol color.RGBA) {
	p := u.p
	launch := func() { p.launch(a.ID) }
	letter := a.Label[:1]
	u.add(rectF{cx - r, cy - r, 2 * r, 2 * r}, func(c *canvas) {
		c.disc(cx, cy, r, 0, a.color)
		c.text(cx-glyphW*1.25, cy-glyphH*1.25, letter, 2.5, white)
	}).annotate(a.Icon, "", "app:"+a.ID).onTap(launch)
	l := fit(a.Label, 86, 1)
	u.centered(cx, cy+r+6, l, 1, labelCol).annotate("TEXT", l, "label:"+a.ID).onTap(launch)
}

func (u *ui) home() {
	p := u.p
	u.rect(rectF{0, 0, u.w, u.h}, wallpapers[p.c.Wallpaper])
	u.label(24, 48, p.c.Date, 2, white).annotate("TEXT", p.c.Date, "home:date")
	top := 110.0
	search := u.h - navH - 64
	cellH := math.Min(100, (search-40-top)/homeRows)
	for cell := 0; cell < homeCols*homeRows; cell++ {
		id, ok := p.c.Home[cell]
		if !ok {
			continue
		}
		a, _ := p.c.App(id)
		row, col := cell/homeCols, cell%homeCols
		u.appIcon(a, float64(col)*90+45, top+float64(row)*cellH+30, 24, white)
	}
	// A chevron hints at the app drawer, as Pixel launchers do.
	cy := search - 22
	u.add(rectF{170, cy - 4, 20, 10}, func(c *canvas) {
		c.line(170, cy+5, 180, cy-4, 2.5, white)
		c.line(180, cy-4, 190, cy+5, 2.5, white)
	}).annotate("ICON_V_UPWARD", "", "home:drawer")
	bar := rectF{16, search, 328, 48}
	u.roundRect(bar, 24, rgb(0xffffff)).onTap(func() {
		p.launch("browser")
		p.focus = "browser.url"
	})
	u.magnifier(40, search+24, rgb(0x5f6368)).annotate("ICON_MAGNIFYING_GLASS", "", "home:search")
	u.label(60, search+14, "Search the web", 1.5, rgb(0x5f6368)).annotate("TEXT", "Search the web", "home:searchtext")
}

func (u *ui) magnifier(cx, cy float64, col color.RGBA) *node {
	return u.add(rectF{cx - 9, cy - 9, 18, 18}, func(c *canvas) {
		c.disc(cx-2, cy-2, 7, 4.5, col)
		c.line(cx+2.5, cy+2.5, cx+8, cy+8, 3, col)
	})
}

// field draws a text field; tapping it focuses it, and a focused non-empty
// field shows a clear button.
func (u *ui) field(r rectF, id, hint string) {
	p := u.p
	th := u.th
	focused := p.focus == id
	val := p.fields[id]
	if focused {
		u.roundRect(rectF{r.x - 2, r.y - 2, r.w + 4, r.h + 4}, r.h/2+2, th.primary)
	}
	u.roundRect(r, r.h/2, th.field).onTap(func() { p.focus = id })
	u.magnifier(r.x+22, r.y+r.h/2, th.sub).annotate("ICON_MAGNIFYING_GLASS", "", "fieldicon:"+id)
	tx, ty := r.x+44, r.y+(r.h-glyphH*1.5)/2
	maxW := r.w - 44 - 40
	if val == "" {
		u.label(tx, ty, fit(hint, maxW, 1.5), 1.5, th.sub).annotate("TEXT", hint, "field:"+id)
	} else {
		s := val
		if textWidth(s, 1.5) > maxW { // show the end of long input, like a real field
			rs := []rune(s)
			s = string(rs[len(rs)-int(maxW/(glyphW*1.5)):])
		}
		u.label(tx, ty, s, 1.5, th.text).annotate("TEXT", val, "field:"+id)
		tx += textWidth(s, 1.5)
	}
	if focused {
		cx := tx + 1
		u.add(rectF{cx, ty - 2, 2, glyphH*1.5 + 4}, func(c *canvas) {
			if p.drawn.cursor { // blinks when animated
				c.fill(rectF{cx, ty - 2, 2, glyphH*1.5 + 4}, th.primary)
			}
		})
		if val != "" {
			x, y := r.x+r.w-22, r.y+r.h/2
			u.add(rectF{x - 8, y - 8, 16, 16}, func(c *canvas) {
				c.line(x-6, y-6, x+6, y+6, 2.5, th.sub)
				c.line(x-6, y+6, x+6, y-6, 2.5, th.sub)
			}).annotate("ICON_X", "", "clear:"+id)
			u.hit(rectF{x - 20, r.y, 40, r.h}, func() { p.fields[id] = "" })
		}
	}
}

// viewport sets up a scrolling region for the top page and returns the y
// at which content starts (already shifted by the scroll offset).
func (u *ui) viewport(t *page, r rectF, contentH float64) float64 {
	t.max = math.Max(0, contentH-r.h)
	if t.scroll > t.max {
		t.scroll = t.max
	}
	u.clip = r
	return r.y - t.scroll
}

func (u *ui) drawer(t *page) {
	p, th := u.p, u.th
	u.rect(rectF{0, 0, u.w, u.h}, th.surface)
	u.field(rectF{16, 36, 328, 44}, "drawer.search", "Search apps")
	q := strings.ToLower(p.fields["drawer.search"])
	var apps []App
	for _, a := range p.c.Apps {
		if strings.Contains(strings.ToLower(a.Label), q) {
			apps = append(apps, a)
		}
	}
	vp := rectF{0, 92, u.w, u.h - navH - 92}
	rows := (len(apps) + homeCols - 1) / homeCols
	y0 := u.viewport(t, vp, float64(rows)*96+16)
	for i, a := range apps {
		row, col := i/homeCols, i%homeCols
		u.appIcon(a, float64(col)*90+45, y0+16+float64(row)*96+26, 24, th.text)
	}
	u.clip = rectF{}
	if len(apps) == 0 {
		u.centered(u.w/2, 140, "No apps found", 1.5, th.sub).annotate("TEXT", "No apps found", "drawer:empty")
	}
}

func (u *ui) recents() {
	p := u.p
	u.rect(rectF{0, 0, u.w, u.h}, rgb(0x2b2b2b))
	if len(p.recents) == 0 {
		u.centered(u.w/2, u.h/2-10, "No recent items", 1.5, white).annotate("TEXT", "No recent items", "recents:empty")
		return
	}
	for i, id := range p.recents {
		if i == 4 {
			break
		}
		a, _ := p.c.App(id)
		y := 48 + float64(i)*130
		id := id
		u.roundRect(rectF{40, y, 280, 116}, 12, u.th.surface).onTap(func() { p.launch(id) })
		u.add(rectF{40, y, 280, 36}, func(c *canvas) {
			c.round(rectF{40, y, 280, 36}, 12, a.color)
			c.fill(rectF{40, y + 18, 280, 18}, a.color)
		})
		u.label(56, y+9, a.Label, 1.5, white).annotate("TEXT", a.Label, "recent:"+id)
		u.label(56, y+56, "Recently used", 1, u.th.sub)
	}
	u.centered(u.w/2, u.h-navH-40, "Clear all", 1.5, white).annotate("TEXT", "Clear all", "recents:clear").onTap(func() { p.recents = nil })
}

// titleBar draws an app's bar; with back it shows a back arrow.
func (u *ui) titleBar(a App, title string, back bool) {
	p := u.p
	u.rect(rectF{0, 0, u.w, statusH + barH}, a.color)
	x := 16.0
	if back {
		y := statusH + barH/2
		u.add(rectF{14, y - 10, 22, 20}, func(c *canvas) {
			c.line(16, y, 34, y, 3, white)
			c.line(16, y, 25, y-9, 3, white)
			c.line(16, y, 25, y+9, 3, white)
		}).annotate("ICON_ARROW_BACKWARD", "", "bar:back")
		u.hit(rectF{0, statusH, 52, barH}, func() { p.back() })
		x = 56
	}
	title = fit(title, u.w-x-16, 2)
	u.label(x, statusH+(barH-26)/2, title, 2, white).annotate("TEXT", title, "bar:title")
}

func (u *ui) app(t *page, a App) {
	u.rect(rectF{0, 0, u.w, u.h}, u.th.bg)
	switch {
	case t.view == "detail":
		u.detail(t, a)
	case a.ID == "settings":
		u.settings(t, a)
	case a.ID == "clock":
		u.clock(t, a)
	case a.ID == "browser":
		u.browser(t, a)
	case a.ID == "calculator":
		u.calculator(a)
	case a.ID == "camera":
		u.camera()
	case a.ID == "gallery":
		u.gallery(a)
	case a.ID == "weather":
		u.weather(a)
	default:
		u.list(t, a)
	}
}

func avatarColor(s string) color.RGBA {
	return wallpapers[hash64(s)%uint64(len(wallpapers))]
}

func (u *ui) list(t *page, a App) {
	p, th := u.p, u.th
	u.titleBar(a, a.Label, false)
	top := statusH + barH
	if a.Search {
		u.field(rectF{12, top + 8, 336, 44}, a.ID+".search", "Search "+strings.ToLower(a.Label))
		top += 60
	}
	u.spin(rectF{u.w - 56, statusH + 8, 40, 40}, white) // syncing
	items := p.c.Items[a.ID]
	idx := p.filtered(a.ID)
	vp := rectF{0, top, u.w, u.h - navH - top}
	y := u.viewport(t, vp, float64(len(idx))*rowH)
	for _, i := range idx {
		it, i := items[i], i
		open := func() { p.push(&page{app: a.ID, view: "detail", item: i}) }
		if y+rowH > vp.y && y < vp.y+vp.h {
			ry := y
			u.rect(rectF{0, ry, u.w, rowH}, th.surface).onTap(open)
			ac := avatarColor(it.Title)
			letter := it.Title[:1]
			u.add(rectF{16, ry + 12, 40, 40}, func(c *canvas) {
				c.disc(36, ry+32, 20, 0, ac)
				c.text(36-glyphW*0.75, ry+32-glyphH*0.75, letter, 1.5, white)
			})
			title := fit(it.Title, u.w-84, 1.5)
			u.label(68, ry+12, title, 1.5, th.text).annotate("TEXT", title, fmt.Sprintf("item:%s:%d", a.ID, i))
			sub := fit(it.Sub, u.w-84, 1)
			u.label(68, ry+38, sub, 1, th.sub).annotate("TEXT", sub, fmt.Sprintf("sub:%s:%d", a.ID, i))
			u.rect(rectF{68, ry + rowH - 1, u.w - 68, 1}, th.divider)
		}
		y += rowH
	}
	u.clip = rectF{}
	if len(idx) == 0 {
		u.centered(u.w/2, top+40, "No results", 1.5, th.sub).annotate("TEXT", "No results", "list:empty")
	}
}

func (u *ui) detail(t *page, a App) {
	th := u.th
	it := u.p.c.Items[a.ID][t.item]
	u.titleBar(a, it.Title, true)
	cy := statusH + barH + 80
	letter := it.Title[:1]
	ac := avatarColor(it.Title)
	u.add(rectF{u.w/2 - 40, cy - 40, 80, 80}, func(c *canvas) {
		c.disc(u.w/2, cy, 40, 0, ac)
		c.text(u.w/2-glyphW*2, cy-glyphH*2, letter, 4, white)
	})
	title := fit(it.Title, u.w-32, 2)
	u.centered(u.w/2, cy+56, title, 2, th.text).annotate("TEXT", title, fmt.Sprintf("detail:%s:%d", a.ID, t.item))
	y := cy + 110
	for i, line := range append([]string{it.Sub}, it.Body...) {
		l := fit(line, u.w-48, 1.5)
		u.label(24, y, l, 1.5, th.text).annotate("TEXT", l, fmt.Sprintf("body:%d", i))
		y += 36
	}
}

var settingPageLines = map[string][]string{
	"network":       {"Internet", "Calls & SMS", "Data saver", "VPN"},
	"devices":       {"Pair new device", "Previously connected", "Connection preferences"},
	"apps":          {"Recently opened apps", "Default apps", "Screen time", "Unused apps"},
	"notifications": {"App notifications", "Notification history", "Lock screen"},
	"battery":       {"Battery usage", "Battery percentage", "Adaptive battery"},
	"storage":       {"System", "Apps", "Images", "Documents & other"},
	"sound":         {"Media volume", "Call volume", "Ring volume", "Vibration"},
	"display":       {"Brightness level", "Screen timeout", "Font size", "Screen saver"},
	"wallpaper":     {"Change wallpaper", "Color palette", "App grid"},
	"accessibility": {"Text and display", "TalkBack", "Magnification", "Color correction"},
	"security":      {"Screen lock", "Face unlock", "App permissions", "Privacy dashboard"},
	"accounts":      {"Add account", "Automatically sync app data"},
	"system":        {"Languages", "Gestures", "Date & time", "Reset options"},
	"about":         {"Device name", "Phone number", "Android version", "Build number"},
}

func (u *ui) settings(t *page, a App) {
	p, th := u.p, u.th
	if t.view == "page" {
		row := p.c.Settings[t.item]
		u.titleBar(a, row.Label, true)
		y := statusH + barH + 16
		for i, l := range settingPageLines[row.ID] {
			u.rect(rectF{0, y, u.w, setRowH}, th.surface)
			u.label(20, y+18, l, 1.5, th.text).annotate("TEXT", l, fmt.Sprintf("pageline:%d", i))
			u.rect(rectF{20, y + setRowH - 1, u.w - 20, 1}, th.divider)
			y += setRowH
		}
		return
	}
	u.titleBar(a, "Settings", false)
	top := statusH + barH
	vp := rectF{0, top, u.w, u.h - navH - top}
	y := u.viewport(t, vp, float64(len(p.c.Settings))*setRowH+8)
	for i, row := range p.c.Settings {
		i, row, ry := i, row, y
		y += setRowH
		if ry+setRowH <= vp.y || ry >= vp.y+vp.h {
			continue
		}
		act := func() { p.push(&page{app: "settings", view: "page", item: i}) }
		if row.Switch {
			act = func() { p.settings[row.ID] = !p.settings[row.ID] }
		}
		u.rect(rectF{0, ry, u.w, setRowH}, th.surface).onTap(act)
		u.label(20, ry+18, row.Label, 1.5, th.text).annotate("TEXT", row.Label, "setting:"+row.ID)
		if row.Switch {
			u.toggle(300, ry+18, row.ID)
		} else {
			u.label(330, ry+18, ">", 1.5, th.sub)
		}
		u.rect(rectF{20, ry + setRowH - 1, u.w - 20, 1}, th.divider)
	}
	u.clip = rectF{}
}

// spin puts a progress spinner at r when the phone animates.
func (u *ui) spin(r rectF, col color.RGBA) {
	if u.p.animate {
		u.spinner, u.spinnerCol = r, col
	}
}

// toggle draws a switch with its top-left at (x, y); it is 40x20 dp.
func (u *ui) toggle(x, y float64, id string) {
	p, th := u.p, u.th
	on := p.settings[id]
	track, knob, kx := rgb(0xdadce0), rgb(0x80868b), x+10
	typ := "ICON_TOGGLE_OFF"
	if on {
		track, knob, kx, typ = rgb(0x8ab4f8), th.primary, x+30, "ICON_TOGGLE_ON"
		if th.dark {
			track, knob = rgb(0x3c5a8a), rgb(0x8ab4f8)
		}
	} else if th.dark {
		track, knob = rgb(0x3c4043), rgb(0x9aa0a6)
	}
	u.add(rectF{x, y, 40, 20}, func(c *canvas) {
		c.round(rectF{x, y + 3, 40, 14}, 7, track)
		c.disc(kx, y+10, 10, 0, knob)
	}).annotate(typ, "", "toggle:"+id).onTap(func() { p.settings[id] = !p.settings[id] })
}

func (u *ui) clock(t *page, a App) {
	p, th := u.p, u.th
	u.titleBar(a, "Clock", false)
	y := statusH + barH + 24
	u.centered(u.w/2, y, p.c.Clock, 5, th.text).annotate("TEXT", p.c.Clock, "clock:time")
	u.centered(u.w/2, y+76, p.c.Date, 1.5, th.sub).annotate("TEXT", p.c.Date, "clock:date")
	y += 120
	u.label(20, y, "Alarms", 1.5, th.primary).annotate("TEXT", "Alarms", "clock:alarms")
	y += 32
	vp := rectF{0, y, u.w, u.h - navH - y}
	y = u.viewport(t, vp, float64(len(p.c.Alarms))*rowH)
	defer func() { u.clip = rectF{} }()
	for _, al := range p.c.Alarms {
		al := al
		u.rect(rectF{0, y, u.w, rowH}, th.surface).onTap(func() { p.settings[al.ID] = !p.settings[al.ID] })
		u.label(20, y+10, al.Label, 2, th.text).annotate("TEXT", al.Label, "setting:"+al.ID)
		days := []string{"Every day", "Weekdays", "Weekends", "Once"}[hash64(al.ID)%4]
		u.label(20, y+40, days, 1, th.sub)
		u.toggle(300, y+22, al.ID)
		u.rect(rectF{20, y + rowH - 1, u.w - 20, 1}, th.divider)
		y += rowH
	}
}

var quickLinks = []string{"News", "Sports", "Weather", "Recipes"}

func (u *ui) browser(t *page, a App) {
	p, th := u.p, u.th
	u.rect(rectF{0, 0, u.w, statusH + 64}, a.color)
	u.field(rectF{12, statusH + 10, 336, 44}, "browser.url", "Search or type URL")
	top := statusH + 64
	switch t.view {
	case "main":
		u.centered(u.w/2, top+90, "Browser", 4, a.color).annotate("TEXT", "Browser", "browser:logo")
		for i, l := range quickLinks {
			l := l
			r := rectF{36 + float64(i%2)*150, top + 190 + float64(i/2)*100, 138, 84}
			u.roundRect(r, 12, th.surface).onTap(func() {
				p.history = append(p.history, l)
				p.fields["browser.url"] = l
				p.push(&page{app: "browser", view: "results", query: l})
			})
			u.centered(r.x+r.w/2, r.y+32, l, 1.5, th.text).annotate("TEXT", l, "link:"+l)
		}
	case "results":
		u.label(16, top+16, fit("Results for \""+t.query+"\"", u.w-32, 1.5), 1.5, th.sub).annotate("TEXT", t.query, "results:query")
		vp := rectF{0, top + 48, u.w, u.h - navH - top - 48}
		y := u.viewport(t, vp, 6*100)
		for i, r := range results(t.query) {
			i, ry := i, y
			y += 100
			u.rect(rectF{8, ry + 4, u.w - 16, 92}, th.surface).onTap(func() {
				p.push(&page{app: "browser", view: "web", query: t.query, item: i})
			})
			title := fit(r[0], u.w-40, 1.5)
			u.label(20, ry+14, title, 1.5, th.primary).annotate("TEXT", title, fmt.Sprintf("result:%d", i))
			u.label(20, ry+44, fit(r[1], u.w-40, 1), 1, rgb(0x188038)).annotate("TEXT", r[1], fmt.Sprintf("url:%d", i))
			u.label(20, ry+66, fit(r[2], u.w-40, 1), 1, th.sub)
		}
		u.clip = rectF{}
	case "web":
		r := results(t.query)[t.item]
		u.label(16, top+24, fit(r[0], u.w-32, 2), 2, th.text).annotate("TEXT", r[0], "web:title")
		u.label(16, top+64, fit(r[1], u.w-32, 1), 1, rgb(0x188038)).annotate("TEXT", r[1], "web:url")
		for i := 0; i < 6; i++ {
			u.rect(rectF{16, top + 110 + float64(i)*28, u.w - 32 - float64((i*37)%90), 12}, th.divider)
		}
		u.spin(rectF{u.w/2 - 24, top + 300, 48, 48}, th.primary) // the page keeps loading
	}
}

// results makes the search results page for a query, deterministic in the query.
func results(q string) [][3]string {
	r := newRNG(int64(hash64(strings.ToLower(q))), 7)
	slug := strings.ToLower(strings.Join(strings.Fields(q), "-"))
	if slug == "" {
		slug = "search"
	}
	sites := []string{"wiki", "news", "daily", "guide", "forum", "shop", "blog", "info"}
	suffix := []string{"Wikipedia", "Latest news", "A complete guide", "Everything you need to know", "Top 10 facts", "Reviews", "Official site", "Questions and answers"}
	var out [][3]string
	for i := 0; i < 6; i++ {
		site := r.pick(sites)
		out = append(out, [3]string{q + " - " + r.pick(suffix), "www." + site + ".com/" + slug, "About " + q + " from " + site + "."})
	}
	return out
}

var calcKeys = []string{"C", "(", ")", "/", "7", "8", "9", "*", "4", "5", "6", "-", "1", "2", "3", "+", "0", ".", "<", "="}

func (u *ui) calculator(a App) {
	p, th := u.p, u.th
	u.titleBar(a, "Calculator", false)
	top := statusH + barH
	u.rect(rectF{0, top, u.w, 140}, th.surface)
	disp := p.calc
	if disp == "" {
		disp = "0"
	}
	disp = fit(disp, u.w-32, 3)
	u.label(u.w-16-textWidth(disp, 3), top+60, disp, 3, th.text).annotate("TEXT", disp, "calc:display")
	gy := top + 150
	kh := math.Min(84, (u.h-navH-gy-8)/5)
	for i, k := range calcKeys {
		k := k
		r := rectF{8 + float64(i%4)*86, gy + float64(i/4)*kh, 80, kh - 6}
		col := th.field
		fg := th.text
		if i%4 == 3 || k == "=" {
			col, fg = a.color, white
		}
		u.roundRect(r, 14, col).onTap(func() { p.calcKey(k) })
		u.centered(r.x+r.w/2, r.y+(r.h-26)/2, k, 2, fg).annotate("TEXT", k, "calc:"+k)
	}
}

func (u *ui) camera() {
	u.rect(rectF{0, 0, u.w, u.h}, black)
	u.rect(rectF{0, 80, u.w, u.h - navH - 220}, rgb(0x263238))
	cy := u.h - navH - 70
	u.add(rectF{u.w/2 - 34, cy - 34, 68, 68}, func(c *canvas) {
		c.disc(u.w/2, cy, 34, 28, white)
		c.disc(u.w/2, cy, 24, 0, white)
	}).annotate("ICON_TAKE_PHOTO", "", "camera:shutter")
}

func (u *ui) gallery(a App) {
	u.titleBar(a, "Gallery", false)
	r := newRNG(u.p.c.Seed, 11)
	for i := 0; i < 15; i++ {
		x, y := 4+float64(i%3)*118, statusH+barH+4+float64(i/3)*118
		u.rect(rectF{x, y, 114, 114}, wallpapers[r.intn(len(wallpapers))])
	}
}

func (u *ui) weather(a App) {
	th := u.th
	u.titleBar(a, "Weather", false)
	r := newRNG(u.p.c.Seed, 13)
	temp := fmt.Sprintf("%d C", 5+r.intn(25))
	u.centered(u.w/2, statusH+barH+40, temp, 5, th.text).annotate("TEXT", temp, "weather:temp")
	cond := []string{"Sunny", "Cloudy", "Rain", "Windy"}[r.intn(4)]
	u.centered(u.w/2, statusH+barH+120, cond, 2, th.sub).annotate("TEXT", cond, "weather:cond")
	y := statusH + barH + 180
	for i := 0; i < 5; i++ {
		l := fmt.Sprintf("%s   %d C", weekdays[i], 5+r.intn(25))
		u.label(40, y, l, 1.5, th.text).annotate("TEXT", l, fmt.Sprintf("weather:day%d", i))
		y += 40
	}
}

// keyboard draws the soft keyboard of a focused field; its keys type.
func (u *ui) keyboard() {
	p, th := u.p, u.th
	kb := rectF{0, u.h - navH - 216, u.w, 216}
	u.kb, u.kbStart = kb, len(u.nodes)
	bg, key := rgb(0xe8eaed), rgb(0xffffff)
	if th.dark {
		bg, key = rgb(0x202124), rgb(0x3c4043)
	}
	u.rect(kb, bg).onTap(func() {})
	rows := []string{"qwertyuiop", "asdfghjkl", "zxcvbnm"}
	for ri, row := range rows {
		x0 := []float64{1, 19, 55}[ri]
		for i, ch := range row {
			s := string(ch)
			r := rectF{x0 + float64(i)*36, kb.y + 8 + float64(ri)*52, 34, 46}
			u.roundRect(r, 6, key).onTap(func() { p.typeLocked(s) })
			u.centered(r.x+17, r.y+13, s, 1.5, th.text).annotate("TEXT", s, "key:"+s)
		}
	}
	del := rectF{307, kb.y + 8 + 2*52, 52, 46}
	u.roundRect(del, 6, rgb(0xbdc1c6)).onTap(func() { p.keyLocked(KeyDel) })
	u.centered(del.x+26, del.y+13, "<", 1.5, rgb(0x202124)).annotate("ICON_ARROW_BACKWARD", "", "key:del")
	y := kb.y + 8 + 3*52
	u.roundRect(rectF{1, y, 70, 46}, 6, key).onTap(func() { p.typeLocked(",") })
	u.centered(36, y+13, ",", 1.5, th.text)
	u.roundRect(rectF{73, y, 180, 46}, 6, key).onTap(func() { p.typeLocked(" ") })
	u.roundRect(rectF{255, y, 34, 46}, 6, key).onTap(func() { p.typeLocked(".") })
	u.centered(272, y+13, ".", 1.5, th.text)
	ent := rectF{291, y, 68, 46}
	u.roundRect(ent, 6, th.primary).onTap(func() { p.keyLocked(KeyEnter) })
	u.add(rectF{ent.x + 24, y + 14, 20, 18}, func(c *canvas) {
		c.line(ent.x+44, y+14, ent.x+44, y+26, 2.5, th.onPrimary)
		c.line(ent.x+24, y+26, ent.x+44, y+26, 2.5, th.onPrimary)
		c.poly(th.onPrimary, ent.x+22, y+26, ent.x+30, y+20, ent.x+30, y+32)
	}).annotate("ICON_ARROW_FORWARD", "", "key:enter")
}
