package fakephone

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// run executes one simple command the way the device's shell would and
// returns its exit status; output goes to w (stdout and stderr merged, as the
// legacy shell service does).
func (d *Device) run(argv []string, w io.Writer) int {
	if len(argv) == 0 {
		return 0
	}
	switch argv[0] {
	case "wm":
		return d.runWM(argv[1:], w)
	case "dumpsys":
		return d.runDumpsys(argv[1:], w)
	case "screencap":
		return d.runScreencap(argv[1:], w)
	case "input":
		d.mu.Lock()
		d.inputs = append(d.inputs, append([]string(nil), argv...))
		d.mu.Unlock()
		if d.opts.InjectDenied {
			return d.injectDenied(w)
		}
		return d.runInput(argv[1:], w)
	case "ime":
		return d.runIME(argv[1:], w)
	case "settings":
		return d.runSettings(argv[1:], w)
	case "am":
		return d.runAm(argv[1:], w)
	case "rm":
		return d.runRm(argv[1:], w)
	case "cat":
		return d.runCat(argv[1:], w)
	case "uiautomator":
		return d.runUIAutomator(argv[1:], w)
	case "echo":
		fmt.Fprintln(w, strings.Join(argv[1:], " "))
		return 0
	case "true":
		return 0
	case "getprop":
		props := d.props()
		if len(argv) > 1 {
			fmt.Fprintln(w, props[argv[1]])
			return 0
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "[%s]: [%s]\n", k, props[k])
		}
		return 0
	default:
		// mksh's wording on Android for a command it cannot find.
		fmt.Fprintf(w, "/system/bin/sh: %s: inaccessible or not found\n", argv[0])
		return 127
	}
}

// physicalSize is the panel size in its natural orientation.
func (d *Device) physicalSize() (int, int) {
	w, h := d.phone.Size()
	if d.opts.Orientation%2 == 1 {
		w, h = h, w
	}
	return w, h
}

func (d *Device) runWM(args []string, w io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(w, "Window manager (window) commands:\n  size [reset|WxH|WdpxHdp]\n  density [reset|DENSITY]")
		return 0
	}
	switch args[0] {
	case "size":
		if len(args) > 1 {
			fmt.Fprintln(w, "Error: the fake device does not resize")
			return 1
		}
		pw, ph := d.physicalSize()
		fmt.Fprintf(w, "Physical size: %dx%d\n", pw, ph)
		if d.opts.OverrideWidth > 0 && d.opts.OverrideHeight > 0 {
			fmt.Fprintf(w, "Override size: %dx%d\n", d.opts.OverrideWidth, d.opts.OverrideHeight)
		}
		return 0
	case "density":
		fmt.Fprintf(w, "Physical density: %d\n", d.opts.Density)
		return 0
	default:
		fmt.Fprintf(w, "Error: unknown command '%s'\n", args[0])
		return 255
	}
}

func (d *Device) runDumpsys(args []string, w io.Writer) int {
	switch {
	case d.opts.HideRotation && len(args) >= 1:
		fmt.Fprintf(w, "%s (dumpsys %s)\n  nothing about rotation here\n", strings.ToUpper(args[0]), args[0])
	case len(args) >= 1 && args[0] == "input":
		d.writeDumpsysInput(w)
	case len(args) >= 1 && args[0] == "window":
		d.writeDumpsysWindowDisplays(w)
	case len(args) >= 1 && args[0] == "display":
		d.writeDumpsysDisplay(w)
	case len(args) == 2 && args[0] == "SurfaceFlinger" && args[1] == "--display-id":
		d.writeDisplayIDs(w)
	default:
		name := "<none>"
		if len(args) > 0 {
			name = args[0]
		}
		fmt.Fprintf(w, "Can't find service: %s\n", name)
	}
	return 0
}

func (d *Device) runScreencap(args []string, w io.Writer) int {
	asPNG := false
	file, display := "", ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-p":
			asPNG = true
		case a == "-d" && i+1 < len(args):
			i++
			display = args[i]
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(w, "screencap: invalid option -- '%s'\nusage: screencap [-hp] [-d display-id] [FILENAME]\n", strings.TrimLeft(a, "-"))
			return 1
		default:
			file = a
		}
	}
	if file != "" && strings.HasSuffix(file, ".png") {
		asPNG = true
	}
	if !asPNG {
		fmt.Fprintln(w, "screencap: the fake device only writes PNG (use -p)")
		return 1
	}
	time.Sleep(d.opts.ScreencapDelay)
	img, warn, err := d.screencapDisplay(display)
	if err != nil {
		fmt.Fprintf(w, "Error: %v\n", err)
		return 1
	}
	fmt.Fprint(w, warn)
	if file != "" {
		d.mu.Lock()
		d.files[file] = deviceFile{data: append([]byte(nil), img...), mode: 0o100644, mtime: 1700000000}
		d.mu.Unlock()
		return 0
	}
	if d.opts.ScreencapStdout != nil {
		img = d.opts.ScreencapStdout(append([]byte(nil), img...))
	}
	_, _ = w.Write(img)
	return 0
}

