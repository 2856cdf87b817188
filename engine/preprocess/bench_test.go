package preprocess

import (
	"image"
	"testing"
)

func benchImage(b *testing.B) image.Image {
	b.Helper()
	return decodeTestdata(b, "phone_1080x2400.png")
}

// BenchmarkPixels is the per-frame cost for a 1080x2400 phone screenshot.
func BenchmarkPixels(b *testing.B) {
	img := benchImage(b)
	cfg := DefaultConfig()
	dst := make([]float32, cfg.Len())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := cfg.PixelsInto(dst, img); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResizeBicubic(b *testing.B) {
	img := benchImage(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ResizeBicubic(img, 224, 224)
	}
}

// BenchmarkResizeRaw is the resize of an AITW step's raw 1080x2400 RGB
// screen (FromRaw), which eval run does for every step.
func BenchmarkResizeRaw(b *testing.B) {
	src := ResizeBicubic(benchImage(b), 1080, 2400) // same size: its RGB, as NRGBA
	pix := make([]byte, 0, 1080*2400*3)
	for i := 0; i < len(src.Pix); i += 4 {
		pix = append(pix, src.Pix[i:i+3]...)
	}
	img, err := FromRaw(pix, 2400, 1080, 3)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ResizeBicubic(img, 224, 224)
	}
}
