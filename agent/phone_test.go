package agent

import (
	"context"
	"testing"

	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/device/fakephone/phonetest"
)

// fakeDevice is the usual setup: one fake phone, connected through a real
// adb server.
func fakeDevice(t *testing.T, opts fakephone.Options) (*fakephone.Device, *device.Device) {
	t.Helper()
	srv := phonetest.StartServer(t)
	fake := phonetest.New(t, opts)
	phonetest.Connect(t, srv, fake)
	d, err := device.Connect(context.Background(), device.Options{Host: srv.Host, Port: srv.Port, NoStartServer: true})
	if err != nil {
		t.Fatal(err)
	}
	return fake, d
}

func phoneOf(fake *fakephone.Device) *fakephone.RecordingPhone {
	return fake.Phone().(*fakephone.RecordingPhone)
}
