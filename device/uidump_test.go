package device

import (
	"context"
	"strings"
	"testing"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
)

// noUIPhone is a phone whose uiautomator finds no window.
type noUIPhone struct{ fakephone.Phone }

// TestUIElementsThroughADB reads the hierarchy with uiautomator dump and
// cat through the real adb server, in document order without the root,
// and reports uiautomator's failure in one line.
func TestUIElementsThroughADB(t *testing.T) {
	ctx := context.Background()
	phone := phonetest.Recording(t, 108, 240)
	phone.SetUI([]byte(`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0"><node index="0" class="android.widget.FrameLayout" bounds="[0,0][108,240]"><node index="0" text="Wi-Fi &amp; more" resource-id="id/wifi" class="android.widget.Switch" checkable="true" checked="true" clickable="true" enabled="true" bounds="[10,20][98,40]" /></node></hierarchy>`))
	_, d := fakeDevice(t, fakephone.Options{Phone: phone})
	els, err := d.UIElements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []UIElement{{Class: "android.widget.FrameLayout", Bounds: [4]int{0, 0, 108, 240}},
		{Text: "Wi-Fi & more", ResourceID: "id/wifi", Class: "android.widget.Switch", Checkable: true, Checked: true, Clickable: true, Enabled: true, Bounds: [4]int{10, 20, 98, 40}}}
	if len(els) != 2 || els[0] != want[0] || els[1] != want[1] {
		t.Fatalf("elements %+v\nwant %+v", els, want)
	}
	_, d = fakeDevice(t, fakephone.Options{Phone: noUIPhone{phonetest.Recording(t, 108, 240)}})
	_, err = d.UIElements(ctx)
	if err == nil || !strings.Contains(err.Error(), "uiautomator dump: ERROR: null root node") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("no window: %v", err)
	}
	if _, err := ParseUIDump("<html/>"); err == nil {
		t.Fatal("a dump without <hierarchy> parsed")
	}
}