func (d *Device) runRm(args []string, w io.Writer) int {
	force := false
	status := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			force = force || strings.Contains(a, "f")
			continue
		}
		d.mu.Lock()
		_, ok := d.files[a]
		delete(d.files, a)
		d.mu.Unlock()
		if !ok && !force {
			fmt.Fprintf(w, "rm: %s: No such file or directory\n", a)
			status = 1
		}
	}
	return status
}

func (d *Device) runCat(args []string, w io.Writer) int {
	status := 0
	for _, a := range args {
		d.mu.Lock()
		f, ok := d.files[a]
		d.mu.Unlock()
		if !ok {
			fmt.Fprintf(w, "cat: %s: No such file or directory\n", a)
			status = 1
			continue
		}
		_, _ = w.Write(f.data)
	}
	return status
}

// UIDumper is a Phone that describes its screen as `uiautomator dump`
// does (the XML hierarchy); RecordingPhone and package sim's phone are.
type UIDumper interface {
	UIAutomatorDump() ([]byte, error)
}

// uiDumpDefault is where `uiautomator dump` writes without a file name.
const uiDumpDefault = "/sdcard/window_dump.xml"

// runUIAutomator serves `uiautomator dump [--compressed] [FILE]` with
// uiautomator's own messages (its "hierchary" typo included). It reports
// failure in words, exiting 0, as uiautomator does.
func (d *Device) runUIAutomator(args []string, w io.Writer) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprintln(w, "Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\ndump: creates an XML dump of current UI hierarchy")
		return 0
	}
	file := uiDumpDefault
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			file = a
		}
	}
	dumper, ok := d.phone.(UIDumper)
	if !ok {
		fmt.Fprintln(w, "ERROR: null root node returned by UiTestAutomationBridge.")
		return 0
	}
	xml, err := dumper.UIAutomatorDump()
	if err != nil {
		fmt.Fprintf(w, "ERROR: %v\n", err)
		return 0
	}
	d.mu.Lock()
	d.files[file] = deviceFile{data: xml, mode: 0o100660, mtime: 1700000000}
	d.mu.Unlock()
	fmt.Fprintf(w, "UI hierchary dumped to: %s\n", file)
	return 0
}

var inputSources = map[string]bool{
	"keyboard": true, "mouse": true, "joystick": true, "touchnavigation": true, "touchpad": true,
	"trackball": true, "stylus": true, "dpad": true, "gesture": true, "touchscreen": true, "gamepad": true,
}

var keyNames = map[string]int{
	"KEYCODE_HOME": 3, "KEYCODE_BACK": 4, "KEYCODE_ENTER": 66, "KEYCODE_DEL": 67,
	"KEYCODE_TAB": 61, "KEYCODE_SPACE": 62, "KEYCODE_APP_SWITCH": 187,
}

func (d *Device) runInput(args []string, w io.Writer) int {
	if len(args) > 0 && inputSources[args[0]] {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(w, "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]")
		return 1
	}
	cmd, rest := args[0], args[1:]
	bad := func() int {
		fmt.Fprintf(w, "Error: Invalid arguments for command: %s\n", cmd)
		return 1
	}
	nums := func(ss []string) ([]int, bool) {
		out := make([]int, len(ss))
		for i, s := range ss {
			f, err := strconv.ParseFloat(s, 32)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, false
			}
			out[i] = int(f)
		}
		return out, true
	}
	switch cmd {
	case "text":
		if len(rest) != 1 {
			return bad()
		}
		if !virtualKeyboardTypes(rest[0]) {
			return d.nonASCIIInputFailure(w)
		}
		d.phone.Text(AndroidInputText(rest[0]))
	case "tap":
		v, ok := nums(rest)
		if !ok || len(v) != 2 {
			return bad()
		}
		d.phone.Tap(v[0], v[1])
	case "swipe":
		v, ok := nums(rest)
		if !ok || (len(v) != 4 && len(v) != 5) {
			return bad()
		}
		ms := 300 // Android's default swipe duration
		if len(v) == 5 && v[4] >= 0 {
			ms = v[4]
		}
		d.phone.Swipe(v[0], v[1], v[2], v[3], ms)
	case "keyevent":
		var codes []int
		for _, a := range rest {
			if a == "--longpress" || a == "--doubletap" {
				continue
			}
			if c, ok := keyNames[a]; ok {
				codes = append(codes, c)
				continue
			}
			c, err := strconv.Atoi(a)
			if err != nil || c < 0 {
				fmt.Fprintf(w, "Error: Unknown keycode: %s\n", a)
				return 1
			}
			codes = append(codes, c)
		}
		if len(codes) == 0 {
			return bad()
		}
		for _, c := range codes {
			d.phone.KeyEvent(c)
		}
	default:
		fmt.Fprintf(w, "Error: Unknown command: %s\n", cmd)
		return 1
	}
	return 0
}

// AndroidInputText is what Android's `input text ARG` types for the argument
// it receives: every "%s" becomes a space, scanning left to right exactly as
// InputShellCommand.sendText does (so "%%s" types "% ").
func AndroidInputText(arg string) string {
	b := []byte(arg)
	escape := false
	for i := 0; i < len(b); i++ {
		if escape {
			escape = false
			if b[i] == 's' {
				b[i] = ' '
				b = append(b[:i-1], b[i:]...)
				i--
			}
		}
		if b[i] == '%' {
			escape = true
		}
	}
	return string(bytes.Clone(b))
}
