// Package fakephone is a fake Android device that speaks the ADB transport
// protocol over TCP on 127.0.0.1, so that a real `adb` server reaches it with
// `adb connect 127.0.0.1:PORT` and every byte between client, server and
// device goes through the real protocol.
//
// The device answers CNXN without AUTH, serves the legacy `shell:` service
// (raw output, no exit status) and, when Options.ShellV2 advertises it, shell
// protocol v2 (`shell,v2,raw:`: packets with the exit status), running
// command lines through a POSIX-sh-like parser that records what a
// real shell would have run, plus the `sync:` file service. Screen content and
// input go through a Phone, so a simulator can stand in for the screen.
//
// `autoui sim` serves its simulated phone through it, and the tests use it
// with a real adb server (Server). It imports no testing: package phonetest
// holds the testing.TB helpers that close devices and servers when a test
// ends.
package fakephone

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// Phone is the screen and input behind the fake device. Package sim
// implements it structurally.
type Phone interface {
	Size() (width, height int)
	Screencap() ([]byte, error) // PNG bytes of the current screen
	Tap(x, y int)
	Swipe(x1, y1, x2, y2, durationMs int)
	Text(s string) // the exact text `input text` would type (%s already turned into spaces, shell quoting removed)
	KeyEvent(code int)
}

// Options configure a fake device. The zero value is a portrait phone at
// protocol version 0x01000001 holding a 1080x2400 recording Phone.
type Options struct {
	// Phone serves the screen and input; nil means a RecordingPhone holding a
	// 1080x2400 gray PNG.
	Phone Phone
	// Android is the Android version (MinAndroid..MaxAndroid) whose output
	// the device prints (dumpsys formats, getprop, `input` failures); 0
	// means DefaultAndroid.
	Android int
	// Orientation is the display rotation in quarter turns (0-3), reported by
	// dumpsys in the Android version's format. With 1 or 3 the physical size `wm size` prints is the
	// Phone's size swapped, as on a phone held sideways.
	Orientation int
	// OverrideSize, when set, adds an "Override size:" line to `wm size`, like
	// `wm size WxH` does on a real device.
	OverrideWidth, OverrideHeight int
	// Density is what `wm density` prints; 0 means 420.
	Density int
	// ProtocolVersion is the version the device offers in CNXN; 0 means
	// 0x01000001 (no checksums). 0x01000000 makes both sides checksum.
	ProtocolVersion uint32
	// MaxPayload is the device's CNXN max payload; 0 means 256 KiB.
	MaxPayload uint32
	// PTY emulates pre-Android-7 adbd, which ran `shell:` commands on a
	// pseudo-terminal that turns every "\n" of the output into "\r\n".
	PTY bool
	// ScreencapStdout, when set, rewrites what `screencap -p` writes to stdout
	// (e.g. prepend linker warnings, or return nothing); files written by
	// `screencap -p FILE` are not affected.
	ScreencapStdout func(png []byte) []byte
	// DropWhen is called with every shell command line before it runs; when it
	// returns true the device drops the connection mid-command and refuses
	// reconnects, like a phone unplugged during an episode.
	DropWhen func(line string) bool
	// Unauthorized makes the device ask for authentication and trust no key,
	// so the server lists it "unauthorized" (the prompt never accepted).
	Unauthorized bool
	// HideRotation leaves every rotation line out of dumpsys, like ROMs
	// whose dumpsys prints none that autoui knows.
	HideRotation bool
	// InactiveDisplay gives the device a second physical display, listed
	// first and switched off, like a folded phone's inner panel: screencap
	// without -d captures it (black, after a warning), `dumpsys display`
	// shows it OFF.
	InactiveDisplay bool
	// ShellV2 advertises the shell_v2 feature and serves `shell,v2,...:`,
	// whose packets carry stdout, stderr and the exit status apart.
	ShellV2 bool
	// NoExec refuses the exec: service (`adb exec-out`), like adbd before
	// Android 5.
	NoExec bool
	// CutWhen is called with every shell and exec command line; when it
	// returns true the device sends only the first half of the output and
	// ends the stream, as when the link falls mid-transfer: the client sees
	// a short read that ends like a normal one.
	CutWhen func(line string) bool
	// HangWhen is called with every shell command line; when it returns true
	// the command never answers (until the device closes), like a wedged
	// system_server.
	HangWhen func(line string) bool
	// ADBKeyboard installs the ADBKeyboard IME: `ime list -a -s` lists it,
	// and while it is selected its ADB_INPUT_B64 broadcast types text.
	ADBKeyboard bool
	// IMESwitchDelay is how long after `ime set` the new IME takes over:
	// until then `settings get secure default_input_method` names the old
	// one and ADBKeyboard's receiver is not registered (it registers in
	// AdbIME.onCreate), so a broadcast types nothing yet still completes.
	IMESwitchDelay time.Duration
	// ScreencapDelay is how long `screencap` takes before it writes, as on
	// a phone, where encoding a 1080x2400 PNG takes a few hundred ms.
	ScreencapDelay time.Duration
	// InjectDenied makes every `input` throw SecurityException (INJECT_EVENTS),
	// like a Xiaomi/Redmi/POCO phone without "USB debugging (Security
	// settings)".
	InjectDenied bool
	// Product, Model and DeviceName fill the CNXN banner (adb devices -l);
	// Manufacturer is getprop's ro.product.manufacturer.
	Product, Model, DeviceName, Manufacturer string
}

