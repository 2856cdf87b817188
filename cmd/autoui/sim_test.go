package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
	"github.com/autoui/autoui/sim/dataset"
)

// startTestSim serves a sim for cfg and connects a real adb server to it.
func startTestSim(t *testing.T, srv *fakephone.Server, cfg simConfig) *simServer {
	t.Helper()
	if cfg.width == 0 {
		cfg.width, cfg.height = 270, 600
	}
	s, err := startSim(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	if err := srv.ConnectAddr(s.addr); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSimExecOutGetpropAndIME(t *testing.T) {
	srv := phonetest.StartServer(t)
	port, err := fakephone.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := startTestSim(t, srv, simConfig{port: port, android: fakephone.DefaultAndroid, adbKeyboard: true})
	if s.addr != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Fatalf("sim at %s, want port %d", s.addr, port)
	}
	out, err := srv.Adb("-s", s.addr, "exec-out", "screencap", "-p")
	if err != nil {
		t.Fatalf("adb exec-out screencap -p: %v", err)
	}
	img, err := png.Decode(bytes.NewReader([]byte(out)))
	if err != nil || img.Bounds().Dx() != 270 || img.Bounds().Dy() != 600 {
		t.Fatalf("exec-out screencap: %v, %v", img.Bounds(), err)
	}
	sdk, err := srv.Adb("-s", s.addr, "shell", "getprop", "ro.build.version.sdk")
	if err != nil || strings.TrimSpace(sdk) != fmt.Sprint(dataset.AndroidAPILevel) {
		t.Fatalf("sdk %q, %v; the dataset records API %d", sdk, err, dataset.AndroidAPILevel)
	}
	imes, err := srv.Adb("-s", s.addr, "shell", "ime", "list", "-a", "-s")
	if err != nil || !strings.Contains(imes, device.ADBKeyboardIME) {
		t.Fatalf("ime list: %q, %v", imes, err)
	}
	refused, _ := srv.Adb("-s", s.addr, "shell", "input", "text", "café")
	if !strings.Contains(refused, "Exception") {
		t.Fatalf("non-ASCII input text on the sim printed %q, want the phone's exception", refused)
	}
}

// TestSimServesEveryAndroid: with --android N the sim prints that
// version's getprop and dumpsys, and the device code reads its size.
func TestSimServesEveryAndroid(t *testing.T) {
	srv := phonetest.StartServer(t)
	for v := fakephone.MinAndroid; v <= fakephone.MaxAndroid; v++ {
		s := startTestSim(t, srv, simConfig{android: v})
		d, err := device.Connect(context.Background(), device.Options{Host: srv.Host, Port: srv.Port, NoStartServer: true, Serial: s.addr})
		if err != nil {
			t.Fatal(err)
		}
		release, err := srv.Adb("-s", s.addr, "shell", "getprop", "ro.build.version.release")
		if err != nil || strings.TrimSpace(release) != fmt.Sprint(v) {
			t.Fatalf("Android %d: release %q, %v", v, release, err)
		}
		if o, err := d.Orientation(context.Background()); err != nil || o != 0 {
			t.Fatalf("Android %d: orientation %d, %v", v, o, err)
		}
		shot, err := d.Screenshot(context.Background())
		if err != nil || shot.Via != "exec-out" {
			t.Fatalf("Android %d: screenshot %v", v, err)
		}
		if w, h, err := d.ScreenSize(context.Background()); err != nil || w != 270 || h != 600 {
			t.Fatalf("Android %d: size %dx%d, %v", v, w, h, err)
		}
	}
	if _, err := startSim(context.Background(), simConfig{android: 9, width: 270, height: 600}); err == nil {
		t.Fatal("--android 9 accepted")
	}
}

// simTap taps the centre of the sim element id through the device.
func simTap(t *testing.T, d *device.Device, s *simServer, id string) {
	t.Helper()
	for _, e := range s.phone.Annotations() {
		if e.ID == id {
			c := e.Center()
			w, h := s.phone.Size()
			if err := d.Run(context.Background(), []string{fmt.Sprintf("input tap %d %d", int(c.X*float64(w)), int(c.Y*float64(h)))}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s on the sim's screen", id)
}

// TestSimTypesNonASCII types into the sim's contacts search through the real
// adb server: exactly with ADBKeyboard, folded to ASCII without it.
func TestSimTypesNonASCII(t *testing.T) {
	srv := phonetest.StartServer(t)
	const text = "Zoë O'Brien; $(reboot) 日本"
	for _, withIME := range []bool{true, false} {
		s := startTestSim(t, srv, simConfig{android: 15, adbKeyboard: withIME})
		d, err := device.Connect(context.Background(), device.Options{Host: srv.Host, Port: srv.Port, NoStartServer: true, Serial: s.addr})
		if err != nil {
			t.Fatal(err)
		}
		w, h := s.phone.Size()
		if err := d.Run(context.Background(), []string{fmt.Sprintf("input swipe %d %d %d %d 300", w/2, h*8/10, w/2, h*2/10)}); err != nil {
			t.Fatal(err)
		}
		simTap(t, d, s, "app:contacts")
		simTap(t, d, s, "field:contacts.search")
		plan := d.PlanText(text)
		if err := d.Run(context.Background(), plan.Commands); err != nil {
			t.Fatal(err)
		}
		want, warned := text, false
		if !withIME {
			want, warned = "Zoe O'Brien; $(reboot) ", true
		}
		if got := s.phone.Field("contacts.search"); got != want || (plan.Warning != "") != warned {
			t.Fatalf("ADBKeyboard %v: field %q, want %q (warning %q)", withIME, got, want, plan.Warning)
		}
	}
}
