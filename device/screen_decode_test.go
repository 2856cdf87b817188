package device

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"testing"

	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/engine/preprocess/imagetest"
)

func TestRepairPNGPixelCap(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, 30, 20))); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	mangled := append([]byte("WARNING: linker: junk\n"), bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n"))...)
	for name, out := range map[string][]byte{"clean": good, "mangled": mangled} {
		img, data, err := repairPNG(out, preprocess.DecodeOptions{})
		if err != nil || img == nil || img.Bounds().Dx() != 30 || !bytes.Equal(data, good) {
			t.Errorf("%s: img %v, err %v", name, img, err)
		}
		_, _, err = repairPNG(out, preprocess.DecodeOptions{MaxPixels: 599})
		if !errors.Is(err, preprocess.ErrTooLarge) {
			t.Errorf("%s over a 599-pixel cap: %v", name, err)
		}
	}
	_, _, err := repairPNG(imagetest.HostilePNG(200000, 200000, 0), preprocess.DecodeOptions{})
	if !errors.Is(err, preprocess.ErrTooLarge) {
		t.Errorf("200000x200000 header: %v", err)
	}
	if img, _, err := repairPNG([]byte("error: no display"), preprocess.DecodeOptions{}); img != nil || err != nil {
		t.Errorf("text: %v %v", img, err)
	}
}
