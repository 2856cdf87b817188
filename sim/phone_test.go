package sim

import (
	"bytes"
	"image/png"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func small(seed int64) *Phone { return New(Options{Width: 360, Height: 800, Seed: seed}) }

// find returns the element with the given id.
func find(t *testing.T, p *Phone, id string) Element {
	t.Helper()
	for _, e := range p.Annotations() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no element %q on screen %+v", id, p.Screen())
	return Element{}
}

func has(p *Phone, id string) bool {
	for _, e := range p.Annotations() {
		if e.ID == id {
			return true
		}
	}
	return false
}

// tapEl taps an element's centre in pixels.
func tapEl(t *testing.T, p *Phone, id string) {
	t.Helper()
	c := find(t, p, id).Center()
	w, h := p.Size()
	p.Tap(int(c.X*float64(w)), int(c.Y*float64(h)))
}

func swipeUp(p *Phone) { w, h := p.Size(); p.Swipe(w/2, h*8/10, w/2, h*2/10, 300) }

func swipeDown(p *Phone) { w, h := p.Size(); p.Swipe(w/2, h*2/10, w/2, h*8/10, 300) }

// script drives a phone through a fixed mix of every input kind.
func script(t *testing.T, p *Phone) [][]byte {
	var shots [][]byte
	snap := func() {
		b, err := p.Screencap()
		if err != nil {
			t.Fatal(err)
		}
		shots = append(shots, b)
	}
	snap()
	swipeUp(p)
	snap()
	tapEl(t, p, "app:contacts")
	tapEl(t, p, "field:contacts.search")
	p.Text("a")
	snap()
	p.KeyEvent(KeyEnter)
	swipeUp(p)
	snap()
	p.KeyEvent(KeyHome)
	swipeUp(p)
	tapEl(t, p, "app:settings")
	swipeUp(p)
	snap()
	return shots
}

func TestRenderingIsDeterministic(t *testing.T) {
	a, b := script(t, small(5)), script(t, small(5))
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("screen %d differs between two runs", i)
		}
	}
	c := script(t, small(6))
	if bytes.Equal(a[0], c[0]) {
		t.Error("seeds 5 and 6 render the same home screen")
	}
	// Repeated screencaps of one state are identical too.
	p := small(5)
	x, _ := p.Screencap()
	p.Tap(1, 790) // nav bar back on home: no change of state
	y, _ := p.Screencap()
	if !bytes.Equal(x, y) {
		t.Error("BACK on home changed the screen")
	}
}

func TestPNGDecodesToImage(t *testing.T) {
	p := small(9)
	tapEl(t, p, "home:search") // browser with keyboard: many colours
	b, err := p.Screencap()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := p.Image()
	if img.Bounds() != want.Bounds() || img.Bounds().Dx() != 360 || img.Bounds().Dy() != 800 {
		t.Fatalf("bounds %v, want %v", img.Bounds(), want.Bounds())
	}
	for y := 0; y < 800; y += 7 {
		for x := 0; x < 360; x += 5 {
			r1, g1, b1, a1 := img.At(x, y).RGBA()
			r2, g2, b2, a2 := want.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 || a1 != 0xffff {
				t.Fatalf("pixel %d,%d: png %v image %v", x, y, img.At(x, y), want.At(x, y))
			}
		}
	}
}

func TestDefaultSize(t *testing.T) {
	p := New(Options{Seed: 1})
	if w, h := p.Size(); w != 1080 || h != 2400 {
		t.Fatalf("size %dx%d", w, h)
	}
	if img := p.Image(); img.Bounds().Dx() != 1080 {
		t.Fatal("image size")
	}
}

