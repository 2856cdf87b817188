// Package device drives an Android device over ADB (through an adb server,
// speaking its smart-socket protocol itself so that every command has a
// deadline): it picks the device, reads the screen size and orientation,
// captures screenshots, reads the UI hierarchy and turns Auto-UI actions
// into `input` shell commands with safe quoting. A *Device is an
// agent.Phone: package agent plays episodes on it.
package device

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/autoui/autoui/device/adbhost"
)

// Options choose the adb server and the device, and how commands travel.
type Options struct {
	// Host and Port of the adb server; "" and 0 mean the one the adb
	// command would use (ServerAddr).
	Host string
	Port int
	// Serial picks the device; "" means $ANDROID_SERIAL when set, else the
	// only one attached.
	Serial string
	// NoStartServer disables starting `adb start-server` when no server
	// answers on a loopback address.
	NoStartServer bool
	// Width and Height, when both set, replace what `wm size` and the
	// orientation report (the --size flag).
	Width, Height int
	// SwipeDuration is the `input swipe` duration; 0 means 300 ms.
	SwipeDuration time.Duration
	// DialTimeout bounds reaching the adb server; 0 means 5 s.
	DialTimeout time.Duration
	// CommandTimeout bounds each device command (one shell line, one
	// screenshot, one pull); 0 means 30 s.
	CommandTimeout time.Duration
	// ReadRetries is how many times a read-only command (screencap,
	// dumpsys, getprop, wm size) is tried when the device is briefly offline
	// or the connection resets; 0 means 3, negative means once.
	ReadRetries int
	// NonASCII says how text outside ASCII is typed: TextAuto (""),
	// TextFold, TextRefuse or TextADBKeyboard (see typing.go).
	NonASCII string
	// MaxPixels refuses screenshots larger than this many pixels
	// (width*height), read from the PNG header before decoding; 0 means
	// preprocess.DefaultMaxPixels (the --max-pixels flag).
	MaxPixels int
	// LookPath finds the adb binary; nil means exec.LookPath (tests replace it).
	LookPath func(string) (string, error)
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Device is one attached Android device.
type Device struct {
	tr     *transport
	serial string
	model  string
	opts   Options

	// screencapMode is how screenshots are taken: "" (not yet known),
	// "exec-out", "stdout" or "pull"; it is settled by the first capture.
	screencapMode string
	physW, physH  int // cached `wm size` (override honoured)
	// shape caches the input size per screenshot shape, so dumpsys runs
	// only when the screen turns (see ScreenSize).
	shape    sizeCache
	lastShot image.Rectangle // bounds of the last screenshot
	ime      imeState
	// display is the physical display screencap captures ("-d ID"), "" for
	// the default; displayKnown says it was looked up (once a session).
	display      string
	displayKnown bool
	// shellV2 says the device speaks shell protocol v2 (exit status and
	// stderr in their own packets) instead of the legacy raw shell.
	shellV2 bool
}

// ServerInstallHint says what to install when there is no adb at all.
const ServerInstallHint = "install the Android platform tools: `sudo apt-get install adb` on Debian/Ubuntu, " +
	"`brew install --cask android-platform-tools` on macOS, or the SDK Platform-Tools zip from " +
	"https://developer.android.com/tools/releases/platform-tools (then put adb on PATH)"

// ServerAddr is the adb server Connect uses, as the adb command picks it:
// Host and Port where set, else $ADB_SERVER_SOCKET (tcp:[HOST:]PORT), else
// $ANDROID_ADB_SERVER_ADDRESS (default localhost) and
// $ANDROID_ADB_SERVER_PORT (default 5037).
func (o Options) ServerAddr() (string, int, error) {
	getenv := o.getenv()
	host, port := o.Host, o.Port
	if spec := getenv("ADB_SERVER_SOCKET"); spec != "" && host == "" && port == 0 {
		h, p, err := parseServerSocket(spec)
		if err != nil {
			return "", 0, err
		}
		host, port = h, p
	}
	if host == "" {
		host = getenv("ANDROID_ADB_SERVER_ADDRESS")
	}
	if host == "" {
		host = "localhost"
	}
	if port == 0 {
		port = defaultServerPort
		if p, err := strconv.Atoi(getenv("ANDROID_ADB_SERVER_PORT")); err == nil && p > 0 {
			port = p
		}
	}
	return host, port, nil
}

// getenv is Getenv, or the process's environment.
func (o Options) getenv() func(string) string {
	if o.Getenv != nil {
		return o.Getenv
	}
	return defaultGetenv
}

// ADBCommandEnv is the environment for an adb command given its server by
// -P: the variables that would name another server are left out.
func ADBCommandEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ADB_SERVER_SOCKET=") && !strings.HasPrefix(kv, "ANDROID_ADB_SERVER_ADDRESS=") {
			env = append(env, kv)
		}
	}
	return env
}

