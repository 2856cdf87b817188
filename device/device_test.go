package device

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
)

// rig is a real adb server with fake devices connected.
type rig struct {
	srv *fakephone.Server
}

func newRig(t *testing.T) *rig { return &rig{srv: phonetest.StartServer(t)} }

func (r *rig) add(t *testing.T, opts fakephone.Options) *fakephone.Device {
	t.Helper()
	d := phonetest.New(t, opts)
	phonetest.Connect(t, r.srv, d)
	return d
}

func (r *rig) connect(t *testing.T, opts Options) *Device {
	t.Helper()
	opts.Host, opts.Port, opts.NoStartServer = r.srv.Host, r.srv.Port, true
	d, err := Connect(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fakeDevice is the usual setup: one fake device, connected.
func fakeDevice(t *testing.T, opts fakephone.Options) (*fakephone.Device, *Device) {
	t.Helper()
	r := newRig(t)
	fake := r.add(t, opts)
	return fake, r.connect(t, Options{})
}

func phoneOf(fake *fakephone.Device) *fakephone.RecordingPhone {
	return fake.Phone().(*fakephone.RecordingPhone)
}

func TestConnectPicksDevice(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, err := Connect(ctx, Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true})
	if err == nil || !strings.Contains(err.Error(), "no Android device attached") {
		t.Fatalf("no devices: err = %v", err)
	}
	a := r.add(t, fakephone.Options{Model: "Pixel_A"})
	d := r.connect(t, Options{})
	if d.Serial() != a.Serial() || d.Model() != "Pixel_A" {
		t.Fatalf("picked %s (%s), want %s (Pixel_A)", d.Serial(), d.Model(), a.Serial())
	}
	b := r.add(t, fakephone.Options{})
	_, err = Connect(ctx, Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true})
	if err == nil || !strings.Contains(err.Error(), "--serial") || !strings.Contains(err.Error(), a.Serial()) || !strings.Contains(err.Error(), b.Serial()) {
		t.Fatalf("two devices: err = %v", err)
	}
	if d := r.connect(t, Options{Serial: b.Serial()}); d.Serial() != b.Serial() {
		t.Fatalf("--serial picked %s", d.Serial())
	}
	_, err = Connect(ctx, Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Serial: "nope"})
	if err == nil || !strings.Contains(err.Error(), `"nope" (--serial) not found`) || !strings.Contains(err.Error(), a.Serial()) {
		t.Fatalf("unknown serial: err = %v", err)
	}
}

func TestConnectWithoutServerOrAdb(t *testing.T) {
	port, err := fakephone.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Connect(context.Background(), Options{Host: "127.0.0.1", Port: port,
		LookPath: func(string) (string, error) { return "", exec.ErrNotFound }})
	if err == nil || !strings.Contains(err.Error(), "apt-get install adb") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("err = %v, want the install hint", err)
	}
	_, err = Connect(context.Background(), Options{Host: "127.0.0.1", Port: port, NoStartServer: true})
	if err == nil || !strings.Contains(err.Error(), "no adb server answers") {
		t.Fatalf("err = %v", err)
	}
}

func TestConnectStartsServer(t *testing.T) {
	if _, err := exec.LookPath("adb"); err != nil {
		t.Fatal(fakephone.InstallHint)
	}
	port, err := fakephone.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir()) // the started server keeps its key there
	srv := &fakephone.Server{Host: "127.0.0.1", Port: port}
	t.Cleanup(func() {
		_, _ = srv.Query("host:kill")
		// Wait (bounded) until the daemon is gone, before its HOME is removed.
		for i := 0; i < 200; i++ {
			if _, err := srv.Query("host:version"); err != nil {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Errorf("adb server on port %d still answers after host:kill", port)
	})
	_, err = Connect(context.Background(), Options{Host: "127.0.0.1", Port: port})
	if err == nil || !strings.Contains(err.Error(), "no Android device attached") {
		t.Fatalf("err = %v, want the started server to report no devices", err)
	}
	if _, err := srv.Query("host:version"); err != nil {
		t.Fatalf("no server on port %d after Connect: %v", port, err)
	}
}

func TestScreenSize(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		opts fakephone.Options
		dev  Options
		w, h int
	}{
		{"physical", fakephone.Options{}, Options{}, 1080, 2400},
		{"override", fakephone.Options{OverrideWidth: 720, OverrideHeight: 1600}, Options{}, 720, 1600},
		{"landscape", fakephone.Options{Orientation: 1, Phone: phonetest.Recording(t, 240, 108)}, Options{}, 240, 108},
		{"manual", fakephone.Options{}, Options{Width: 500, Height: 900}, 500, 900},
	}
	r := newRig(t)
	for _, c := range cases {
		fake := r.add(t, c.opts)
		c.dev.Serial = fake.Serial()
		d := r.connect(t, c.dev)
		w, h, err := d.ScreenSize(ctx)
		if err != nil || w != c.w || h != c.h {
			t.Errorf("%s: ScreenSize = %d x %d, %v; want %d x %d", c.name, w, h, err, c.w, c.h)
		}
	}
}