// ShellCommand is one command line the device received through `shell:`.
type ShellCommand struct {
	Line string
	// Commands are the simple commands a POSIX shell would have executed for
	// Line, in order, each as the argv it would see after word splitting and
	// quote removal (commands inside $(...) and backticks included, before
	// the command that uses their output). A safely quoted line has exactly one.
	Commands [][]string
	// Hazards names shell syntax found outside quotes that a real shell would
	// act on: separators (";", "&&", "|", newline), substitutions ("$(", "`"),
	// parameter expansion ("$NAME"), redirections (">"), globs, comments, brace
	// and tilde expansion. Empty for a safely quoted line.
	Hazards []string
	// SyntaxErr is the shell's complaint when the line does not parse; nothing
	// ran then.
	SyntaxErr string
	// Exit is the status of the last command (127 for an unknown one).
	Exit int
	// StatusMarker is set when Line ended with StatusMarker, the device
	// package's exit-status echo; Commands and Hazards then describe the line
	// without it, and the device printed the marker with Exit like a shell.
	StatusMarker bool
}

// StatusMarker is the suffix package device appends to every command it
// sends, so that the legacy shell service, which reports no exit status,
// prints one.
const StatusMarker = "; echo __autoui_rc=$?"

// Device is a running fake device.
type Device struct {
	opts   Options
	phone  Phone
	ln     net.Listener
	closed chan struct{}

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	dropped  bool
	shell    []ShellCommand
	inputs   [][]string
	files    map[string]deviceFile
	sessions int
	// refuseUntil makes the device refuse connections for a while (Blip).
	refuseUntil time.Time

	imes       []string
	enabledIME map[string]bool
	currentIME string
	// pendingIME takes over from currentIME at pendingAt (IMESwitchDelay).
	pendingIME string
	pendingAt  time.Time

	// execMu serializes command execution so Phones need not be thread-safe.
	execMu sync.Mutex
	wg     sync.WaitGroup
}

type deviceFile struct {
	data  []byte
	mode  uint32
	mtime uint32
}

// Start listens on a free loopback port and serves until Close. Tests use
// phonetest.New, which closes the device when the test ends.
func Start(opts Options) (*Device, error) {
	return startAt(opts, "127.0.0.1:0")
}

// startAt is Start listening on addr.
func startAt(opts Options, addr string) (*Device, error) {
	if opts.Phone == nil {
		p, err := NewRecordingPhone(GrayPNG(1080, 2400))
		if err != nil {
			return nil, err
		}
		opts.Phone = p
	}
	if opts.ProtocolVersion == 0 {
		opts.ProtocolVersion = versionSkipChecksum
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 256 * 1024
	}
	if opts.Density == 0 {
		opts.Density = 420
	}
	if opts.Product == "" {
		opts.Product = "autoui_fake"
	}
	if opts.Model == "" {
		opts.Model = "Fake_Phone"
	}
	if opts.DeviceName == "" {
		opts.DeviceName = "fake"
	}
	if opts.Manufacturer == "" {
		opts.Manufacturer = "Google"
	}
	if opts.Android == 0 {
		opts.Android = DefaultAndroid
	}
	if opts.Android < MinAndroid || opts.Android > MaxAndroid {
		return nil, fmt.Errorf("fake device: Android %d is not modelled (want %d-%d)", opts.Android, MinAndroid, MaxAndroid)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake device listen: %w", err)
	}
	d := &Device{
		opts: opts, phone: opts.Phone, ln: ln, closed: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, files: map[string]deviceFile{},
	}
	d.initIMEs()
	d.wg.Add(1)
	go d.acceptLoop()
	return d, nil
}