func TestNavigation(t *testing.T) {
	p := small(2)
	if s := p.Screen(); s.View != "home" || s.Depth != 1 {
		t.Fatalf("start %+v", s)
	}
	swipeUp(p)
	if p.Screen().View != "drawer" {
		t.Fatalf("swipe up on home: %+v", p.Screen())
	}
	swipeDown(p)
	if p.Screen().View != "home" {
		t.Fatalf("swipe down in drawer: %+v", p.Screen())
	}
	swipeUp(p)
	tapEl(t, p, "label:notes") // labels launch too
	if s := p.Screen(); s.App != "notes" || s.View != "main" || s.Depth != 2 {
		t.Fatalf("tap Notes: %+v", s)
	}
	tapEl(t, p, "item:notes:0")
	if s := p.Screen(); s.View != "detail" || s.Item != 0 {
		t.Fatalf("tap note 0: %+v", s)
	}
	tapEl(t, p, "bar:back")
	if s := p.Screen(); s.View != "main" {
		t.Fatalf("bar back: %+v", s)
	}
	p.KeyEvent(KeyBack)
	if s := p.Screen(); s.View != "home" {
		t.Fatalf("BACK from app root: %+v", s)
	}
	p.KeyEvent(KeyBack) // nothing below home
	if s := p.Screen(); s.View != "home" || s.Depth != 1 {
		t.Fatalf("BACK on home: %+v", s)
	}
	swipeUp(p)
	tapEl(t, p, "app:settings")
	tapEl(t, p, "nav:home")
	if s := p.Screen(); s.View != "home" {
		t.Fatalf("nav home: %+v", s)
	}
	tapEl(t, p, "nav:recents")
	if s := p.Screen(); s.View != "recents" {
		t.Fatalf("recents: %+v", s)
	}
	tapEl(t, p, "recent:notes") // most recent first: settings, notes
	if s := p.Screen(); s.App != "notes" {
		t.Fatalf("recent card: %+v", s)
	}
	tapEl(t, p, "nav:back")
	if s := p.Screen(); s.View != "home" {
		t.Fatalf("nav back: %+v", s)
	}
}

func TestHomeIconsOpenApps(t *testing.T) {
	for seed := int64(0); seed < 5; seed++ {
		p := small(seed)
		for _, id := range p.Content().Home {
			tapEl(t, p, "app:"+id)
			if s := p.Screen(); s.App != id {
				t.Fatalf("seed %d: tap %s opened %+v", seed, id, s)
			}
			p.KeyEvent(KeyHome)
		}
	}
}

func TestToggles(t *testing.T) {
	p := small(3)
	swipeUp(p)
	tapEl(t, p, "app:settings")
	var id string
	for _, e := range p.Annotations() {
		if strings.HasPrefix(e.ID, "toggle:") && !e.Partial {
			id = strings.TrimPrefix(e.ID, "toggle:")
			break
		}
	}
	before := p.Setting(id)
	tapEl(t, p, "toggle:"+id)
	if p.Setting(id) == before {
		t.Fatalf("tapping the switch did not flip %s", id)
	}
	tapEl(t, p, "setting:"+id) // the whole row toggles
	if p.Setting(id) != before {
		t.Fatalf("tapping the row did not flip %s back", id)
	}
	// Dark theme changes the rendering.
	light, _ := p.Screencap()
	p.mu.Lock()
	p.settings["dark_theme"] = !p.settings["dark_theme"]
	p.changed()
	p.mu.Unlock()
	dark, _ := p.Screencap()
	if bytes.Equal(light, dark) {
		t.Error("dark theme renders the same")
	}
}

func TestScrolling(t *testing.T) {
	p := small(4)
	swipeUp(p)
	tapEl(t, p, "app:settings")
	s := p.Screen()
	if s.Scroll != 0 || s.Max <= 0 {
		t.Fatalf("settings should scroll: %+v", s)
	}
	last := "setting:" + p.Content().Settings[len(p.Content().Settings)-1].ID
	if has(p, last) {
		t.Fatal("last row visible before scrolling")
	}
	swipeUp(p)
	s = p.Screen()
	if want := 0.6 * 800; s.Scroll != want && s.Scroll != s.Max {
		t.Fatalf("one swipe scrolled %v, want %v (the finger's travel)", s.Scroll, want)
	}
	swipeUp(p)
	swipeUp(p)
	if s := p.Screen(); s.Scroll != s.Max {
		t.Fatalf("scroll not clamped at the end: %+v", s)
	}
	if !has(p, last) {
		t.Fatal("last row not visible at the end")
	}
	for _, e := range p.Annotations() {
		b := e.Box
		if b.Y < 0 || b.X < 0 || b.Y+b.H > 1.0001 || b.X+b.W > 1.0001 || b.H <= 0 || b.W <= 0 {
			t.Fatalf("box out of the screen: %+v", e)
		}
	}
	for i := 0; i < 5; i++ {
		swipeDown(p)
	}
	if s := p.Screen(); s.Scroll != 0 {
		t.Fatalf("scroll not clamped at 0: %+v", s)
	}
	w, h := p.Size()
	p.Swipe(w/2, h/2, w/2+2, h/2+2, 50)    // tiny swipe = tap
	p.Swipe(w*8/10, h/2, w*2/10, h/2, 300) // horizontal: nothing
	if s := p.Screen(); s.Scroll != 0 {
		t.Fatalf("horizontal swipe scrolled: %+v", s)
	}
}

