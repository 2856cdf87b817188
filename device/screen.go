package device

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"regexp"
	"strconv"
	"strings"

	"github.com/autoui/autoui/engine/preprocess"
)

var (
	reWMSize = regexp.MustCompile(`(?m)^\s*(Physical|Override) size:\s*(\d+)x(\d+)`)
	// rotationValue is how Android prints a rotation: quarter turns
	// ("1"), degrees ("90"), or an enum ("ROTATION_90", "Rotation90").
	rotationValue = `((?:ROTATION_|Rotation)?\d+)`
	// Patterns in the order they are trusted; each names where it is printed.
	orientationPatterns = []*regexp.Regexp{
		// dumpsys input, touch mapper: Android <= 13.
		regexp.MustCompile(`SurfaceOrientation:\s*` + rotationValue),
		// dumpsys input, touch mapper: Android 14 ("1"), 15+ ("Rotation90").
		regexp.MustCompile(`InputDeviceOrientation:\s*` + rotationValue),
		// dumpsys input, touch mapper's viewport: Android 10+.
		regexp.MustCompile(`Viewport INTERNAL:[^\n]*?\borientation=` + rotationValue),
		// dumpsys display (and older dumpsys input): the viewport object.
		regexp.MustCompile(`DisplayViewport\{[^}]*?\borientation=` + rotationValue),
		// dumpsys window displays: DisplayRotation and DisplayContent.
		regexp.MustCompile(`mCurrentRotation=` + rotationValue),
		regexp.MustCompile(`\bmRotation=` + rotationValue),
	}
)

// ParseWMSize reads `wm size` output: the override size when present (that
// is what apps and input see), else the physical size.
func ParseWMSize(out string) (width, height int, err error) {
	var phys, over []int
	for _, m := range reWMSize.FindAllStringSubmatch(out, -1) {
		w, _ := strconv.Atoi(m[2])
		h, _ := strconv.Atoi(m[3])
		if m[1] == "Override" {
			over = []int{w, h}
		} else {
			phys = []int{w, h}
		}
	}
	switch {
	case over != nil:
		return over[0], over[1], nil
	case phys != nil:
		return phys[0], phys[1], nil
	}
	return 0, 0, fmt.Errorf("no size in `wm size` output %q", strings.TrimSpace(out))
}

// ParseOrientation reads the display rotation (0-3 quarter turns) from any
// of the outputs Android 10-16 print: `dumpsys input` (SurfaceOrientation,
// InputDeviceOrientation, Viewport INTERNAL), `dumpsys display`
// (DisplayViewport) or `dumpsys window displays` (mCurrentRotation,
// mRotation), in quarter turns, degrees or ROTATION_n/RotationN.
func ParseOrientation(out string) (int, bool) {
	for _, re := range orientationPatterns {
		if m := re.FindStringSubmatch(out); m != nil {
			if o, ok := parseRotation(m[1]); ok {
				return o, true
			}
		}
	}
	return 0, false
}

func parseRotation(s string) (int, bool) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "ROTATION_"), "Rotation")
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return 0, false
	case n >= 90 && n%90 == 0:
		n /= 90
	case n > 3:
		return 0, false
	}
	return n % 4, true
}

// orientationSources are asked in turn until one says the rotation.
var orientationSources = []string{"dumpsys input", "dumpsys window displays", "dumpsys display"}

var (
	// reInputDevice starts a device's section of `dumpsys input`.
	reInputDevice = regexp.MustCompile(`(?m)^\s*Device -?\d+: `)
	// reNoDisplay marks a touch device without a display: a negative
	// PhysicalWidth (Android 10-13; android_env skips these too) or a
	// disabled touch mapper (every version).
	reNoDisplay = regexp.MustCompile(`PhysicalWidth:\s*-\d+px|Touch Input Mapper \(mode - (?i:disabled)\)`)
	// reViewportDisplay is the physical display a viewport belongs to, in
	// dumpsys input (uniqueId=local:ID) and dumpsys display
	// (uniqueId='local:ID').
	reViewportDisplay = regexp.MustCompile(`uniqueId='?local:(\d+)`)
	// reDisplayViewport is one viewport of `dumpsys display`.
	reDisplayViewport = regexp.MustCompile(`DisplayViewport\{[^}]*\}`)
)