// Addr is the device's TCP address, which is also the serial adb gives it.
func (d *Device) Addr() string { return d.ln.Addr().String() }

// Serial is the name the adb server lists the device under after connect.
func (d *Device) Serial() string { return d.Addr() }

// Phone is the screen and input behind the device.
func (d *Device) Phone() Phone { return d.phone }

// Close stops the device and waits for its goroutines.
func (d *Device) Close() {
	d.mu.Lock()
	select {
	case <-d.closed:
		d.mu.Unlock()
		return
	default:
	}
	close(d.closed)
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	_ = d.ln.Close()
	d.wg.Wait()
}

// Drop cuts the connection to the adb server now and refuses reconnects.
func (d *Device) Drop() {
	d.mu.Lock()
	d.dropped = true
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	_ = d.ln.Close()
}

// Blip cuts the connection to the adb server and refuses new ones for
// the given time, like a phone whose USB or Wi-Fi link falls briefly; the
// server lists it "offline" until someone (adb, or `adb connect`)
// reconnects.
func (d *Device) Blip(down time.Duration) {
	d.mu.Lock()
	d.refuseUntil = time.Now().Add(down)
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
}

// Dropped reports whether the device has dropped its connection.
func (d *Device) Dropped() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// Shell returns every command line received so far, in order.
func (d *Device) Shell() []ShellCommand {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ShellCommand(nil), d.shell...)
}

// Inputs returns the argv of every `input` invocation the shell ran, exactly
// as the device's `input` command received it.
func (d *Device) Inputs() [][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([][]string, len(d.inputs))
	for i, a := range d.inputs {
		out[i] = append([]string(nil), a...)
	}
	return out
}

// File returns a file stored on the device (by screencap FILE or a push).
func (d *Device) File(path string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[path]
	return f.data, ok
}

// Sessions counts the transport connections the device has accepted.
func (d *Device) Sessions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions
}

func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		if d.dropped || time.Now().Before(d.refuseUntil) {
			d.mu.Unlock()
			_ = c.Close()
			continue
		}
		d.conns[c] = struct{}{}
		d.sessions++
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			s := newSession(d, c)
			s.serve()
			d.mu.Lock()
			delete(d.conns, c)
			d.mu.Unlock()
		}()
	}
}

func (d *Device) banner() string {
	// Without shell_v2 the server and clients use the legacy raw `shell:`
	// service (no exit status).
	features := "cmd"
	if d.opts.ShellV2 {
		features = "shell_v2,cmd"
	}
	return fmt.Sprintf("device::ro.product.name=%s;ro.product.model=%s;ro.product.device=%s;features=%s",
		d.opts.Product, d.opts.Model, d.opts.DeviceName, features)
}

// cut reports whether CutWhen asks to cut line's output short.
func (d *Device) cut(line string) bool { return d.opts.CutWhen != nil && d.opts.CutWhen(line) }

func (d *Device) serve(line string, pty bool) (out []byte, exit int, ok bool) {
	if d.opts.DropWhen != nil && d.opts.DropWhen(line) {
		d.Drop()
		return nil, 0, false
	}
	if d.opts.HangWhen != nil && d.opts.HangWhen(line) {
		<-d.closed
		return nil, 0, false
	}
	d.execMu.Lock()
	defer d.execMu.Unlock()
	rec := ShellCommand{Line: line}
	body, marked := strings.CutSuffix(line, StatusMarker)
	rec.StatusMarker = marked
	cmds, hazards, err := ParseShell(body)
	rec.Commands, rec.Hazards = cmds, hazards
	var buf bytes.Buffer
	if err != nil {
		// The shell rejects the whole line: the marker's echo never runs.
		rec.SyntaxErr = err.Error()
		rec.Exit = 1
		fmt.Fprintf(&buf, "/system/bin/sh: %v\n", err)
	} else {
		for _, argv := range cmds {
			rec.Exit = d.run(argv, &buf)
		}
		if marked {
			fmt.Fprintf(&buf, "__autoui_rc=%d\n", rec.Exit)
		}
	}
	d.mu.Lock()
	d.shell = append(d.shell, rec)
	d.mu.Unlock()
	out = buf.Bytes()
	if pty {
		out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
	}
	return out, rec.Exit, true
}
