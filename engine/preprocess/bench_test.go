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
