package device

import (
	"context"
	"fmt"
	"image/color"
	"strings"
	"testing"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/screendiff"
)

var blue = color.RGBA{40, 90, 200, 255}

// TestOrientationEveryAndroid reads the size and rotation of a fake device
// speaking each Android version's dumpsys through the real adb server, in
// portrait and landscape.
func TestOrientationEveryAndroid(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	for v := fakephone.MinAndroid; v <= fakephone.MaxAndroid; v++ {
		for _, o := range []int{0, 1, 2, 3} {
			t.Run(fmt.Sprintf("android_%d_rotation_%d", v, o), func(t *testing.T) {
				w, h := 108, 240
				if o%2 == 1 {
					w, h = h, w
				}
				fake := r.add(t, fakephone.Options{Android: v, Orientation: o, Phone: phonetest.Recording(t, w, h)})
				d := r.connect(t, Options{Serial: fake.Serial()})
				got, err := d.Orientation(ctx)
				if err != nil || got != o {
					t.Fatalf("Orientation = %d, %v; want %d", got, err, o)
				}
				if _, err := d.Screenshot(ctx); err != nil {
					t.Fatal(err)
				}
				gw, gh, err := d.ScreenSize(ctx)
				if err != nil || gw != w || gh != h {
					t.Fatalf("ScreenSize = %d x %d, %v; want %d x %d", gw, gh, err, w, h)
				}
				sdk, err := d.Property(ctx, "ro.build.version.sdk")
				if err != nil || sdk != fmt.Sprint(fakephone.SDKLevel(v)) {
					t.Fatalf("sdk = %q, %v", sdk, err)
				}
			})
		}
	}
}

// TestEachAndroidPrintsItsOwnFormat pins which rotation line each version
// prints, so the parser is tested against what real phones say.
func TestEachAndroidPrintsItsOwnFormat(t *testing.T) {
	r := newRig(t)
	want := map[int]string{
		10: "SurfaceOrientation: 1", 13: "SurfaceOrientation: 1",
		14: "InputDeviceOrientation: 1", 15: "InputDeviceOrientation: Rotation90", 16: "InputDeviceOrientation: Rotation90",
	}
	for v, line := range want {
		fake := r.add(t, fakephone.Options{Android: v, Orientation: 1})
		d := r.connect(t, Options{Serial: fake.Serial()})
		out, err := d.readShellText(context.Background(), "dumpsys input")
		if err != nil || !strings.Contains(out, line) || !strings.Contains(out, "Viewport INTERNAL:") {
			t.Errorf("Android %d: dumpsys input lacks %q (%v)", v, line, err)
		}
		for _, other := range want {
			if other != line && strings.Contains(out, other) {
				t.Errorf("Android %d prints %q too", v, other)
			}
		}
	}
}

// countShell counts the command lines sent that start with prefix.
func countShell(fake *fakephone.Device, prefix string) int {
	n := 0
	for _, sc := range fake.Shell() {
		if strings.HasPrefix(sc.Line, prefix) {
			n++
		}
	}
	return n
}

