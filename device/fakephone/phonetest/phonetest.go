// Package phonetest starts fakephone devices and adb servers for a test and
// stops them when the test ends, failing the test on any error. It is the
// only part of the fake phone that imports testing, so shipped code (autoui
// sim) can use package fakephone without it.
package phonetest

import (
	"image/color"
	"testing"

	"github.com/autoui/autoui/device/fakephone"
)

// New starts a fake device with opts and closes it when the test ends.
func New(tb testing.TB, opts fakephone.Options) *fakephone.Device {
	tb.Helper()
	d, err := fakephone.Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	return d
}

// StartServer runs an adb server on a free port, with the test's temporary
// directory as its HOME, and stops it when the test ends. A missing adb
// binary fails the test with fakephone.InstallHint; nothing is skipped.
func StartServer(tb testing.TB) *fakephone.Server {
	tb.Helper()
	s, err := fakephone.StartServer(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Connect runs `adb connect` for d on srv and waits until the server lists
// it as "device".
func Connect(tb testing.TB, srv *fakephone.Server, d *fakephone.Device) {
	tb.Helper()
	if err := srv.ConnectAddr(d.Addr()); err != nil {
		tb.Fatal(err)
	}
}

// Recording is a RecordingPhone showing a solid blue w x h screen.
func Recording(tb testing.TB, w, h int) *fakephone.RecordingPhone {
	tb.Helper()
	p, err := fakephone.NewRecordingPhone(fakephone.SolidPNG(w, h, color.RGBA{40, 90, 200, 255}))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
