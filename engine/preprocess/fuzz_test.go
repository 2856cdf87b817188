package preprocess

import (
	"bytes"
	"encoding/binary"
	"image"
	"testing"
)

// fuzzMaxPixels is the cap the fuzz target decodes under: small, so that
// inputs claiming large sizes are refused quickly and the workers stay lean.
const fuzzMaxPixels = 1 << 20

// FuzzDecode feeds arbitrary bytes to the decoder: it must never panic, and
// a decode that succeeds must respect the pixel cap and be resizable.
func FuzzDecode(f *testing.F) {
	small := markedImage(24, 16)
	pngData := encodePNG(f, small)
	jpgData := encodeJPEG(f, small)
	gray := image.NewGray(image.Rect(0, 0, 9, 17))
	for _, seed := range [][]byte{
		pngData,
		jpgData,
		encodePNG(f, gray),
		encodeJPEG(f, gray),
		hostilePNG(200000, 200000),
		hostilePNG(3, 2),
		withJPEGSize(f, jpgData, 65535, 65535),
		withSegment(jpgData, exifSegment(6, binary.LittleEndian)),
		withSegment(jpgData, exifSegment(7, binary.BigEndian)),
		pngData[:len(pngData)/2],
		jpgData[:len(jpgData)/2],
		jpgData[:200],
		pngData[:30],
		[]byte("\xff\xd8\xff"),
		[]byte("\x89PNG\r\n\x1a\n"),
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := DecodeWith(bytes.NewReader(data), DecodeOptions{MaxPixels: fuzzMaxPixels})
		if err != nil {
			if img != nil {
				t.Fatalf("error %v with an image", err)
			}
			return
		}
		b := img.Bounds()
		if b.Dx() < 0 || b.Dy() < 0 || b.Dx()*b.Dy() > fuzzMaxPixels {
			t.Fatalf("decoded %v, over the %d-pixel cap", b, fuzzMaxPixels)
		}
		if b.Empty() {
			return
		}
		out := ResizeBicubic(img, 7, 5)
		if out.Bounds().Dx() != 7 || out.Bounds().Dy() != 5 {
			t.Fatalf("resize gave %v", out.Bounds())
		}
	})
}