// TestScreenSizeAsksDumpsysOnlyWhenTheScreenTurns: one dumpsys for many
// steps of the same shape, one more when the screenshot turns landscape.
func TestScreenSizeAsksDumpsysOnlyWhenTheScreenTurns(t *testing.T) {
	ctx := context.Background()
	phone := phonetest.Recording(t, 108, 240)
	fake, d := fakeDevice(t, fakephone.Options{Phone: phone})
	for i := 0; i < 5; i++ {
		if _, err := d.Screenshot(ctx); err != nil {
			t.Fatal(err)
		}
		if w, h, err := d.ScreenSize(ctx); err != nil || w != 108 || h != 240 {
			t.Fatalf("step %d: %d x %d, %v", i, w, h, err)
		}
	}
	if n := countShell(fake, "dumpsys input"); n != 1 {
		t.Fatalf("%d dumpsys for 5 steps of one shape, want 1", n)
	}
	// The phone turns; the fake's dumpsys still says portrait (it was not
	// told), and the screenshot's shape wins.
	if err := phone.SetScreen(fakephone.SolidPNG(240, 108, blue)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Screenshot(ctx); err != nil {
		t.Fatal(err)
	}
	if w, h, err := d.ScreenSize(ctx); err != nil || w != 240 || h != 108 {
		t.Fatalf("after turning: %d x %d, %v; want 240 x 108", w, h, err)
	}
	if n := countShell(fake, "dumpsys input"); n != 2 {
		t.Fatalf("%d dumpsys after one turn, want 2", n)
	}
	if n := countShell(fake, "wm size"); n != 1 {
		t.Fatalf("%d wm size, want 1", n)
	}
}

// TestScreenSizeWithoutOrientation: a ROM whose dumpsys prints no rotation
// at all no longer stops the run; the screenshot's shape decides.
func TestScreenSizeWithoutOrientation(t *testing.T) {
	ctx := context.Background()
	_, d := fakeDevice(t, fakephone.Options{Phone: phonetest.Recording(t, 240, 108), Orientation: 1, HideRotation: true})
	if _, err := d.Orientation(ctx); err == nil {
		t.Fatal("Orientation found a rotation in output without one")
	}
	if _, err := d.Screenshot(ctx); err != nil {
		t.Fatal(err)
	}
	if w, h, err := d.ScreenSize(ctx); err != nil || w != 240 || h != 108 {
		t.Fatalf("ScreenSize = %d x %d, %v; want 240 x 108", w, h, err)
	}
}

// TestCaptureTheDisplayThatIsOn: with a second physical display listed
// first and switched off (a folded phone's inner panel), screencap without
// -d captures it black; autoui captures the display that is on, once asked.
func TestCaptureTheDisplayThatIsOn(t *testing.T) {
	ctx := context.Background()
	phone := phonetest.Recording(t, 108, 240)
	fake, d := fakeDevice(t, fakephone.Options{Phone: phone, InactiveDisplay: true})
	for i := 0; i < 3; i++ {
		shot, err := d.Screenshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if screendiff.NewFrame(shot.Image).Black() {
			t.Fatalf("capture %d (via %s) is the switched-off display", i, shot.Via)
		}
		if shot.Via != "exec-out" {
			t.Fatalf("capture %d via %s", i, shot.Via)
		}
	}
	if n := countShell(fake, "dumpsys SurfaceFlinger"); n != 1 {
		t.Fatalf("%d display look-ups for 3 captures, want 1", n)
	}
	// A phone with one display is captured without -d, as before.
	fake, d = fakeDevice(t, fakephone.Options{Phone: phonetest.Recording(t, 108, 240)})
	if _, err := d.Screenshot(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sc := range fake.Shell() {
		if strings.Contains(sc.Line, "screencap") && strings.Contains(sc.Line, "-d") {
			t.Fatalf("single display captured with %q", sc.Line)
		}
	}
}

// TestOrientationOfTheDisplayInUse: a folded phone lists its switched-off
// panel's touchscreen first, without a display (PhysicalWidth -1px up to
// Android 13, a disabled mapper on every version) and with a stale
// rotation 0; the rotation comes from the touchscreen of the panel in use.
func TestOrientationOfTheDisplayInUse(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	for v := fakephone.MinAndroid; v <= fakephone.MaxAndroid; v++ {
		fake := r.add(t, fakephone.Options{Android: v, Orientation: 1, InactiveDisplay: true, Phone: phonetest.Recording(t, 240, 108)})
		d := r.connect(t, Options{Serial: fake.Serial()})
		if got, err := d.Orientation(ctx); err != nil || got != 1 {
			t.Errorf("Android %d: Orientation = %d, %v; want 1 (the stale 0 is the switched-off panel's)", v, got, err)
		}
	}
}

// TestOrientationOfChosenDisplay: with two touchscreens on two displays
// that are both on, the rotation is the captured display's.
func TestOrientationOfChosenDisplay(t *testing.T) {
	section := func(id, display string, o int) string {
		return fmt.Sprintf("  Device %s: touch\n    Touch Input Mapper (mode - DIRECT):\n      Viewport INTERNAL: displayId=0, uniqueId=local:%s, port=0, orientation=%d\n      PhysicalWidth: 1080px\n      SurfaceOrientation: %d\n", id, display, o, o)
	}
	out := "Input Reader State:\n" + section("2", "111", 0) + section("3", "222", 3)
	for display, want := range map[string]int{"111": 0, "222": 3, "": 0} {
		if got, ok := orientationOf(out, display); !ok || got != want {
			t.Errorf("display %q: %d, %v; want %d", display, got, ok, want)
		}
	}
	viewports := "mViewports=[DisplayViewport{type=INTERNAL, uniqueId='local:111', orientation=0}, DisplayViewport{type=EXTERNAL, uniqueId='local:222', orientation=1}]"
	if got, ok := orientationOf(viewports, "222"); !ok || got != 1 {
		t.Errorf("dumpsys display for display 222: %d, %v; want 1", got, ok)
	}
	negative := "  Device 5: ghost\n      PhysicalWidth: -1px\n      SurfaceOrientation: 0\n" + section("2", "111", 2)
	if got, ok := orientationOf(negative, ""); !ok || got != 2 {
		t.Errorf("a device with a negative PhysicalWidth was read: %d, %v; want 2", got, ok)
	}
}
