package sim

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for animations.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func animated(seed int64) (*Phone, *fakeClock) {
	c := &fakeClock{t: time.Unix(1700000000, 0)}
	return New(Options{Width: 360, Height: 800, Seed: seed, Animate: true, Now: c.now}), c
}

func shot(t *testing.T, p *Phone) []byte {
	t.Helper()
	b, err := p.Screencap()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dump(t *testing.T, p *Phone) string {
	t.Helper()
	b, err := p.UIAutomatorDump()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAnimationsAtRestDrawTheStillScreen: animations only add what moves;
// a screen with nothing moving renders the bytes of a phone without them.
func TestAnimationsAtRestDrawTheStillScreen(t *testing.T) {
	a, clock := animated(3)
	still := small(3)
	for _, p := range []*Phone{a, still} {
		swipeUp(p)
		tapEl(t, p, "app:settings")
	}
	clock.add(time.Second)
	if !bytes.Equal(shot(t, a), shot(t, still)) {
		t.Fatal("an animated phone at rest differs from a still one")
	}
}

// TestTransitionMovesPixelsAndBounds: a page that opens slides in, in the
// pixels and in the hierarchy's bounds, and stops within 300 ms.
func TestTransitionMovesPixelsAndBounds(t *testing.T) {
	p, clock := animated(3)
	swipeUp(p)
	clock.add(time.Second)
	tapEl(t, p, "app:settings")
	s0, d0 := shot(t, p), dump(t, p)
	clock.add(100 * time.Millisecond)
	s1, d1 := shot(t, p), dump(t, p)
	clock.add(time.Second)
	s2, d2 := shot(t, p), dump(t, p)
	clock.add(time.Second)
	if bytes.Equal(s0, s1) || bytes.Equal(s1, s2) || d0 == d1 || d1 == d2 {
		t.Fatal("the opening page did not move")
	}
	if !bytes.Equal(s2, shot(t, p)) || d2 != dump(t, p) {
		t.Fatal("the page still moves after its transition")
	}
}

// TestCursorAndSpinnerMoveOnlyPixels: a focused field's cursor blinks and a
// list app's spinner turns; neither shows in the hierarchy, as on a phone.
func TestCursorAndSpinnerMoveOnlyPixels(t *testing.T) {
	p, clock := animated(8)
	swipeUp(p)
	tapEl(t, p, "app:contacts")
	tapEl(t, p, "field:contacts.search")
	clock.add(time.Second)
	seen := map[string]bool{}
	d := dump(t, p)
	for i := 0; i < 12; i++ {
		seen[string(shot(t, p))] = true
		if dump(t, p) != d {
			t.Fatalf("the hierarchy changed at %d00 ms with nothing but the cursor and spinner moving", i)
		}
		clock.add(100 * time.Millisecond)
	}
	if len(seen) < 10 {
		t.Fatalf("%d distinct screens in 12 captures 100 ms apart, want the spinner turning", len(seen))
	}
	if !strings.Contains(d, `class="android.widget.ProgressBar"`) || !strings.Contains(d, `class="android.widget.EditText" package="com.autoui.sim.contacts" content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="true" focused="true"`) {
		t.Fatalf("the dump lacks the spinner or the focused field: %s", d)
	}
}

// TestUIDumpDescribesTheScreen: the dump is uiautomator's XML, its
// elements those of Annotations with their state.
func TestUIDumpDescribesTheScreen(t *testing.T) {
	p := small(3)
	swipeUp(p)
	tapEl(t, p, "app:settings")
	d := dump(t, p)
	for _, want := range []string{`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0"><node index="0"`, `class="android.widget.Switch"`, `checked="true"`, `resource-id="com.autoui.sim:id/bar_title"`, `bounds="[0,0][360,800]"`} {
		if !strings.Contains(d, want) {
			t.Errorf("dump lacks %q", want)
		}
	}
	if strings.Contains(d, "ProgressBar") {
		t.Error("a still phone shows a spinner")
	}
}
