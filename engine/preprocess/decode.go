package preprocess

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"strings"
)

var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

// DefaultMaxPixels is the largest image (width*height) Decode accepts:
// 40 megapixels. The largest screens a screenshot can come from are tablets
// (about 3000x2000, 6 Mpx), 4K displays (8.3 Mpx) and 8K displays (7680x4320,
// 33 Mpx), so every real screenshot fits with margin, while the decoded
// image stays at most 160 MB (8-bit RGBA) instead of whatever a hostile
// header claims (a 855-byte PNG can claim 200000x200000, 160 GB).
const DefaultMaxPixels = 40_000_000

// MaxSide is the longest side (pixels) an image may have: JPEG's own limit,
// nine times an 8K display's width. Within the pixel cap a longer side is
// no screen, only a cost: a 40-megapixel single-row PNG took 1.5 GB to
// decode and resize (the resampler's per-column scratch and weights grow
// with the side, not the area).
const MaxSide = 1<<16 - 1

// DecodeOptions tunes DecodeWith.
type DecodeOptions struct {
	// MaxPixels refuses images whose header says more than this many
	// pixels (width*height), before any pixel memory is allocated; 0 (or
	// negative) means DefaultMaxPixels.
	MaxPixels int
}

func (o DecodeOptions) maxPixels() int {
	if o.MaxPixels <= 0 {
		return DefaultMaxPixels
	}
	return o.MaxPixels
}

// ErrTooLarge is matched (errors.Is) by the *TooLargeError of an image over
// the pixel cap.
var ErrTooLarge = errors.New("image too large")

// TooLargeError is an image refused because its header says more pixels
// than the cap.
type TooLargeError struct {
	Format        string // "PNG" or "JPEG"; "" when found after decoding
	Width, Height uint64
	MaxPixels     int
}

