package device

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
)

// oneLineErr fails the test when err's message spans lines or carries a
// Java stack trace.
func oneLineErr(t *testing.T, err error) {
	t.Helper()
	if m := err.Error(); strings.ContainsAny(m, "\n\r") || strings.Contains(m, "\tat ") || strings.Contains(m, "at android.") {
		t.Errorf("error is not one line: %q", m)
	}
}

func TestInputExitStatusIsChecked(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{})
	ctx := context.Background()
	err := d.Run(ctx, []string{"input tap 1"})
	if err == nil || !strings.Contains(err.Error(), `"input tap 1" failed (exit status 1)`) || !strings.Contains(err.Error(), "Invalid arguments") {
		t.Fatalf("err = %v", err)
	}
	err = d.Run(ctx, []string{"frobnicate"})
	if err == nil || !strings.Contains(err.Error(), "exit status 127") {
		t.Fatalf("err = %v", err)
	}
	if err := d.Run(ctx, []string{"input tap 1 2", "true"}); err != nil {
		t.Fatal(err)
	}
}

func TestInjectEventsRefusalTellsTheFix(t *testing.T) {
	r := newRig(t)
	for _, v := range []int{10, 14} {
		fake := r.add(t, fakephone.Options{Android: v, InjectDenied: true, Manufacturer: "Xiaomi"})
		d := r.connect(t, Options{Serial: fake.Serial()})
		err := d.Run(context.Background(), []string{"input tap 10 20"})
		if err == nil || !strings.Contains(err.Error(), "INJECT_EVENTS") || !strings.Contains(err.Error(), "USB debugging (Security settings)") ||
			!strings.Contains(err.Error(), "input tap 10 20") {
			t.Fatalf("Android %d: err = %v", v, err)
		}
		oneLineErr(t, err)
	}
}

func TestCommandDeadline(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{HangWhen: func(line string) bool { return strings.HasPrefix(line, "dumpsys") || strings.HasPrefix(line, "input") }})
	d := r.connect(t, Options{Serial: fake.Serial(), CommandTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := d.Orientation(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") || !strings.Contains(err.Error(), fake.Serial()) {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("a hung read took %s (hangs must not be retried)", el)
	}
	err = d.Run(context.Background(), []string{"input tap 1 1"})
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("err = %v", err)
	}
	oneLineErr(t, err)
}

func TestCancelStopsAHungCommand(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{HangWhen: func(line string) bool { return strings.HasPrefix(line, "input") }})
	d := r.connect(t, Options{Serial: fake.Serial()})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := d.Run(ctx, []string{"input tap 1 1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("cancel took %s", el)
	}
}

// TestReadsRetryAfterABriefOffline: the link falls for a moment (the server
// lists the device offline or drops it) and comes back; screenshots and
// dumpsys go on, input is not repeated.
func TestReadsRetryAfterABriefOffline(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{Phone: phonetest.Recording(t, 108, 240)})
	d := r.connect(t, Options{Serial: fake.Serial(), ReadRetries: 6})
	ctx := context.Background()
	if _, err := d.Screenshot(ctx); err != nil {
		t.Fatal(err)
	}
	fake.Blip(300 * time.Millisecond)
	if err := r.srv.WaitGone(fake.Serial()); err != nil {
		t.Fatal(err)
	}
	// The user (or a watchdog) reconnects, as one does for a TCP device.
	go func() {
		time.Sleep(400 * time.Millisecond)
		_ = r.srv.ConnectAddr(fake.Addr())
	}()
	shot, err := d.Screenshot(ctx)
	if err != nil {
		t.Fatalf("screenshot across a brief offline: %v", err)
	}
	if shot.Image.Bounds().Dx() != 108 {
		t.Fatalf("screenshot of %v", shot.Image.Bounds())
	}
}

func TestOfflineWithoutRetriesTellsTheFix(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{})
	d := r.connect(t, Options{Serial: fake.Serial(), ReadRetries: -1})
	fake.Drop()
	if err := r.srv.WaitGone(fake.Serial()); err != nil {
		t.Fatal(err)
	}
	_, err := d.Screenshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "adb connect "+fake.Serial()) {
		t.Fatalf("err = %v, want the TCP reconnect hint", err)
	}
	oneLineErr(t, err)
}