// parseServerSocket reads adb's socket spec for its server: tcp:PORT or
// tcp:HOST:PORT (autoui speaks to adb servers over TCP only).
func parseServerSocket(spec string) (string, int, error) {
	rest, ok := strings.CutPrefix(spec, "tcp:")
	host, ps := "", rest
	if i := strings.LastIndexByte(rest, ':'); ok && i >= 0 {
		host, ps = strings.Trim(rest[:i], "[]"), rest[i+1:]
	}
	port, err := strconv.Atoi(ps)
	if !ok || err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("ADB_SERVER_SOCKET %q: want tcp:PORT or tcp:HOST:PORT (the adb servers autoui reaches listen on TCP)", spec)
	}
	return host, port, nil
}

// defaultServerPort is where adb's server listens unless told otherwise.
const defaultServerPort = 5037

func (o Options) withDefaults() Options {
	if o.SwipeDuration <= 0 {
		o.SwipeDuration = 300 * time.Millisecond
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = defaultCommandTimeout
	}
	switch {
	case o.ReadRetries == 0:
		o.ReadRetries = defaultReadRetries
	case o.ReadRetries < 0:
		o.ReadRetries = 1
	}
	return o
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
	getenv := opts.getenv()
	lookPath := opts.LookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if err := ValidateNonASCII(opts.NonASCII); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	serialFromEnv := false
	if opts.Serial == "" {
		opts.Serial = getenv("ANDROID_SERIAL")
		serialFromEnv = opts.Serial != ""
	}
	host, port, err := opts.ServerAddr()
	if err != nil {
		return nil, err
	}
	srv := &transport{addr: net.JoinHostPort(host, strconv.Itoa(port)), dialTimeout: opts.DialTimeout, cmdTimeout: opts.CommandTimeout}
	if err := srv.ping(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch {
		case !isLoopback(host) || opts.NoStartServer:
			return nil, fmt.Errorf("no adb server answers at %s:%d (%v): start one there with `adb -P %d start-server` or pass --adb-host/--adb-port", host, port, oneLine(err.Error()), port)
		case !errors.Is(err, syscall.ECONNREFUSED):
			// Something listens there but does not answer: starting a server
			// would only talk to that same listener.
			return nil, fmt.Errorf("no adb server answers at %s:%d (%v): something listens there without answering; stop it (`adb -P %d kill-server` for a wedged adb) or pass --adb-port", host, port, oneLine(err.Error()), port)
		}
		bin, lerr := lookPath("adb")
		if lerr != nil {
			return nil, fmt.Errorf("no adb server answers at %s:%d and there is no adb binary on PATH to start one: %s", host, port, ServerInstallHint)
		}
		if err := startServer(ctx, bin, port, opts.CommandTimeout); err != nil {
			return nil, err
		}
		if err := srv.ping(ctx); err != nil {
			return nil, fmt.Errorf("adb server at %s:%d after start-server: %w", host, port, err)
		}
	}
	d, err := pick(ctx, srv, opts, serialFromEnv)
	if err != nil {
		return nil, err
	}
	if err := d.detectIME(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// ping asks the server for its version, which any adb server answers.
func (t *transport) ping(ctx context.Context) error {
	_, err := t.hostQuery(ctx, "host:version")
	return err
}

// hostQuery sends one host request and returns its payload.
func (t *transport) hostQuery(ctx context.Context, req string) (string, error) {
	cmdCtx, cancel := context.WithTimeout(ctx, t.cmdTimeout)
	defer cancel()
	c, err := t.dial(cmdCtx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	stop := context.AfterFunc(cmdCtx, func() { _ = c.Close() })
	defer stop()
	r := bufio.NewReader(c)
	if err := request(c, r, req); err != nil {
		return "", t.classify(ctx, cmdCtx, req, err)
	}
	out, err := adbhost.ReadString(r)
	if err != nil {
		return "", t.classify(ctx, cmdCtx, req, err)
	}
	return out, nil
}

// startServer runs `adb start-server` within limit: an adb that hangs (or a
// daemon child holding its output open) must not hold autoui past it.
func startServer(ctx context.Context, bin string, port int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-P", strconv.Itoa(port), "start-server")
	cmd.Env = ADBCommandEnv()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("%s -P %d start-server gave no answer within %s: check `adb devices` by hand, or start the server yourself", bin, port, limit)
	case err != nil:
		return fmt.Errorf("%s -P %d start-server: %w: %s", bin, port, err, oneLine(string(out)))
	}
	return nil
}

// attached is one line of `adb devices -l`.
type attached struct{ serial, state, model string }

// listDevices asks the server for every device with its state and model;
// the state is what tells "unauthorized" apart.
func (t *transport) listDevices(ctx context.Context) ([]attached, error) {
	body, err := t.hostQuery(ctx, "host:devices-l")
	if err != nil {
		return nil, err
	}
	var out []attached
	for _, line := range strings.Split(body, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a := attached{serial: f[0], state: f[1]}
		if f[1] == "no" && len(f) > 2 && f[2] == "permissions" {
			a.state = "no permissions"
		}
		for _, kv := range f[2:] {
			if m, ok := strings.CutPrefix(kv, "model:"); ok {
				a.model = m
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func describe(list []attached) string {
	var parts []string
	for _, a := range list {
		parts = append(parts, a.serial+" ("+a.state+")")
	}
	return strings.Join(parts, ", ")
}

// Device states that pass by themselves (a link re-established, a phone
// mid-handshake): Connect waits for these, bounded by the command timeout.
var passingStates = map[string]bool{"offline": true, "connecting": true, "authorizing": true}

// statePoll is how often Connect asks again while the device is offline.
const statePoll = 250 * time.Millisecond

func pick(ctx context.Context, srv *transport, opts Options, serialFromEnv bool) (*Device, error) {
	deadline := time.Now().Add(opts.CommandTimeout)
	for {
		list, err := srv.listDevices(ctx)
		if err != nil {
			return nil, fmt.Errorf("list devices on the adb server at %s: %w", srv.addr, err)
		}
		serial, err := srv.resolveSerial(ctx, list, opts.Serial, serialFromEnv)
		if err != nil {
			return nil, err
		}
		chosen, err := choose(list, serial, serialFromEnv)
		if err != nil {
			return nil, err
		}
		if chosen.state == "device" {
			tr := *srv
			tr.serial = chosen.serial
			d := &Device{tr: &tr, serial: chosen.serial, model: chosen.model, opts: opts}
			// The features tell the shell protocol; a server that cannot say
			// leaves the legacy one, which every device speaks.
			if f, err := srv.hostQuery(ctx, "host-serial:"+chosen.serial+":features"); err == nil {
				d.shellV2 = slices.Contains(strings.Split(strings.TrimSpace(f), ","), "shell_v2")
			}
			return d, nil
		}
		if !passingStates[chosen.state] || time.Now().After(deadline) {
			verb, waited := "is", ""
			if chosen.state == "no permissions" {
				verb = "has"
			}
			if passingStates[chosen.state] {
				waited = fmt.Sprintf(" (still, after %s)", opts.CommandTimeout)
			}
			return nil, fmt.Errorf("device %s %s %s%s: %s", chosen.serial, verb, chosen.state, waited, stateHint(chosen.serial, chosen.state))
		}
		if err := Sleep(ctx, statePoll); err != nil {
			return nil, err
		}
	}
}

// resolveSerial lets the server resolve a --serial/ANDROID_SERIAL that is
// not a listed serial: it also accepts model:, product:, device:, usb:,
// tcp:HOST:PORT and a host without its port, as `adb -s` does.
func (t *transport) resolveSerial(ctx context.Context, list []attached, serial string, serialFromEnv bool) (string, error) {
	if serial == "" || slices.ContainsFunc(list, func(a attached) bool { return a.serial == serial }) {
		return serial, nil
	}
	real, err := t.hostQuery(ctx, "host-serial:"+serial+":get-serialno")
	var se *serverError
	switch {
	case err == nil && strings.TrimSpace(real) != "":
		return strings.TrimSpace(real), nil
	case errors.As(err, &se) && strings.Contains(se.msg, "more than one"):
		return "", fmt.Errorf("device %q (%s) matches more than one device; attached: %s", serial, serialSource(serialFromEnv), describe(list))
	}
	return serial, nil // choose says it is not found
}

func serialSource(fromEnv bool) string {
	if fromEnv {
		return "ANDROID_SERIAL"
	}
	return "--serial"
}

// choose picks the device named by serial, or the only one attached.
func choose(list []attached, serial string, serialFromEnv bool) (attached, error) {
	source := serialSource(serialFromEnv)
	switch {
	case serial != "":
		for _, a := range list {
			if a.serial == serial {
				return a, nil
			}
		}
		if len(list) == 0 {
			return attached{}, fmt.Errorf("device %q (%s) not found: no devices attached (enable USB debugging and check `adb devices`; for a network device run `adb connect HOST:PORT`)", serial, source)
		}
		return attached{}, fmt.Errorf("device %q (%s) not found; attached: %s", serial, source, describe(list))
	case len(list) == 0:
		return attached{}, errors.New("no Android device attached: connect a phone with USB debugging enabled (or start an emulator, or `adb connect HOST:PORT`) and check `adb devices`")
	case len(list) > 1:
		return attached{}, fmt.Errorf("%d devices attached, choose one with --serial or ANDROID_SERIAL: %s", len(list), describe(list))
	}
	return list[0], nil
}

// Serial is the device's adb serial.
func (d *Device) Serial() string { return d.serial }

// Model is the device model the server reports ("" when unknown).
func (d *Device) Model() string { return d.model }

// shell runs one command line through the legacy shell service and returns
// its merged output. Old devices run it on a pty that turns "\n" into "\r\n";
// text callers strip the "\r".
func (d *Device) shell(ctx context.Context, line string) ([]byte, error) {
	out, err := d.tr.service(ctx, "shell:"+line)
	if err != nil {
		return nil, d.wrap(fmt.Sprintf("shell %q", line), err)
	}
	return out, nil
}

// readShellText runs a read-only command and returns its text output
// ("\r" removed: old devices answer on a pty). Output cut short by a falling
// link (which ends like a normal stream) is told from a whole one by its
// exit status, and retried with backoff like a brief offline or a reset
// connection.
func (d *Device) readShellText(ctx context.Context, line string) (string, error) {
	var out string
	err := retry(ctx, d.opts.ReadRetries, func() error {
		var err error
		out, _, err = d.execShell(ctx, line)
		return err
	})
	if err != nil {
		return "", d.wrap(fmt.Sprintf("shell %q", line), err)
	}
	return out, nil
}

// execShell runs one command line and returns its output ("\r" removed)
// and exit status: through shell protocol v2 where the device has it, else
// the legacy shell with the status echoed after the output. Without a
// status the output was cut short (errTruncated).
func (d *Device) execShell(ctx context.Context, line string) (string, int, error) {
	if d.shellV2 {
		raw, err := d.tr.service(ctx, "shell,v2,raw:"+line)
		if err != nil {
			return "", 0, err
		}
		out, rc, ok := parseShellV2(raw)
		if !ok {
			return "", 0, errTruncated
		}
		return strings.ReplaceAll(out, "\r", ""), rc, nil
	}
	raw, err := d.tr.service(ctx, "shell:"+line+statusEcho)
	if err != nil {
		return "", 0, err
	}
	out, rc, ok := splitExitStatus(strings.ReplaceAll(string(raw), "\r", ""))
	if !ok {
		return "", 0, errTruncated
	}
	return out, rc, nil
}

// parseShellV2 reads shell protocol v2 packets (id byte, little-endian
// length, data): stdout and stderr are merged in order, as the legacy
// shell does; ok is false without an exit packet.
func parseShellV2(b []byte) (out string, rc int, ok bool) {
	var buf strings.Builder
	for len(b) >= 5 {
		id, n := b[0], binary.LittleEndian.Uint32(b[1:5])
		if uint64(len(b)-5) < uint64(n) {
			break
		}
		data := b[5 : 5+n]
		switch id {
		case 1, 2: // stdout, stderr
			buf.Write(data)
		case 3: // exit
			if n == 1 {
				return buf.String(), int(data[0]), true
			}
		}
		b = b[5+n:]
	}
	return buf.String(), 0, false
}

func (d *Device) shellText(ctx context.Context, line string) (string, error) {
	out, err := d.shell(ctx, line)
	return strings.ReplaceAll(string(out), "\r", ""), err
}

// Property reads one system property with getprop (e.g.
// "ro.build.version.sdk"); "" when it is unset. Retried like every read.
func (d *Device) Property(ctx context.Context, name string) (string, error) {
	out, err := d.readShellText(ctx, "getprop "+ShellQuote(name))
	return strings.TrimSpace(out), err
}

// Sleep waits d unless ctx ends first: the pause between polls of a device
// (and of the agent waiting for a screen to settle).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