func (e *TooLargeError) Error() string {
	what := e.Format + " header says"
	if e.Format == "" {
		what = "decoded image is"
	}
	if e.Width*e.Height <= uint64(e.MaxPixels) {
		return fmt.Sprintf("%s %dx%d: a side over %d pixels", what, e.Width, e.Height, MaxSide)
	}
	return fmt.Sprintf("%s %dx%d = %d pixels, over the --max-pixels limit of %d",
		what, e.Width, e.Height, e.Width*e.Height, e.MaxPixels)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

func checkPixels(format string, w, h uint64, max int) error {
	// w and h are at most 2^32-1, so the product cannot overflow uint64.
	if w*h > uint64(max) || w > MaxSide || h > MaxSide {
		return &TooLargeError{Format: format, Width: w, Height: h, MaxPixels: max}
	}
	return nil
}

// Decode reads a PNG or JPEG image, chosen by its first bytes, refusing
// images over DefaultMaxPixels. 8-bit RGBA PNGs come back as *image.NRGBA
// (straight alpha), opaque RGB PNGs as *image.RGBA, JPEGs as *image.YCbCr
// or *image.Gray — or, when their EXIF Orientation is not 1, turned upright
// as *image.NRGBA or *image.Gray.
func Decode(r io.Reader) (image.Image, error) {
	return DecodeWith(r, DecodeOptions{})
}

// DecodeWith is Decode with options. The size is read from the header (PNG
// IHDR, JPEG SOF) and checked against the cap before decoding, so a hostile
// header costs a few kilobytes, never the memory it claims.
func DecodeWith(r io.Reader, opts DecodeOptions) (image.Image, error) {
	max := opts.maxPixels()
	br := bufio.NewReader(r)
	head, err := br.Peek(len(pngMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read image header: %w", err)
	}
	var img image.Image
	switch {
	case bytes.HasPrefix(head, pngMagic):
		img, err = decodePNG(br, max)
	case bytes.HasPrefix(head, jpegMagic):
		img, err = decodeJPEG(br, max)
	case len(head) == 0:
		return nil, errors.New("not a PNG or JPEG (empty input)")
	default:
		return nil, fmt.Errorf("not a PNG or JPEG (starts with %s)", describeHead(head))
	}
	if err != nil {
		return nil, err
	}
	// The header check above is what protects memory; this one guards the
	// promise to callers should a decoder ever size its image otherwise.
	b := img.Bounds()
	if err := checkPixels("", uint64(b.Dx()), uint64(b.Dy()), max); err != nil {
		return nil, err
	}
	return img, nil
}

// decodePNG checks the size in the IHDR chunk, which the PNG format puts
// first (bytes 16-24: width, height), then decodes.
func decodePNG(br *bufio.Reader, max int) (image.Image, error) {
	if h, _ := br.Peek(24); len(h) == 24 && string(h[12:16]) == "IHDR" {
		w, ht := binary.BigEndian.Uint32(h[16:20]), binary.BigEndian.Uint32(h[20:24])
		if err := checkPixels("PNG", uint64(w), uint64(ht), max); err != nil {
			return nil, err
		}
	}
	// Without an IHDR first, png.Decode fails before allocating pixels.
	img, err := png.Decode(br)
	if err != nil {
		return nil, fmt.Errorf("decode PNG: %w", err)
	}
	return img, nil
}

// decodeJPEG reads the segments up to the frame header (SOF) itself, checks
// the size and keeps the EXIF Orientation, then hands image/jpeg the
// segments it uses followed by the rest of the stream, and turns the image
// upright.
func decodeJPEG(br *bufio.Reader, max int) (image.Image, error) {
	h, err := scanJPEG(br)
	if err != nil {
		return nil, fmt.Errorf("decode JPEG: %w", err)
	}
	if h.sof {
		if err := checkPixels("JPEG", uint64(h.width), uint64(h.height), max); err != nil {
			return nil, err
		}
	}
	img, err := jpeg.Decode(io.MultiReader(bytes.NewReader(h.replay), br))
	if err != nil {
		return nil, fmt.Errorf("decode JPEG: %w", err)
	}
	return orient(img, h.orientation), nil
}

// describeHead shows the first bytes of an unknown file, naming common
// formats people hand in by mistake.
func describeHead(head []byte) string {
	known := []struct{ prefix, name string }{
		{"GIF8", "GIF"}, {"RIFF", "RIFF/WebP"}, {"BM", "BMP"}, {"II*\x00", "TIFF"}, {"MM\x00*", "TIFF"},
		{"\x93NUMPY", "a .npy array"}, {"PK\x03\x04", "a zip archive"}, {"{", "JSON?"}, {"<", "XML/HTML?"},
	}
	desc := fmt.Sprintf("% x %q", head, head)
	for _, k := range known {
		if strings.HasPrefix(string(head), k.prefix) {
			return desc + ", looks like " + k.name
		}
	}
	return desc
}

// DecodeFile decodes the PNG or JPEG file at path, refusing images over
// DefaultMaxPixels.
func DecodeFile(path string) (image.Image, error) {
	return DecodeFileWith(path, DecodeOptions{})
}

// DecodeFileWith is DecodeFile with options.
func DecodeFileWith(path string, opts DecodeOptions) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := DecodeWith(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

// FromRaw wraps an AITW raw screenshot — uint8, height x width x channels,
// row-major, channels 1 (grey), 3 (RGB) or 4 (RGBA, straight alpha) — as an image
// over pix itself: nothing is copied (a full screenshot is 8-10 MB and the
// resize reads it once), so pix must not change while the image is used.
func FromRaw(pix []byte, height, width, channels int) (image.Image, error) {
	if height <= 0 || width <= 0 {
		return nil, fmt.Errorf("raw image: size %dx%d must be positive", width, height)
	}
	if channels != 1 && channels != 3 && channels != 4 {
		return nil, fmt.Errorf("raw image: %d channels, want 1, 3 or 4", channels)
	}
	want := height * width * channels
	if want/channels/width != height {
		return nil, fmt.Errorf("raw image: size %dx%dx%d overflows", height, width, channels)
	}
	if len(pix) != want {
		return nil, fmt.Errorf("raw image: %d bytes, want %dx%dx%d = %d", len(pix), height, width, channels, want)
	}
	if width > MaxSide || height > MaxSide {
		return nil, fmt.Errorf("raw image: size %dx%d has a side over %d pixels", width, height, MaxSide)
	}
	r := image.Rect(0, 0, width, height)
	switch channels {
	case 1: // grey, as PIL's Image.fromarray takes an (h, w, 1) array
		return &image.Gray{Pix: pix, Stride: width, Rect: r}, nil
	case 4:
		return &image.NRGBA{Pix: pix, Stride: 4 * width, Rect: r}, nil
	}
	return &RGB{Pix: pix, Stride: 3 * width, Rect: r}, nil
}

// RGB is an opaque image of 3 bytes per pixel (R, G, B), the layout of
// AITW's raw screenshots, which the standard library has no type for.
type RGB struct {
	Pix    []byte
	Stride int
	Rect   image.Rectangle
}

func (m *RGB) ColorModel() color.Model { return color.NRGBAModel }
func (m *RGB) Bounds() image.Rectangle { return m.Rect }

func (m *RGB) At(x, y int) color.Color {
	if !(image.Point{x, y}.In(m.Rect)) {
		return color.NRGBA{}
	}
	i := m.PixOffset(x, y)
	return color.NRGBA{m.Pix[i], m.Pix[i+1], m.Pix[i+2], 0xff}
}

// PixOffset is the index of the first byte of pixel (x, y) in Pix.
func (m *RGB) PixOffset(x, y int) int {
	return (y-m.Rect.Min.Y)*m.Stride + (x-m.Rect.Min.X)*3
}