func TestHints(t *testing.T) {
	if h := offlineHint("R58M123ABC"); !strings.Contains(h, "USB cable") {
		t.Errorf("USB offline hint: %q", h)
	}
	for _, s := range []string{"192.168.1.7:5555", "adb-R58M123ABC-Xyz._adb-tls-connect._tcp"} {
		if h := offlineHint(s); !strings.Contains(h, "adb connect") || strings.Contains(h, "cable") {
			t.Errorf("network offline hint for %s: %q", s, h)
		}
	}
	msg := "device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\nTry 'adb kill-server' if that seems wrong."
	if h := serverHint("X", msg); !strings.Contains(h, "Allow USB debugging") || strings.Contains(h, "\n") {
		t.Errorf("unauthorized hint: %q", h)
	}
	trace := "java.lang.SecurityException: Injecting input events requires the caller to have the INJECT_EVENTS permission.\n\tat android.os.Parcel.createException(Parcel.java:2995)\n"
	if f := commandFailure(trace); strings.Contains(f, "Parcel") || !strings.Contains(f, "Xiaomi") {
		t.Errorf("commandFailure = %q", f)
	}
}

func TestUnauthorizedDevice(t *testing.T) {
	r := newRig(t)
	fake := phonetest.New(t, fakephone.Options{Unauthorized: true})
	if _, err := r.srv.Adb("connect", fake.Addr()); err != nil {
		t.Log(err) // adb connect may report the failed handshake
	}
	var state string
	for i := 0; i < 200 && state != "unauthorized"; i++ {
		state, _ = r.srv.State(fake.Serial())
		time.Sleep(25 * time.Millisecond)
	}
	if state != "unauthorized" {
		t.Fatalf("state %q, want unauthorized", state)
	}
	_, err := Connect(context.Background(), Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true})
	if err == nil || !strings.Contains(err.Error(), "is unauthorized") || !strings.Contains(err.Error(), "Allow USB debugging") {
		t.Fatalf("err = %v", err)
	}
	oneLineErr(t, err)
}

func TestAndroidSerialIsHonoured(t *testing.T) {
	r := newRig(t)
	a := r.add(t, fakephone.Options{})
	b := r.add(t, fakephone.Options{})
	env := map[string]string{"ANDROID_SERIAL": b.Serial()}
	opts := Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Getenv: func(k string) string { return env[k] }}
	d, err := Connect(context.Background(), opts)
	if err != nil || d.Serial() != b.Serial() {
		t.Fatalf("picked %v, %v; want %s", d, err, b.Serial())
	}
	opts.Serial = a.Serial() // --serial wins over the environment
	if d, err := Connect(context.Background(), opts); err != nil || d.Serial() != a.Serial() {
		t.Fatalf("--serial: %v, %v", d, err)
	}
	env["ANDROID_SERIAL"], opts.Serial = "gone:5555", ""
	_, err = Connect(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "ANDROID_SERIAL") {
		t.Fatalf("err = %v", err)
	}
	env["ANDROID_SERIAL"] = ""
	_, err = Connect(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "--serial or ANDROID_SERIAL") {
		t.Fatalf("err = %v", err)
	}
}

// silentListener listens on a loopback port, accepts and never answers
// (a wedged adb server, another program on the port); it returns the port.
func silentListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestSilentServerTimesOut: something listens on the adb port but never
// answers (a wedged server, a wrong port); Connect gives up within the
// command deadline instead of hanging.
func TestSilentServerTimesOut(t *testing.T) {
	port := silentListener(t)
	start := time.Now()
	_, err := Connect(context.Background(), Options{Host: "127.0.0.1", Port: port, NoStartServer: true, CommandTimeout: 300 * time.Millisecond, DialTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no adb server answers") || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %s", el)
	}
	oneLineErr(t, err)
}