// orientationOf reads the rotation of display (a physical display id, ""
// for the default) from one source's output. Touch devices without a
// display and viewports of another display are skipped: a foldable lists
// its switched-off panel's touchscreen, with a stale rotation, before the
// one in use.
func orientationOf(out, display string) (int, bool) {
	for _, part := range displayParts(out, display) {
		if o, ok := ParseOrientation(part); ok {
			return o, true
		}
	}
	return 0, false
}

// displayParts splits dumpsys output into what may describe display:
// dumpsys input's device sections, dumpsys display's viewports, else the
// whole output.
func displayParts(out, display string) []string {
	var parts []string
	if starts := reInputDevice.FindAllStringIndex(out, -1); len(starts) > 0 {
		for i, s := range starts {
			end := len(out)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			parts = append(parts, out[s[0]:end])
		}
	} else if vps := reDisplayViewport.FindAllString(out, -1); len(vps) > 0 {
		parts = vps
	} else {
		return []string{out}
	}
	kept := parts[:0]
	for _, p := range parts {
		if reNoDisplay.MatchString(p) {
			continue
		}
		if m := reViewportDisplay.FindStringSubmatch(p); m != nil && display != "" && m[1] != display {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// Orientation is the current display rotation in quarter turns (0 portrait
// for a phone, 1 and 3 landscape), read with dumpsys for the display
// screenshots capture.
func (d *Device) Orientation(ctx context.Context) (int, error) {
	if _, err := d.screencapArgs(ctx); err != nil {
		return 0, err
	}
	for _, cmd := range orientationSources {
		out, err := d.readShellText(ctx, cmd)
		if err != nil {
			return 0, err
		}
		if o, ok := orientationOf(out, d.display); ok {
			return o, nil
		}
	}
	return 0, fmt.Errorf("device %s: no display orientation in `%s`", d.serial, strings.Join(orientationSources, "`, `"))
}

// sizeCache is the input size worked out for one screenshot shape.
type sizeCache struct {
	shotW, shotH int // the screenshot shape it was computed for
	w, h         int
}

// physicalSize reads `wm size` once per session.
func (d *Device) physicalSize(ctx context.Context) (int, int, error) {
	if d.physW == 0 {
		out, err := d.readShellText(ctx, "wm size")
		if err != nil {
			return 0, 0, err
		}
		if d.physW, d.physH, err = ParseWMSize(out); err != nil {
			return 0, 0, fmt.Errorf("device %s: %w", d.serial, err)
		}
	}
	return d.physW, d.physH, nil
}

// ScreenSize is the size input coordinates refer to: the --size override
// when given, else `wm size` (override honoured, read once) turned to the
// current orientation. The orientation is asked with dumpsys only when the
// last screenshot's shape differs from the one it was last asked for, and
// the screenshot's shape (portrait or landscape) has the last word: it is
// what the model sees, and it is right when dumpsys says nothing usable.
func (d *Device) ScreenSize(ctx context.Context) (width, height int, err error) {
	if d.opts.Width > 0 && d.opts.Height > 0 {
		return d.opts.Width, d.opts.Height, nil
	}
	shotW, shotH := d.lastShot.Dx(), d.lastShot.Dy()
	if d.shape.w > 0 && shotW > 0 && d.shape.shotW == shotW && d.shape.shotH == shotH {
		return d.shape.w, d.shape.h, nil
	}
	pw, ph, err := d.physicalSize(ctx)
	if err != nil {
		return 0, 0, err
	}
	o, oerr := d.Orientation(ctx)
	if oerr != nil && (shotW == 0 || ctx.Err() != nil) {
		return 0, 0, oerr
	}
	// wm size is in the display's natural orientation; a quarter turn
	// swaps the sides.
	w, h := pw, ph
	if oerr == nil && o%2 == 1 {
		w, h = h, w
	}
	if shotW > 0 && shotW != shotH && w != h && (shotW > shotH) != (w > h) {
		w, h = h, w // dumpsys disagrees with (or missed) what the screen shows
	}
	d.shape = sizeCache{shotW: shotW, shotH: shotH, w: w, h: h}
	return w, h, nil
}

// Screenshot is one capture: the PNG as the device wrote it and its decode.
type Screenshot struct {
	PNG   []byte
	Image image.Image
	// Via says how it was captured: "exec-out" (the binary-safe exec:
	// service), "stdout" (the shell: service) or "pull" (a file and sync).
	Via string
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// screencapPath is where the pull fallback writes; /data/local/tmp is
// writable by the shell user on every Android version.
const screencapPath = "/data/local/tmp/autoui-screencap.png"

// Capture modes, best first: exec-out never goes through a pty (Android 5+),
// shell stdout works everywhere but may be mangled, pull always works.
var screencapModes = []string{"exec-out", "stdout", "pull"}

// Screenshot captures the screen with `screencap -p`, first through the
// exec: service (what `adb exec-out` uses). Output that is not a PNG is
// repaired when it is a pty's "\r\n" mangling or has text before the
// signature (linker warnings on some ROMs); otherwise the next mode is
// tried, down to a file on the device and a sync pull. The mode that worked
// is kept for the session. Captures are retried while the device is briefly
// offline.
func (d *Device) Screenshot(ctx context.Context) (*Screenshot, error) {
	start := 0
	for i, m := range screencapModes {
		if m == d.screencapMode {
			start = i
		}
	}
	var problems []string
	for _, mode := range screencapModes[start:] {
		shot, problem, err := d.captureVia(ctx, mode)
		if err != nil {
			return nil, err
		}
		if shot != nil {
			d.screencapMode = mode
			d.lastShot = shot.Image.Bounds()
			return shot, nil
		}
		problems = append(problems, problem)
	}
	return nil, fmt.Errorf("device %s: no screenshot: %s", d.serial, strings.Join(problems, "; "))
}

// captureVia tries one mode: a screenshot, or why this mode gave none (then
// the next mode may work), or an error that ends the attempt.
func (d *Device) captureVia(ctx context.Context, mode string) (*Screenshot, string, error) {
	if mode == "pull" {
		shot, err := d.screenshotViaFile(ctx)
		if err != nil {
			return nil, "", err
		}
		return shot, "", nil
	}
	args, err := d.screencapArgs(ctx)
	if err != nil {
		return nil, "", err
	}
	service := "exec:screencap " + args
	if mode == "stdout" {
		service = "shell:screencap " + args
	}
	var out []byte
	err = retry(ctx, d.opts.ReadRetries, func() error {
		var err error
		if out, err = d.tr.service(ctx, service); err == nil && pngCut(out) {
			// A PNG without its end is a link that fell mid-transfer, not
			// a mode that does not work: retry here, never demote.
			return errTruncated
		}
		return err
	})
	var se *serverError
	if mode == "exec-out" && errors.As(err, &se) && !transient(err) {
		// adbd before Android 5 has no exec: service and closes the stream.
		return nil, "exec-out refused (" + oneLine(se.msg) + ")", nil
	}
	if err != nil {
		return nil, "", d.wrap("screencap -p ("+mode+")", err)
	}
	img, data, err := repairPNG(out, d.decodeOptions())
	if err != nil {
		return nil, "", fmt.Errorf("device %s: screencap -p (%s): %w", d.serial, mode, err)
	}
	if img != nil {
		return &Screenshot{PNG: data, Image: img, Via: mode}, "", nil
	}
	return nil, fmt.Sprintf("screencap -p (%s) wrote %s", mode, describeNonPNG(out)), nil
}

func (d *Device) screenshotViaFile(ctx context.Context) (*Screenshot, error) {
	args, err := d.screencapArgs(ctx)
	if err != nil {
		return nil, err
	}
	out, err := d.readShellText(ctx, "screencap "+args+" "+screencapPath)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = retry(ctx, d.opts.ReadRetries, func() error {
		var err error
		data, err = d.tr.pull(ctx, screencapPath)
		return err
	})
	if err != nil {
		return nil, d.wrap(fmt.Sprintf("pull %s (screencap said %q)", screencapPath, strings.TrimSpace(out)), err)
	}
	if _, err := d.shell(ctx, "rm -f "+screencapPath); err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, pngSignature) {
		return nil, fmt.Errorf("device %s: pulled screenshot is %s", d.serial, describeNonPNG(data))
	}
	img, err := preprocess.DecodeWith(bytes.NewReader(data), d.decodeOptions())
	if err != nil {
		return nil, fmt.Errorf("device %s: decode pulled screenshot (%d bytes): %w", d.serial, len(data), err)
	}
	return &Screenshot{PNG: data, Image: img, Via: "pull"}, nil
}

var (
	// reDisplayID is a line of `dumpsys SurfaceFlinger --display-id`.
	reDisplayID = regexp.MustCompile(`(?m)^Display (\d+) `)
	// reDisplayDevice is a physical display in `dumpsys display`, with its
	// power state.
	reDisplayDevice = regexp.MustCompile(`DisplayDeviceInfo\{[^\n]*?uniqueId="local:(\d+)"[^\n]*?\bstate ([A-Z_]+)`)
)

// screencapArgs are screencap's options: "-p", with "-d ID" naming the
// display that is on when the device has several (a foldable's inner and
// outer panels, a second screen). Without -d screencap takes the first
// display, which may be the one switched off: a black frame. Looked up once
// a session.
func (d *Device) screencapArgs(ctx context.Context) (string, error) {
	if !d.displayKnown {
		out, err := d.readShellText(ctx, "dumpsys SurfaceFlinger --display-id")
		if err != nil {
			return "", err
		}
		if ids := reDisplayID.FindAllStringSubmatch(out, -1); len(ids) > 1 {
			info, err := d.readShellText(ctx, "dumpsys display")
			if err != nil {
				return "", err
			}
			d.display = activeDisplay(info, ids[0][1])
		}
		d.displayKnown = true
	}
	if d.display == "" {
		return "-p", nil
	}
	return "-d " + d.display + " -p", nil
}

// activeDisplay is the first physical display `dumpsys display` shows on,
// else fallback.
func activeDisplay(dumpsysDisplay, fallback string) string {
	for _, m := range reDisplayDevice.FindAllStringSubmatch(dumpsysDisplay, -1) {
		if m[2] == "ON" {
			return m[1]
		}
	}
	return fallback
}

// decodeOptions is how screenshots are decoded: with the pixel cap of
// Options.MaxPixels.
func (d *Device) decodeOptions() preprocess.DecodeOptions {
	return preprocess.DecodeOptions{MaxPixels: d.opts.MaxPixels}
}

// repairPNG returns the decoded image and the PNG bytes when out holds a PNG,
// possibly after dropping leading text or undoing "\n" -> "\r\n"; nil when
// it holds none. A PNG over the pixel cap is an error: another capture mode
// would bring the same screen.
func repairPNG(out []byte, opts preprocess.DecodeOptions) (image.Image, []byte, error) {
	candidates := [][]byte{out}
	if i := bytes.Index(out, pngSignature[:4]); i > 0 {
		candidates = append(candidates, out[i:])
	}
	for _, c := range candidates {
		if bytes.HasPrefix(c, []byte("\x89PNG\r\r\n")) {
			c = bytes.ReplaceAll(c, []byte("\r\n"), []byte("\n"))
		}
		if !bytes.HasPrefix(c, pngSignature) {
			continue
		}
		img, err := preprocess.DecodeWith(bytes.NewReader(c), opts)
		if err == nil {
			return img, c, nil
		}
		if errors.Is(err, preprocess.ErrTooLarge) {
			return nil, nil, err
		}
	}
	return nil, nil, nil
}

// pngEnd is a PNG's last chunk (IEND, empty) with its CRC.
var pngEnd = []byte("IEND\xaeB`\x82")

// pngCut reports output that holds the start of a PNG but not its end.
func pngCut(out []byte) bool {
	return bytes.Contains(out, pngSignature[:4]) && !bytes.Contains(out, pngEnd)
}

func describeNonPNG(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	head := b[:min(len(b), 80)]
	return fmt.Sprintf("%d bytes that are not a PNG (starting %q)", len(b), head)
}