func TestParseOrientation(t *testing.T) {
	cases := map[string]int{
		"      SurfaceOrientation: 3\n":                                                                            3,
		"      InputDeviceOrientation: 1\n":                                                                        1,
		"      InputDeviceOrientation: Rotation270\n":                                                              3,
		"      InputDeviceOrientation: Rotation0\n":                                                                0,
		"DisplayViewport{type=INTERNAL, valid=true, orientation=1, logical}":                                       1,
		"Viewport INTERNAL: displayId=0, uniqueId=local:0, port=0, orientation=2, logicalFrame=[0, 0, 1080, 2400]": 2,
		"  mCurrentRotation=ROTATION_270\n":                                                                        3,
		"  mCurrentRotation=2\n":                                                                                   2,
		"    mRotation=1 mAltOrientation=false\n":                                                                  1,
		// SurfaceOrientation is trusted over a viewport printed before it.
		"Viewport INTERNAL: orientation=0\n SurfaceOrientation: 1\n": 1,
	}
	for in, want := range cases {
		if got, ok := ParseOrientation(in); !ok || got != want {
			t.Errorf("ParseOrientation(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	if _, ok := ParseOrientation("nothing here"); ok {
		t.Error("ParseOrientation found an orientation in nothing")
	}
}

func TestScreenshot(t *testing.T) {
	ctx := context.Background()
	warn := func(png []byte) []byte {
		return append([]byte("WARNING: linker: libfoo.so: unused DT entry\n"), png...)
	}
	garbage := func([]byte) []byte { return []byte("screencap: permission denied\n") }
	cases := []struct {
		name string
		opts fakephone.Options
		via  string
	}{
		{"exec-out", fakephone.Options{}, "exec-out"},
		{"checksummed protocol", fakephone.Options{ProtocolVersion: 0x01000000, MaxPayload: 4096}, "exec-out"},
		{"no exec service", fakephone.Options{NoExec: true}, "stdout"},
		{"pty crlf without exec", fakephone.Options{PTY: true, NoExec: true}, "stdout"},
		{"pty: exec-out is raw", fakephone.Options{PTY: true}, "exec-out"},
		{"linker warning", fakephone.Options{ScreencapStdout: warn}, "exec-out"},
		{"pull fallback", fakephone.Options{ScreencapStdout: garbage}, "pull"},
	}
	r := newRig(t)
	for _, c := range cases {
		c.opts.Phone = phonetest.Recording(t, 108, 240)
		fake := r.add(t, c.opts)
		d := r.connect(t, Options{Serial: fake.Serial()})
		want, _ := fake.Phone().Screencap()
		for i := 0; i < 2; i++ { // the second capture uses the remembered mode
			shot, err := d.Screenshot(ctx)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !bytes.Equal(shot.PNG, want) || shot.Via != c.via || shot.Image.Bounds().Dx() != 108 {
				t.Errorf("%s: got %d bytes via %s, want %d via %s", c.name, len(shot.PNG), shot.Via, len(want), c.via)
			}
		}
		if _, ok := fake.File(screencapPath); ok {
			t.Errorf("%s: %s left on the device", c.name, screencapPath)
		}
		if c.opts.PTY {
			w, h, err := d.ScreenSize(ctx)
			if err != nil || w != 108 || h != 240 {
				t.Errorf("pty: ScreenSize = %d x %d, %v", w, h, err)
			}
		}
	}
}

func TestDispatchEveryAction(t *testing.T) {
	ctx := context.Background()
	fake, d := fakeDevice(t, fakephone.Options{})
	tap := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.25}, Lift: action.Point{Y: 0.5, X: 0.25}}
	swipe := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}
	edge := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 1.2, X: -0.1}, Lift: action.Point{Y: 1.2, X: -0.1}}
	acts := []action.Action{
		tap, swipe, edge,
		{Type: action.TypeText, Text: "hello world", Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.PressHome, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.PressEnter, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.StatusTaskComplete, Touch: action.NoPoint, Lift: action.NoPoint},
		{Type: action.StatusTaskImpossible, Touch: action.NoPoint, Lift: action.NoPoint},
	}
	w, h, err := d.ScreenSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		p := d.PlanAction(a, w, h)
		if err := d.Run(ctx, p.Commands); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	want := []fakephone.Event{
		{Kind: fakephone.EventTap, X1: 270, Y1: 1200},
		{Kind: fakephone.EventSwipe, X1: 540, Y1: 1920, X2: 540, Y2: 480, DurationMs: 300},
		{Kind: fakephone.EventTap, X1: 0, Y1: 2399},
		{Kind: fakephone.EventText, Text: "hello world"},
		{Kind: fakephone.EventKey, KeyCode: 4},
		{Kind: fakephone.EventKey, KeyCode: 3},
		{Kind: fakephone.EventKey, KeyCode: 66},
	}
	got := phoneOf(fake).Events()
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	wantArgv := []string{"input tap 270 1200", "input swipe 540 1920 540 480 300", "input tap 0 2399", "input text hello%sworld", "input keyevent 4", "input keyevent 3", "input keyevent 66"}
	for i, argv := range fake.Inputs() {
		if s := strings.Join(argv, " "); s != wantArgv[i] {
			t.Errorf("input argv %d = %q, want %q", i, s, wantArgv[i])
		}
	}
}