// cutOnce returns a CutWhen that cuts the first line starting with prefix.
func cutOnce(prefix string) func(string) bool {
	var mu sync.Mutex
	done := false
	return func(line string) bool {
		mu.Lock()
		defer mu.Unlock()
		if done || !strings.HasPrefix(line, prefix) {
			return false
		}
		done = true
		return true
	}
}

// TestCutOutputIsRetriedNotTrusted: the link falls mid-transfer, so the
// stream ends early like a normal one. getprop must not return half a value,
// and a cut PNG must be fetched again the same way, not demote capture to a
// worse mode for the rest of the session.
func TestCutOutputIsRetriedNotTrusted(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	fake := r.add(t, fakephone.Options{Phone: phonetest.Recording(t, 108, 240), Model: "Pixel_Cut",
		CutWhen: cutOnce("getprop")})
	d := r.connect(t, Options{Serial: fake.Serial()})
	if v, err := d.Property(ctx, "ro.product.model"); err != nil || v != "Pixel_Cut" {
		t.Fatalf("getprop after a cut: %q, %v", v, err)
	}

	fake = r.add(t, fakephone.Options{Phone: phonetest.Recording(t, 108, 240), CutWhen: cutOnce("screencap")})
	d = r.connect(t, Options{Serial: fake.Serial()})
	for i := 0; i < 2; i++ {
		shot, err := d.Screenshot(ctx)
		if err != nil {
			t.Fatalf("capture %d: %v", i, err)
		}
		if shot.Via != "exec-out" {
			t.Fatalf("capture %d via %s after one cut PNG, want exec-out kept", i, shot.Via)
		}
	}

	// Cut every time: an error that says so, never a half screen.
	fake = r.add(t, fakephone.Options{CutWhen: func(line string) bool { return strings.HasPrefix(line, "wm") }})
	d = r.connect(t, Options{Serial: fake.Serial()})
	if _, _, err := d.ScreenSize(ctx); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("err = %v", err)
	}
}

// fakeAdb writes an adb stand-in script that records its start in the
// returned file and then hangs, like an adb that never comes back.
func fakeAdb(t *testing.T) (bin, started string) {
	t.Helper()
	dir := t.TempDir()
	started = filepath.Join(dir, "started")
	bin = filepath.Join(dir, "adb")
	script := "#!/bin/sh\ntouch '" + started + "'\nsleep 60 &\nwait\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, started
}

// connectBounded runs Connect and fails the test if it has not returned
// after a generous while (a hang is the bug, not slowness).
func connectBounded(t *testing.T, opts Options) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Connect(context.Background(), opts)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Connect still running after 30s")
		return nil
	}
}

