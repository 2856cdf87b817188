package fakephone

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electricbubble/gadb"
)

// connected starts a server and a device with opts and returns a gadb
// handle on the device through the real server.
func connected(t *testing.T, opts Options) (*Server, *Device, gadb.Device) {
	t.Helper()
	// Package phonetest does this for other packages; it imports this one,
	// so this package's own tests cannot use it.
	srv, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dev, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	if err := srv.ConnectAddr(dev.Addr()); err != nil {
		t.Fatal(err)
	}
	client, err := gadb.NewClientWith(srv.Host, srv.Port)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := client.DeviceList()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Serial() == dev.Serial() {
			return srv, dev, d
		}
	}
	t.Fatalf("device %s not in %v", dev.Serial(), devs)
	return nil, nil, gadb.Device{}
}

func TestShellThroughRealServer(t *testing.T) {
	for _, version := range []uint32{versionSkipChecksum, versionMin} {
		t.Run(fmt.Sprintf("version_%08x", version), func(t *testing.T) {
			_, dev, d := connected(t, Options{ProtocolVersion: version, MaxPayload: 4096, OverrideWidth: 720, OverrideHeight: 1600})
			out, err := d.RunShellCommand("wm size")
			if err != nil {
				t.Fatal(err)
			}
			if want := "Physical size: 1080x2400\nOverride size: 720x1600\n"; out != want {
				t.Errorf("wm size = %q, want %q", out, want)
			}
			png, err := d.RunShellCommandWithBytes("screencap -p")
			if err != nil {
				t.Fatal(err)
			}
			want, _ := dev.Phone().Screencap()
			if !bytes.Equal(png, want) {
				t.Errorf("screencap: got %d bytes, want %d", len(png), len(want))
			}
			out, err = d.RunShellCommand("frobnicate --now")
			if err != nil {
				t.Fatal(err)
			}
			if want := "/system/bin/sh: frobnicate: inaccessible or not found\n"; out != want {
				t.Errorf("unknown command = %q, want %q", out, want)
			}
			sh := dev.Shell()
			if last := sh[len(sh)-1]; last.Exit != 127 {
				t.Errorf("unknown command exit = %d, want 127", last.Exit)
			}
		})
	}
}

// TestConnectOnReusedPort connects a new device on the port of one that was
// closed while the server still listed it: the kernel hands out ports again,
// and the server's stale transport must not keep the new device offline.
func TestConnectOnReusedPort(t *testing.T) {
	srv, old, _ := connected(t, Options{})
	addr := old.Addr()
	old.Close()
	if err := srv.WaitGone(addr); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let the server's reconnect attempts back off
	dev, err := startAt(Options{}, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	if err := srv.ConnectAddr(addr); err != nil {
		t.Fatal(err)
	}
	if out, err := srv.Adb("-s", addr, "shell", "echo", "hi"); err != nil || strings.TrimSpace(out) != "hi" {
		t.Fatalf("shell on the new device = %q, %v", out, err)
	}
}

func TestInputRecorded(t *testing.T) {
	_, dev, d := connected(t, Options{})
	for _, cmd := range []string{"input tap 10 20", "input swipe 1 2 3 4 500", "input text 'a b%sc'", "input keyevent 4", "input touchscreen tap 5 6"} {
		if _, err := d.RunShellCommand(cmd); err != nil {
			t.Fatal(err)
		}
	}
	ev := dev.Phone().(*RecordingPhone).Events()
	want := []Event{
		{Kind: EventTap, X1: 10, Y1: 20},
		{Kind: EventSwipe, X1: 1, Y1: 2, X2: 3, Y2: 4, DurationMs: 500},
		{Kind: EventText, Text: "a b c"},
		{Kind: EventKey, KeyCode: 4},
		{Kind: EventTap, X1: 5, Y1: 6},
	}
	if fmt.Sprint(ev) != fmt.Sprint(want) {
		t.Errorf("events\n got %v\nwant %v", ev, want)
	}
	if got := dev.Inputs()[2]; strings.Join(got, "|") != "input|text|a b%sc" {
		t.Errorf("input argv = %q", got)
	}
}

func TestScreencapFileAndPull(t *testing.T) {
	srv, dev, d := connected(t, Options{})
	if _, err := d.RunShellCommand("screencap -p /data/local/tmp/s.png"); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := d.Pull("/data/local/tmp/s.png", &got); err != nil {
		t.Fatal(err)
	}
	want, _ := dev.Phone().Screencap()
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("pulled %d bytes, want %d", got.Len(), len(want))
	}
	// The adb command line's pull does STAT, then RECV, then QUIT.
	local := filepath.Join(t.TempDir(), "s.png")
	if _, err := srv.Adb("-s", dev.Serial(), "pull", "/data/local/tmp/s.png", local); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(local); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("adb pull: %d bytes, %v", len(b), err)
	}
	files, err := d.List("/data/local/tmp")
	if err != nil || len(files) != 1 || files[0].Name != "s.png" || int(files[0].Size) != len(want) {
		t.Fatalf("list = %+v, %v", files, err)
	}
	if err := d.Push(strings.NewReader("hello"), "/data/local/tmp/h.txt", time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	if b, ok := dev.File("/data/local/tmp/h.txt"); !ok || string(b) != "hello" {
		t.Fatalf("pushed file = %q, %v", b, ok)
	}
	if _, err := d.RunShellCommand("rm -f /data/local/tmp/s.png"); err != nil {
		t.Fatal(err)
	}
	if _, ok := dev.File("/data/local/tmp/s.png"); ok {
		t.Fatal("rm did not remove the file")
	}
	err = d.Pull("/data/local/tmp/s.png", &got)
	if err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("pull of a removed file: %v", err)
	}
}

func TestDropMidSession(t *testing.T) {
	srv, dev, d := connected(t, Options{DropWhen: func(line string) bool { return strings.HasPrefix(line, "input") }})
	if _, err := d.RunShellCommand("wm size"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunShellCommand("input tap 1 1"); err == nil {
		// The server may have accepted the stream before the drop; what
		// matters is that the next command fails.
		t.Log("the dropped command returned without error")
	}
	if !dev.Dropped() {
		t.Fatal("device did not drop")
	}
	if err := srv.WaitGone(dev.Serial()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunShellCommand("wm size"); err == nil {
		t.Fatal("command after the drop succeeded")
	}
}

func TestDefaultScreenMatchesSolidPNG(t *testing.T) {
	if !bytes.Equal(GrayPNG(1080, 2400), SolidPNG(1080, 2400, color.RGBA{128, 128, 128, 255})) {
		t.Fatal("testdata/screen_1080x2400.png is stale: regenerate it with SolidPNG(1080, 2400, gray)")
	}
}