func TestSwipeDurationOption(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{})
	d := r.connect(t, Options{SwipeDuration: 750_000_000})
	p := d.PlanAction(action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.2}, Lift: action.Point{Y: 0.5, X: 0.8}}, 1000, 2000)
	if err := d.Run(context.Background(), p.Commands); err != nil {
		t.Fatal(err)
	}
	if ev := phoneOf(fake).Events(); len(ev) != 1 || ev[0] != (fakephone.Event{Kind: fakephone.EventSwipe, X1: 200, Y1: 1000, X2: 800, Y2: 1000, DurationMs: 750}) {
		t.Fatalf("events = %+v", ev)
	}
}

// hostileTexts are model outputs that would run commands or be mistyped
// without correct quoting.
var hostileTexts = []string{
	"hello world", "it's", `say "hi"`, "a;reboot", "a && reboot", "a || reboot", "a|sh", "a & reboot",
	"$(reboot)", "`reboot`", "${HOME}", "$HOME", "$0 $1 $? $$ $! $@ $*", "a > /sdcard/x", "a >> x", "< /etc/passwd", "2>&1",
	"(sub)", "{a,b}", "line1\nline2", "\nreboot", "100%", "%s", "50%s off", "%%s", "%%%s", "a%", "%", "s", "%ss",
	"-n", "--help", "-", "-e foo", "   ", " lead", "trail ", "tab\there", `back\slash`, `\`, `\n`, "\\'",
	"ünïcødé 日本語 🎉", "*", "?", "[a]", "~", "~root", "#comment", "a #b", "!", "!!", "a'b\"c`d$e\\f",
	"'", "''", `"`, "';reboot;'", `";reboot;"`, "x\x00y", "=", "a=b c", "\r\n", "@#$%^&*()_+-=[]{}|;:,.<>/?",
	strings.Repeat("long %s text 'with' $(quotes) ", 40),
}

func TestTextEscapingThroughRealServer(t *testing.T) {
	ctx := context.Background()
	fake, d := fakeDevice(t, fakephone.Options{})
	phone := phoneOf(fake)
	for _, s := range hostileTexts {
		before, shellBefore := len(phone.Events()), len(fake.Shell())
		plan := d.PlanText(s)
		if err := d.Run(ctx, plan.Commands); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		typed := ""
		for _, e := range phone.Events()[before:] {
			if e.Kind != fakephone.EventText {
				t.Errorf("%q: unexpected event %+v", s, e)
			}
			typed += e.Text
		}
		want, _ := FoldASCII(strings.ReplaceAll(s, "\x00", ""))
		if typed != want {
			t.Errorf("typed %q, want %q (commands %q)", typed, want, plan.Commands)
		}
		if (want != s && !strings.Contains(s, "\x00")) != (plan.Warning != "") {
			t.Errorf("%q: warning %q", s, plan.Warning)
		}
		for _, sc := range fake.Shell()[shellBefore:] {
			checkOneInputText(t, s, sc)
		}
	}
}