// TestStartServerOnlyWhenRefusedAndBounded: a loopback listener that never
// answers is not "no server" (starting one would not help), and a started
// adb that hangs is given up on at the command timeout.
func TestStartServerOnlyWhenRefusedAndBounded(t *testing.T) {
	bin, started := fakeAdb(t)
	look := func(string) (string, error) { return bin, nil }
	err := connectBounded(t, Options{Host: "127.0.0.1", Port: silentListener(t), LookPath: look,
		CommandTimeout: 300 * time.Millisecond, DialTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "without answering") {
		t.Fatalf("silent listener: err = %v", err)
	}
	oneLineErr(t, err)
	if _, serr := os.Stat(started); serr == nil {
		t.Fatal("adb start-server was run against a port something else holds")
	}

	port, err := fakephone.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	err = connectBounded(t, Options{Host: "127.0.0.1", Port: port, LookPath: look, CommandTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "start-server gave no answer within 500ms") {
		t.Fatalf("hung start-server: err = %v", err)
	}
	oneLineErr(t, err)
	if _, serr := os.Stat(started); serr != nil {
		t.Fatal("adb start-server was not tried on a refused port")
	}
}

// TestConnectWaitsForABriefOffline: the device is listed offline when
// autoui starts and comes back a moment later; Connect waits for it instead
// of failing at once, and gives up (saying so) at the command timeout.
func TestConnectWaitsForABriefOffline(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{})
	fake.Blip(200 * time.Millisecond)
	waitFor(t, func() bool { st, _ := r.srv.State(fake.Serial()); return st == "offline" }, "the device listed offline")
	back := make(chan error, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		back <- r.srv.ConnectAddr(fake.Addr())
	}()
	d, err := Connect(context.Background(), Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Serial: fake.Serial(), CommandTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("connect across a brief offline: %v", err)
	}
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	if d.Serial() != fake.Serial() {
		t.Fatalf("picked %s", d.Serial())
	}

	fake.Blip(time.Hour)
	waitFor(t, func() bool { st, _ := r.srv.State(fake.Serial()); return st == "offline" }, "the device listed offline")
	_, err = Connect(context.Background(), Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Serial: fake.Serial(), CommandTimeout: 600 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "is offline (still, after 600ms)") || !strings.Contains(err.Error(), "adb connect") {
		t.Fatalf("err = %v", err)
	}
	oneLineErr(t, err)
}

// TestSerialFormsTheServerResolves: --serial and ANDROID_SERIAL take what
// `adb -s` takes (model:, product:, device:, tcp:HOST:PORT, a host without
// its port), resolved by the server, not only an exact serial.
func TestSerialFormsTheServerResolves(t *testing.T) {
	r := newRig(t)
	a := r.add(t, fakephone.Options{Model: "Pixel_A", Product: "prod_a", DeviceName: "dev_a"})
	b := r.add(t, fakephone.Options{Model: "Pixel_B"})
	env := map[string]string{}
	opts := Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Getenv: func(k string) string { return env[k] }}
	for form, want := range map[string]string{
		"model:Pixel_A": a.Serial(), "product:prod_a": a.Serial(), "device:dev_a": a.Serial(),
		"tcp:" + b.Serial(): b.Serial(), "model:Pixel_B": b.Serial(),
	} {
		env["ANDROID_SERIAL"] = form
		d, err := Connect(context.Background(), opts)
		if err != nil || d.Serial() != want {
			t.Fatalf("ANDROID_SERIAL=%s: %v, %v; want %s", form, d, err, want)
		}
	}
	env["ANDROID_SERIAL"] = ""
	opts.Serial = "127.0.0.1" // both fakes live there
	_, err := Connect(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "matches more than one device") || !strings.Contains(err.Error(), a.Serial()) {
		t.Fatalf("ambiguous host: err = %v", err)
	}
	opts.Serial = "model:Nope"
	_, err = Connect(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), `"model:Nope" (--serial) not found`) {
		t.Fatalf("unknown model: err = %v", err)
	}
}

// TestShellV2WhereTheDeviceHasIt: a device advertising shell_v2 gets
// commands through it (exit status in its own packet, no echo marker), and
// Debian's adb client reads the fake's packets the same way.
func TestShellV2WhereTheDeviceHasIt(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	fake := r.add(t, fakephone.Options{ShellV2: true, Model: "Pixel_V2", CutWhen: cutOnce("getprop")})
	d := r.connect(t, Options{Serial: fake.Serial()})
	if v, err := d.Property(ctx, "ro.product.model"); err != nil || v != "Pixel_V2" {
		t.Fatalf("getprop over shell v2 after a cut: %q, %v", v, err)
	}
	err := d.Run(ctx, []string{"input tap 1"})
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "Invalid arguments") {
		t.Fatalf("err = %v", err)
	}
	if err := d.Run(ctx, []string{"input tap 1 2"}); err != nil {
		t.Fatal(err)
	}
	for _, sc := range fake.Shell() {
		if sc.StatusMarker {
			t.Fatalf("%q sent with the legacy status echo to a shell_v2 device", sc.Line)
		}
	}
	if _, err := r.srv.Adb("-s", fake.Serial(), "shell", "frobnicate"); err == nil || !strings.Contains(err.Error(), "exit status 127") {
		t.Fatalf("adb shell frobnicate over shell v2: %v, want exit status 127", err)
	}
	if out, err := r.srv.Adb("-s", fake.Serial(), "shell", "getprop", "ro.product.model"); err != nil || strings.TrimSpace(out) != "Pixel_V2" {
		t.Fatalf("adb shell getprop: %q, %v", out, err)
	}
}
