// Package device drives an Android device over ADB (through an adb server,
// with github.com/electricbubble/gadb): it picks the device, reads the screen
// size and orientation, captures screenshots, turns Auto-UI actions into
// `input` shell commands with safe quoting, and runs the closed-loop agent
// (capture -> predict -> dispatch -> wait for the screen to settle).
package device

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/electricbubble/gadb"
)

// Options choose the adb server and the device.
type Options struct {
	// Host and Port of the adb server; "" and 0 mean localhost:5037, or
	// $ANDROID_ADB_SERVER_PORT when set, as the adb command does.
	Host string
	Port int
	// Serial picks the device; "" means the only one attached.
	Serial string
	// NoStartServer disables starting `adb start-server` when no server
	// answers on a loopback address.
	NoStartServer bool
	// Width and Height, when both set, replace what `wm size` and the
	// orientation report (the --size flag).
	Width, Height int
	// SwipeDuration is the `input swipe` duration; 0 means 300 ms.
	SwipeDuration time.Duration
	// LookPath finds the adb binary; nil means exec.LookPath (tests replace it).
	LookPath func(string) (string, error)
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Device is one attached Android device.
type Device struct {
	dev    gadb.Device
	serial string
	model  string
	opts   Options

	// pullScreencap is set once `screencap -p` to stdout failed and the
	// file-and-pull fallback worked, so later captures go there directly.
	pullScreencap bool
	physW, physH  int // cached `wm size` (override honoured)
}

// ServerInstallHint says what to install when there is no adb at all.
const ServerInstallHint = "install the Android platform tools: `sudo apt-get install adb` on Debian/Ubuntu, " +
	"`brew install --cask android-platform-tools` on macOS, or the SDK Platform-Tools zip from " +
	"https://developer.android.com/tools/releases/platform-tools (then put adb on PATH)"

func (o Options) addr(getenv func(string) string) (string, int) {
	host, port := o.Host, o.Port
	if host == "" {
		host = "localhost"
	}
	if port == 0 {
		port = gadb.AdbServerPort
		if p, err := strconv.Atoi(getenv("ANDROID_ADB_SERVER_PORT")); err == nil && p > 0 {
			port = p
		}
	}
	return host, port
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Connect reaches the adb server (starting it when none answers on a
// loopback address and adb is on PATH) and picks the device.
func Connect(ctx context.Context, opts Options) (*Device, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = defaultGetenv
	}
	lookPath := opts.LookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	host, port := opts.addr(getenv)
	client, err := gadb.NewClientWith(host, port)
	if err != nil {
		if !isLoopback(host) || opts.NoStartServer {
			return nil, fmt.Errorf("no adb server answers at %s:%d (%v); start one there with `adb -P %d start-server` or pass --adb-host/--adb-port", host, port, err, port)
		}
		bin, lerr := lookPath("adb")
		if lerr != nil {
			return nil, fmt.Errorf("no adb server answers at %s:%d and there is no adb binary on PATH to start one: %s", host, port, ServerInstallHint)
		}
		if err := startServer(ctx, bin, port); err != nil {
			return nil, err
		}
		if client, err = gadb.NewClientWith(host, port); err != nil {
			return nil, fmt.Errorf("adb server at %s:%d after start-server: %w", host, port, err)
		}
	}
	return pick(host, port, client, opts)
}

func startServer(ctx context.Context, bin string, port int) error {
	cmd := exec.CommandContext(ctx, bin, "-P", strconv.Itoa(port), "start-server")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -P %d start-server: %w: %s", bin, port, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// attached is one line of `adb devices`.
type attached struct{ serial, state string }

// listDevices asks the server for every device with its state; gadb's own
// lists drop the state, which is what tells "unauthorized" apart.
func listDevices(host string, port int) ([]attached, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	const req = "host:devices"
	if _, err := fmt.Fprintf(c, "%04x%s", len(req), req); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	status := make([]byte, 4)
	if _, err := io.ReadFull(r, status); err != nil {
		return nil, err
	}
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n, err := strconv.ParseUint(string(l[:]), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("host:devices: bad length %q", l[:])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if string(status) != "OKAY" {
		return nil, fmt.Errorf("host:devices: %s", body)
	}
	var out []attached
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			out = append(out, attached{f[0], f[1]})
		}
	}
	return out, nil
}

func stateHint(state string) string {
	switch state {
	case "unauthorized":
		return "unlock the phone and accept the \"Allow USB debugging?\" prompt"
	case "offline":
		return "reconnect the cable or run `adb reconnect`"
	case "no", "no permissions":
		return "fix the USB permissions (udev rules) for adb"
	}
	return "wait until `adb devices` shows it as \"device\""
}

func describe(list []attached) string {
	var parts []string
	for _, a := range list {
		parts = append(parts, a.serial+" ("+a.state+")")
	}
	return strings.Join(parts, ", ")
}

func pick(host string, port int, client gadb.Client, opts Options) (*Device, error) {
	list, err := listDevices(host, port)
	if err != nil {
		return nil, fmt.Errorf("list devices on the adb server at %s:%d: %w", host, port, err)
	}
	var chosen attached
	switch {
	case opts.Serial != "":
		found := false
		for _, a := range list {
			if a.serial == opts.Serial {
				chosen, found = a, true
			}
		}
		if !found {
			if len(list) == 0 {
				return nil, fmt.Errorf("device %q not found: no devices attached (enable USB debugging and check `adb devices`; for a network device run `adb connect HOST:PORT`)", opts.Serial)
			}
			return nil, fmt.Errorf("device %q not found; attached: %s", opts.Serial, describe(list))
		}
	case len(list) == 0:
		return nil, errors.New("no Android device attached: connect a phone with USB debugging enabled (or start an emulator) and check `adb devices`")
	case len(list) > 1:
		return nil, fmt.Errorf("%d devices attached, choose one with --serial: %s", len(list), describe(list))
	default:
		chosen = list[0]
	}
	if chosen.state != "device" {
		return nil, fmt.Errorf("device %s is %s: %s", chosen.serial, chosen.state, stateHint(chosen.state))
	}
	devs, err := client.DeviceList()
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	for _, d := range devs {
		if d.Serial() == chosen.serial {
			model, _ := d.Model()
			if opts.SwipeDuration <= 0 {
				opts.SwipeDuration = 300 * time.Millisecond
			}
			return &Device{dev: d, serial: chosen.serial, model: model, opts: opts}, nil
		}
	}
	return nil, fmt.Errorf("device %s vanished while connecting", chosen.serial)
}

// Serial is the device's adb serial.
func (d *Device) Serial() string { return d.serial }

// Model is the device model the server reports ("" when unknown).
func (d *Device) Model() string { return d.model }

// shell runs one command line through the legacy shell service and returns
// its merged output. Old devices run it on a pty that turns "\n" into "\r\n";
// text callers strip the "\r".
func (d *Device) shell(ctx context.Context, line string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := d.dev.RunShellCommandWithBytes(line)
	if err != nil {
		return nil, fmt.Errorf("device %s: shell %q: %w", d.serial, line, err)
	}
	return out, nil
}

func (d *Device) shellText(ctx context.Context, line string) (string, error) {
	out, err := d.shell(ctx, line)
	return strings.ReplaceAll(string(out), "\r", ""), err
}