func TestTypingAndSearch(t *testing.T) {
	p := small(8)
	swipeUp(p)
	tapEl(t, p, "app:contacts")
	p.Text("zzz") // no focus: goes nowhere
	if p.Field("contacts.search") != "" {
		t.Fatal("text without focus was typed")
	}
	n := len(p.Filtered("contacts"))
	tapEl(t, p, "field:contacts.search")
	if p.Focus() != "contacts.search" || !has(p, "key:q") {
		t.Fatalf("focus %q; keyboard shown %v", p.Focus(), has(p, "key:q"))
	}
	name := p.Content().Items["contacts"][3].Title
	first := strings.Fields(name)[0]
	p.Text(first[:2])
	tapEl(t, p, "key:"+strings.ToLower(first[2:3])) // the soft keyboard types too
	p.Text(first[3:])
	if got := p.Field("contacts.search"); !strings.EqualFold(got, first) {
		t.Fatalf("field %q, want %q", got, first)
	}
	f := p.Filtered("contacts")
	if len(f) == 0 || len(f) >= n {
		t.Fatalf("filter %q kept %d of %d", first, len(f), n)
	}
	if !has(p, "item:contacts:3") {
		t.Fatal("match not shown")
	}
	p.KeyEvent(KeyDel)
	if got := p.Field("contacts.search"); len(got) != len(first)-1 {
		t.Fatalf("DEL left %q", got)
	}
	tapEl(t, p, "clear:contacts.search")
	if p.Field("contacts.search") != "" || len(p.Filtered("contacts")) != n {
		t.Fatal("clear did not reset the search")
	}
	p.KeyEvent(KeyBack) // hides the keyboard, stays in the app
	if p.Focus() != "" || p.Screen().App != "contacts" || has(p, "key:q") {
		t.Fatalf("BACK with keyboard: focus %q screen %+v", p.Focus(), p.Screen())
	}
}

func TestBrowserSearch(t *testing.T) {
	p := small(1)
	tapEl(t, p, "home:search")
	if s := p.Screen(); s.App != "browser" || p.Focus() != "browser.url" {
		t.Fatalf("home search bar: %+v focus %q", s, p.Focus())
	}
	p.Text("weather in lima")
	p.KeyEvent(KeyEnter)
	s := p.Screen()
	if s.View != "results" || s.Query != "weather in lima" || p.Focus() != "" {
		t.Fatalf("after ENTER: %+v", s)
	}
	if h := p.BrowserHistory(); len(h) != 1 || h[0] != "weather in lima" {
		t.Fatalf("history %q", h)
	}
	if e := find(t, p, "result:0"); !strings.Contains(e.Text, "weather in lima") {
		t.Fatalf("result 0 %q", e.Text)
	}
	tapEl(t, p, "result:2")
	if s := p.Screen(); s.View != "web" || s.Item != 2 {
		t.Fatalf("open result: %+v", s)
	}
	p.KeyEvent(KeyBack)
	p.KeyEvent(KeyBack)
	if s := p.Screen(); s.App != "browser" || s.View != "main" {
		t.Fatalf("back twice: %+v", s)
	}
}

