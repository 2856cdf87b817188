package device

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"regexp"
	"strconv"
	"strings"
)

var (
	reWMSize   = regexp.MustCompile(`(?m)^\s*(Physical|Override) size:\s*(\d+)x(\d+)`)
	reSurface  = regexp.MustCompile(`SurfaceOrientation:\s*(\d)`)
	reViewport = regexp.MustCompile(`DisplayViewport\{[^}]*?orientation=(\d)`)
	reRotation = regexp.MustCompile(`mCurrentRotation=(?:ROTATION_)?(\d+)`)
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

// ParseOrientation reads the display rotation (0-3 quarter turns) from
// `dumpsys input` (SurfaceOrientation or the display viewport) or
// `dumpsys window displays` (mCurrentRotation, in quarter turns or degrees).
func ParseOrientation(out string) (int, bool) {
	for _, re := range []*regexp.Regexp{reSurface, reViewport} {
		if m := re.FindStringSubmatch(out); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n % 4, true
		}
	}
	if m := reRotation.FindStringSubmatch(out); m != nil {
		n, _ := strconv.Atoi(m[1])
		if n >= 90 {
			n /= 90
		}
		return n % 4, true
	}
	return 0, false
}

// Orientation is the current display rotation in quarter turns (0 portrait
// for a phone, 1 and 3 landscape).
func (d *Device) Orientation(ctx context.Context) (int, error) {
	out, err := d.shellText(ctx, "dumpsys input")
	if err != nil {
		return 0, err
	}
	if o, ok := ParseOrientation(out); ok {
		return o, nil
	}
	out, err = d.shellText(ctx, "dumpsys window displays")
	if err != nil {
		return 0, err
	}
	if o, ok := ParseOrientation(out); ok {
		return o, nil
	}
	return 0, fmt.Errorf("device %s: no display orientation in `dumpsys input` or `dumpsys window displays`", d.serial)
}

// ScreenSize is the size input coordinates refer to: the --size override
// when given, else `wm size` (override honoured, read once) turned to the
// current orientation.
func (d *Device) ScreenSize(ctx context.Context) (width, height int, err error) {
	if d.opts.Width > 0 && d.opts.Height > 0 {
		return d.opts.Width, d.opts.Height, nil
	}
	if d.physW == 0 {
		out, err := d.shellText(ctx, "wm size")
		if err != nil {
			return 0, 0, err
		}
		if d.physW, d.physH, err = ParseWMSize(out); err != nil {
			return 0, 0, fmt.Errorf("device %s: %w", d.serial, err)
		}
	}
	o, err := d.Orientation(ctx)
	if err != nil {
		return 0, 0, err
	}
	// wm size is in the display's natural orientation; a quarter turn
	// swaps the sides.
	w, h := d.physW, d.physH
	if o%2 == 1 {
		w, h = h, w
	}
	return w, h, nil
}

// Screenshot is one capture: the PNG as the device wrote it and its decode.
type Screenshot struct {
	PNG   []byte
	Image image.Image
	// Via says how it was captured: "stdout" or "pull".
	Via string
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// screencapPath is where the pull fallback writes; /data/local/tmp is
// writable by the shell user on every Android version.
const screencapPath = "/data/local/tmp/autoui-screencap.png"

// Screenshot captures the screen with `screencap -p`. Output that is not a
// PNG is repaired when it is a pty's "\r\n" mangling or has text before the
// signature (linker warnings on some ROMs); otherwise the capture goes
// through a file on the device and a sync pull.
func (d *Device) Screenshot(ctx context.Context) (*Screenshot, error) {
	if !d.pullScreencap {
		out, err := d.shell(ctx, "screencap -p")
		if err != nil {
			return nil, err
		}
		if img, data, ok := repairPNG(out); ok {
			return &Screenshot{PNG: data, Image: img, Via: "stdout"}, nil
		}
		stdoutProblem := describeNonPNG(out)
		shot, err := d.screenshotViaFile(ctx)
		if err != nil {
			return nil, fmt.Errorf("device %s: screencap -p wrote %s, and the fallback through a file failed: %w", d.serial, stdoutProblem, err)
		}
		d.pullScreencap = true
		return shot, nil
	}
	return d.screenshotViaFile(ctx)
}

func (d *Device) screenshotViaFile(ctx context.Context) (*Screenshot, error) {
	out, err := d.shellText(ctx, "screencap -p "+screencapPath)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := d.dev.Pull(screencapPath, &buf); err != nil {
		return nil, fmt.Errorf("device %s: pull %s (screencap said %q): %w", d.serial, screencapPath, strings.TrimSpace(out), err)
	}
	if _, err := d.shell(ctx, "rm -f "+screencapPath); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if !bytes.HasPrefix(data, pngSignature) {
		return nil, fmt.Errorf("device %s: pulled screenshot is %s", d.serial, describeNonPNG(data))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("device %s: decode pulled screenshot (%d bytes): %w", d.serial, len(data), err)
	}
	return &Screenshot{PNG: data, Image: img, Via: "pull"}, nil
}

// repairPNG returns the decoded image and the PNG bytes when out holds a PNG,
// possibly after dropping leading text or undoing "\n" -> "\r\n".
func repairPNG(out []byte) (image.Image, []byte, bool) {
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
		if img, err := png.Decode(bytes.NewReader(c)); err == nil {
			return img, c, true
		}
	}
	return nil, nil, false
}

func describeNonPNG(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	head := b[:min(len(b), 80)]
	return fmt.Sprintf("%d bytes that are not a PNG (starting %q)", len(b), head)
}
