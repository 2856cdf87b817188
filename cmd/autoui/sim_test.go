package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
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

// simInContactsSearch serves a sim for cfg, connects to it through the
// adb server and, through adb, opens Contacts and focuses its search.
func simInContactsSearch(t *testing.T, srv *fakephone.Server, cfg simConfig) (*simServer, *device.Device) {
	t.Helper()
	s := startTestSim(t, srv, cfg)
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
	return s, d
}

// TestSimTypesNonASCII types into the sim's contacts search through the real
// adb server: exactly with ADBKeyboard, folded to ASCII without it.
func TestSimTypesNonASCII(t *testing.T) {
	srv := phonetest.StartServer(t)
	const text = "Zoë O'Brien; $(reboot) 日本"
	for _, withIME := range []bool{true, false} {
		s, d := simInContactsSearch(t, srv, simConfig{android: 15, adbKeyboard: withIME})
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

// TestSimSettleModesOnAnimations plays a step on the animated sim through
// Debian's adb server with each settle mode: typing into Contacts' search,
// whose cursor blinks under a turning spinner. Screenshots never stop
// changing, so --settle pixels waits out its timeout; the hierarchy stops
// changing once the text is in, so --settle ui settles.
func TestSimSettleModesOnAnimations(t *testing.T) {
	s, d := simInContactsSearch(t, phonetest.StartServer(t), simConfig{android: fakephone.DefaultAndroid, animate: true})
	typ := action.Action{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: "ab"}
	done := action.Action{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint}
	for _, mode := range []string{"pixels", "ui"} {
		out := filepath.Join(t.TempDir(), mode)
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		rf := addRunFlags(fs)
		args := []string{"--goal", "find", "--settle", mode, "--out", out, "--no-annotate"}
		if mode == "pixels" {
			args = append(args, "--settle-timeout", "2s")
		} else {
			args = append(args, "--settle-timeout", "30s") // bounded but generous: adb is slow on a loaded machine
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		rf.settleDefaults(fs)
		if err := runEpisode(context.Background(), d, &cannedPredictor{answers: []action.Action{typ, done}}, rf, strings.NewReader(""), io.Discard, io.Discard); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		steps := readJSONLines(t, filepath.Join(out, "steps.jsonl"))
		wantSettled := mode == "ui"
		if steps[0]["settled"] != wantSettled {
			t.Errorf("%s: settled %v, want %v (the spinner turns, the hierarchy holds)", mode, steps[0]["settled"], wantSettled)
		}
		if checks, _ := steps[0]["settle_checks"].(float64); (checks >= 4) != wantSettled {
			t.Errorf("%s: %v hierarchy checks", mode, steps[0]["settle_checks"])
		}
		b, err := os.ReadFile(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var sum struct {
			Settle struct {
				Mode     string  `json:"mode"`
				Actions  int     `json:"actions"`
				MedianMs float64 `json:"median_ms"`
			} `json:"settle"`
		}
		if err := json.Unmarshal(b, &sum); err != nil || sum.Settle.Mode != mode || sum.Settle.Actions != 1 || sum.Settle.MedianMs <= 0 {
			t.Errorf("%s: summary's settle %+v, %v", mode, sum.Settle, err)
		}
	}
	if got := s.phone.Field("contacts.search"); got != "abab" {
		t.Fatalf("field %q after both episodes", got)
	}
}

func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