func TestCalculator(t *testing.T) {
	p := small(1)
	p.mu.Lock()
	p.launch("calculator")
	p.changed()
	p.mu.Unlock()
	for _, k := range []string{"1", "2", "+", "3", "*", "4", "="} {
		tapEl(t, p, "calc:"+k)
	}
	if got := p.Calculator(); got != "24" {
		t.Fatalf("12+3*4 = %q", got)
	}
	for _, c := range []struct{ in, want string }{{"(1+2)*3", "9"}, {"7/2", "3.5"}, {"1/0", "Error"}, {"2-5", "-3"}, {"1+", "Error"}} {
		p.mu.Lock()
		p.calc = c.in
		p.calcKey("=")
		got := p.calc
		p.mu.Unlock()
		if got != c.want {
			t.Errorf("%s = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAnnotations(t *testing.T) {
	p := small(0)
	els := p.Annotations()
	types := map[string]bool{}
	for _, e := range els {
		types[e.Type] = true
	}
	for _, want := range []string{"TEXT", "ICON_V_BACKWARD", "ICON_NAV_BAR_CIRCLE", "ICON_NAV_BAR_RECT"} {
		if !types[want] {
			t.Errorf("home has no %s element", want)
		}
	}
	clock := find(t, p, "status:clock")
	if clock.Text != p.Content().Clock || clock.Box.Y != 6.0/800 {
		t.Errorf("clock element %+v", clock)
	}
	// The same layout at another resolution gives the same normalized boxes.
	big := New(Options{Width: 1080, Height: 2400, Seed: 0}).Annotations()
	if len(big) != len(els) {
		t.Fatalf("%d elements at 1080x2400, %d at 360x800", len(big), len(els))
	}
	for i := range els {
		if big[i].ID != els[i].ID || big[i].Box != els[i].Box {
			t.Fatalf("element %d: %+v vs %+v", i, big[i], els[i])
		}
	}
	// Elements under the keyboard are not reported.
	swipeUp(p)
	tapEl(t, p, "app:contacts")
	tapEl(t, p, "field:contacts.search")
	for _, e := range p.Annotations() {
		if strings.HasPrefix(e.ID, "item:") && e.Box.Y+e.Box.H > float32((800-48-216)/800.0)+1e-6 {
			t.Fatalf("element under the keyboard: %+v", e)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	p := small(3)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				switch (i + j) % 4 {
				case 0:
					p.Tap(180, 300)
				case 1:
					p.KeyEvent(KeyHome)
				case 2:
					if _, err := p.Screencap(); err != nil {
						t.Error(err)
					}
				default:
					_ = p.Annotations()
				}
			}
		}(i)
	}
	wg.Wait()
}

// FuzzInput checks that any input sequence keeps the phone consistent:
// no panic, boxes on screen, and identical replays render identically.
func FuzzInput(f *testing.F) {
	f.Add(int64(0), []byte{0, 10, 20, 1, 30, 40, 2, 3, 4})
	f.Add(int64(7), []byte{1, 90, 10, 0, 50, 50, 2, 0, 40, 30, 3, 1})
	f.Add(int64(3), []byte{0, 45, 20, 0, 20, 30, 5, 2, 6})
	f.Fuzz(func(t *testing.T, seed int64, prog []byte) {
		if len(prog) > 60 {
			prog = prog[:60]
		}
		run := func() []byte {
			p := New(Options{Width: 180, Height: 400, Seed: seed})
			for i := 0; i+2 < len(prog); i += 3 {
				op, a, b := prog[i]%7, int(prog[i+1])%180, int(prog[i+2])*400/256
				switch op {
				case 0:
					p.Tap(a, b)
				case 1:
					p.Swipe(a, b, a, 400-b, 200)
				case 2:
					p.Text(string(rune('a' + a%26)))
				case 3:
					p.KeyEvent([]int{KeyHome, KeyBack, KeyEnter, KeyDel, KeyAppSwitch}[a%5])
				default:
					for _, e := range p.Annotations() {
						if e.Box.Y < 0 || e.Box.X < 0 || e.Box.Y+e.Box.H > 1.0001 || e.Box.X+e.Box.W > 1.0001 {
							t.Fatalf("box off screen %+v", e)
						}
					}
				}
			}
			b, err := p.Screencap()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if !bytes.Equal(run(), run()) {
			t.Fatal("replay rendered differently")
		}
	})
}

func BenchmarkScreencap(b *testing.B) {
	for _, sz := range []Options{{Width: 1080, Height: 2400}, {Width: 360, Height: 800}} {
		b.Run(fmtSize(sz), func(b *testing.B) {
			p := New(sz)
			for i := 0; i < b.N; i++ {
				p.mu.Lock()
				p.changed()
				p.mu.Unlock()
				if _, err := p.Screencap(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func fmtSize(o Options) string { return strconv.Itoa(o.Width) + "x" + strconv.Itoa(o.Height) }
