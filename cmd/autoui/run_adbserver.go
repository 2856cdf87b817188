package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/autoui/autoui/device"
)

func adbAnswers(host string, port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// withOwnADBServer runs fn; when no adb server answered on a loopback
// address before and one does after (device.Connect starts it), that server
// is autoui's own and is stopped, so `run --adb-port P` leaves nothing
// behind. A server that was already running is left alone.
func withOwnADBServer(o device.Options, log io.Writer, fn func() error) error {
	host, port, err := o.ServerAddr()
	if err != nil || o.NoStartServer || !isLoopbackHost(host) || adbAnswers(host, port) {
		return fn()
	}
	err = fn()
	if adbAnswers(host, port) {
		if kerr := stopADBServer(port); kerr != nil {
			fmt.Fprintf(log, "autoui: could not stop the adb server it started on port %d: %v\n", port, kerr)
		}
	}
	return err
}

// stopADBServer runs `adb -P port kill-server`, bounded so a hung adb
// cannot keep autoui from exiting.
func stopADBServer(port int) error {
	bin, err := exec.LookPath("adb")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-P", strconv.Itoa(port), "kill-server")
	cmd.Env = device.ADBCommandEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}