// checkOneInputText checks that a line Run sent runs exactly one `input
// text` with one argument, followed only by Run's exit-status marker.
func checkOneInputText(t *testing.T, text string, sc fakephone.ShellCommand) {
	t.Helper()
	if !sc.StatusMarker || !strings.HasSuffix(sc.Line, "; echo "+rcMarker+"$?") {
		t.Errorf("%q: line %q lacks the exit-status marker", text, sc.Line)
	}
	if len(sc.Hazards) != 0 || sc.SyntaxErr != "" || len(sc.Commands) != 1 || len(sc.Commands[0]) != 3 || sc.Commands[0][0] != "input" || sc.Commands[0][1] != "text" {
		t.Errorf("%q: line %q would run %q (hazards %q, syntax error %q)", text, sc.Line, sc.Commands, sc.Hazards, sc.SyntaxErr)
	}
	if sc.Exit != 0 {
		t.Errorf("%q: exit status %d", text, sc.Exit)
	}
}

// FuzzTextCommands checks the escaping against the fake shell's parser and
// Android's %s rule, without a server.
func FuzzTextCommands(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		typed := ""
		for _, line := range TextCommands(s) {
			cmds, hazards, err := fakephone.ParseShell(line)
			if err != nil || len(hazards) != 0 || len(cmds) != 1 || len(cmds[0]) != 3 {
				t.Fatalf("%q: line %q parses to %q, %q, %v", s, line, cmds, hazards, err)
			}
			if len(line) > 4*maxTextChunk+20 {
				t.Fatalf("line of %d bytes", len(line))
			}
			typed += fakephone.AndroidInputText(cmds[0][2])
		}
		if want := strings.ReplaceAll(s, "\x00", ""); typed != want {
			t.Fatalf("typed %q, want %q", typed, want)
		}
	})
}

func TestUnknownCommandIsAnError(t *testing.T) {
	_, d := fakeDevice(t, fakephone.Options{})
	err := d.Run(context.Background(), []string{"frobnicate"})
	if err == nil || !strings.Contains(err.Error(), "inaccessible or not found") {
		t.Fatalf("err = %v", err)
	}
}

func TestDisconnectIsAClearError(t *testing.T) {
	r := newRig(t)
	fake := r.add(t, fakephone.Options{})
	d := r.connect(t, Options{})
	fake.Drop()
	if err := r.srv.WaitGone(fake.Serial()); err != nil {
		t.Fatal(err)
	}
	_, err := d.Screenshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), fake.Serial()) {
		t.Fatalf("err = %v, want an error naming the device", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal("not a cancellation")
	}
}

// The adb server is picked as the adb command picks it: flags, then
// $ADB_SERVER_SOCKET, then $ANDROID_ADB_SERVER_ADDRESS and _PORT.
func TestServerAddr(t *testing.T) {
	for _, c := range []struct {
		opts Options
		env  map[string]string
		host string
		port int
		err  string
	}{
		{Options{}, nil, "localhost", 5037, ""},
		{Options{}, map[string]string{"ANDROID_ADB_SERVER_PORT": "5039", "ANDROID_ADB_SERVER_ADDRESS": "10.0.0.2"}, "10.0.0.2", 5039, ""},
		{Options{}, map[string]string{"ADB_SERVER_SOCKET": "tcp:127.0.0.1:27037", "ANDROID_ADB_SERVER_PORT": "5039"}, "127.0.0.1", 27037, ""},
		{Options{}, map[string]string{"ADB_SERVER_SOCKET": "tcp:5040"}, "localhost", 5040, ""},
		{Options{}, map[string]string{"ADB_SERVER_SOCKET": "tcp:[::1]:5041"}, "::1", 5041, ""},
		{Options{Port: 6000}, map[string]string{"ADB_SERVER_SOCKET": "tcp:5040"}, "localhost", 6000, ""},
		{Options{}, map[string]string{"ADB_SERVER_SOCKET": "localfilesystem:/tmp/adb"}, "", 0, "tcp:HOST:PORT"},
		{Options{}, map[string]string{"ADB_SERVER_SOCKET": "tcp:host:99999"}, "", 0, "tcp:HOST:PORT"},
	} {
		c.opts.Getenv = func(k string) string { return c.env[k] }
		host, port, err := c.opts.ServerAddr()
		if host != c.host || port != c.port || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v %v: %s:%d %v", c.opts, c.env, host, port, err)
		}
	}
}

// A server named only by $ADB_SERVER_SOCKET is the one Connect reaches.
func TestConnectByServerSocket(t *testing.T) {
	r := newRig(t)
	r.add(t, fakephone.Options{Model: "Pixel_S"})
	spec := "tcp:" + r.srv.Host + ":" + strconv.Itoa(r.srv.Port)
	d, err := Connect(context.Background(), Options{NoStartServer: true, Getenv: func(k string) string {
		if k == "ADB_SERVER_SOCKET" {
			return spec
		}
		return ""
	}})
	if err != nil || d.Serial() == "" {
		t.Fatal(d, err)
	}
}
