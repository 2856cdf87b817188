package preprocess

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
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

// Decode reads a PNG or JPEG image, chosen by its first bytes. 8-bit RGBA
// PNGs come back as *image.NRGBA (straight alpha), opaque RGB PNGs as
// *image.RGBA, JPEGs as *image.YCbCr or *image.Gray.
func Decode(r io.Reader) (image.Image, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(pngMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read image header: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, pngMagic):
		img, err := png.Decode(br)
		if err != nil {
			return nil, fmt.Errorf("decode PNG: %w", err)
		}
		return img, nil
	case bytes.HasPrefix(head, jpegMagic):
		img, err := jpeg.Decode(br)
		if err != nil {
			return nil, fmt.Errorf("decode JPEG: %w", err)
		}
		return img, nil
	case len(head) == 0:
		return nil, errors.New("not a PNG or JPEG (empty input)")
	}
	return nil, fmt.Errorf("not a PNG or JPEG (starts with %s)", describeHead(head))
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

// DecodeFile decodes the PNG or JPEG file at path.
func DecodeFile(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

// FromRaw wraps an AITW raw screenshot — uint8, height x width x channels,
// row-major, channels 3 (RGB) or 4 (RGBA, straight alpha) — as an image.
// The pixels are copied.
func FromRaw(pix []byte, height, width, channels int) (image.Image, error) {
	if height <= 0 || width <= 0 {
		return nil, fmt.Errorf("raw image: size %dx%d must be positive", width, height)
	}
	if channels != 3 && channels != 4 {
		return nil, fmt.Errorf("raw image: %d channels, want 3 or 4", channels)
	}
	want := height * width * channels
	if want/channels/width != height {
		return nil, fmt.Errorf("raw image: size %dx%dx%d overflows", height, width, channels)
	}
	if len(pix) != want {
		return nil, fmt.Errorf("raw image: %d bytes, want %dx%dx%d = %d", len(pix), height, width, channels, want)
	}
	img := image.NewNRGBA(image.Rect(0, 0, width, height))
	if channels == 4 {
		copy(img.Pix, pix)
		return img, nil
	}
	n := height * width
	for i := 0; i < n; i++ {
		d := img.Pix[4*i : 4*i+4 : 4*i+4]
		d[0], d[1], d[2], d[3] = pix[3*i], pix[3*i+1], pix[3*i+2], 0xff
	}
	return img, nil
}
