package preprocess

import (
	"bytes"
	"image"
	"testing"
)

// A resize in chunks of source rows gives the one-piece result bit for bit,
// for any chunk size, band count, and for down- and upscales.
func TestChunkedResizeMatches(t *testing.T) {
	imgs := map[string]image.Image{
		"gray":  decodeTestdata(t, "gray_160x300.png"),
		"noisy": noisyImage(37, 523),
	}
	if !raceEnabled { // a full screenshot takes most of a minute under -race
		imgs["phone"] = decodeTestdata(t, "phone_1080x2400.png")
	}
	for name, img := range imgs {
		for _, size := range [][2]int{{224, 224}, {7, 5}, {224, 1000}, {37, 100}} {
			whole := &scratch{forceWorkers: 1}
			want, wch, err := whole.resize(img, size[0], size[1])
			if err != nil {
				t.Fatal(err)
			}
			want = append([]byte(nil), want...)
			for _, rows := range []int{1, 2, 3, 7, 64, 1000} {
				for _, workers := range []int{1, 3} {
					s := &scratch{forceWorkers: workers, forceChunkRows: rows}
					got, ch, err := s.resize(img, size[0], size[1])
					if err != nil {
						t.Fatal(err)
					}
					if ch != wch || !bytes.Equal(got, want) {
						t.Fatalf("%s -> %v in chunks of %d rows, %d bands: differs from the one-piece resize", name, size, rows, workers)
					}
				}
			}
		}
	}
}

// A tall, narrow source — the shape that passes a pixel cap yet made the
// horizontal pass's buffer (source rows x output width) huge — resizes
// within a bounded buffer.
func TestResizeMemoryBounded(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 1, 60_000))
	for i := range img.Pix {
		img.Pix[i] = byte(i / 4 % 251)
	}
	cfg := DefaultConfig()
	dst := make([]float32, cfg.Len())
	n := allocated(func() {
		if err := cfg.PixelsInto(dst, img); err != nil {
			t.Fatal(err)
		}
	})
	// One piece would hold 60,000 x 224 x 3 bytes = 40 MB.
	if n > 16<<20 {
		t.Errorf("resizing 1x60000 to 224x224 allocated %d bytes", n)
	}
	t.Logf("1x60000 -> 224x224 allocated %d bytes", n)
}

// A source of the tallest side resizes as the plain reference does, in one
// piece and in chunks.
func TestTallSourceMatchesReference(t *testing.T) {
	src := noisyImage(3, MaxSide)
	want := referenceResize(src, 16, 16)
	for _, c := range [][2]int{{1, 0}, {3, 0}, {3, 4000}} {
		workers := c[0]
		s := &scratch{forceWorkers: workers, forceChunkRows: c[1]}
		got, ch, err := s.resize(src, 16, 16)
		if err != nil || ch != 3 {
			t.Fatal(err, ch)
		}
		for i := 0; i < 16*16; i++ {
			if !bytes.Equal(got[3*i:3*i+3], want.Pix[4*i:4*i+3]) {
				t.Fatalf("%d bands: pixel %d = %v, want %v", workers, i, got[3*i:3*i+3], want.Pix[4*i:4*i+3])
			}
		}
	}
}
