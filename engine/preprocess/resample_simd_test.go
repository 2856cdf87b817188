package preprocess

import (
	"bytes"
	"image"
	"math/rand"
	"os"
	"testing"
)

// PREPROCESS_NOSIMD=1 runs the tests and benchmarks on the Go kernels only,
// to time them against the SIMD pass in the same session.
func init() {
	if os.Getenv("PREPROCESS_NOSIMD") == "1" {
		useSIMD = false
	}
}

// withSIMD runs f with useSIMD set to on, restoring it afterwards.
func withSIMD(on bool, f func()) {
	old := useSIMD
	useSIMD = on
	defer func() { useSIMD = old }()
	f()
}

// simdSizes are (source width, output width) pairs: the phone widths, edge
// widths, upscales past the source, and random ones.
func simdSizes(rng *rand.Rand, random int) [][2]int {
	var sizes [][2]int
	for _, in := range []int{1, 2, 3, 4, 5, 7, 8, 9, 17, 100, 224, 720, 1080, 1440, 2400, 3000} {
		for _, out := range []int{1, 2, 3, 5, 7, 100, 223, 224, 364, 600} {
			sizes = append(sizes, [2]int{in, out})
		}
	}
	for range random {
		sizes = append(sizes, [2]int{1 + rng.Intn(3000), 1 + rng.Intn(600)})
	}
	return sizes
}

// simdRows are test rows of n 4-byte pixels: noise (the ignored byte too),
// all 0, all 255, and alternating extremes (the largest overshoot).
func simdRows(rng *rand.Rand, n int) [][]byte {
	noise := make([]byte, 4*n)
	rng.Read(noise)
	zero := make([]byte, 4*n)
	full := bytes.Repeat([]byte{255}, 4*n)
	alt := make([]byte, 4*n)
	for i := range alt {
		if (i/4)%2 == 0 {
			alt[i] = 255
		}
	}
	return [][]byte{noise, zero, full, alt}
}

// The split weights put back together are the window's weights, the
// padding is 0, and every window of the tested sizes qualifies.
func TestSplitPairs(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, sz := range simdSizes(rng, 200) {
		w := newWindow(sz[0], sz[1])
		w.pairs, w.kpairs = nil, 0
		w.splitPairs()
		if w.pairs == nil {
			t.Fatalf("%d -> %d: window does not qualify for the SIMD pass", sz[0], sz[1])
		}
		kp := w.kpairs
		if kp*2 < w.ksize || len(w.pairs) != w.outSize*kp*2 {
			t.Fatalf("%d -> %d: %d pairs per output for ksize %d, %d in all", sz[0], sz[1], kp, w.ksize, len(w.pairs))
		}
		for xx := 0; xx < w.outSize; xx++ {
			for i := 0; i < 2*kp; i++ {
				hi := int32(int16(uint32(w.pairs[xx*kp*2+i/2*2]) >> (16 * (i % 2))))
				lo := int32(int16(uint32(w.pairs[xx*kp*2+i/2*2+1]) >> (16 * (i % 2))))
				var want int32
				if i < w.count[xx] {
					want = w.coef[xx*w.ksize+i]
				}
				if got := hi<<11 + lo; got != want || lo < 0 || lo >= 1<<11 {
					t.Fatalf("%d -> %d: output %d tap %d: hi %d lo %d make %d, want %d", sz[0], sz[1], xx, i, hi, lo, got, want)
				}
			}
		}
	}
}

// The SIMD horizontal kernels give the Go kernels' bytes, for two rows and
// one, over many widths and rows, and write nothing past their outputs.
func TestHorizontalSIMDMatchesGo(t *testing.T) {
	if !haveSIMD {
		t.Skip("no SIMD horizontal pass on this CPU")
	}
	rng := rand.New(rand.NewSource(3))
	random := 400
	if raceEnabled {
		random = 40
	}
	const guard = 16
	for _, sz := range simdSizes(rng, random) {
		n, m := sz[0], sz[1]
		w := newWindow(n, m)
		if w.pairs == nil {
			t.Fatalf("%d -> %d: window does not qualify for the SIMD pass", n, m)
		}
		rows := simdRows(rng, n)
		p3, rb, g := make([]int64, 3*n), make([]int64, n), make([]int32, n)
		pp, spare := make([]byte, 32*n), make([]byte, 3*m)
		for ia, a := range rows {
			b := rows[(ia+1)%len(rows)]
			wantA, wantB := make([]byte, 3*m), make([]byte, 3*m)
			horizontal4x2(a, b, w, p3, wantA, wantB)
			gotA, gotB := make([]byte, 3*m+guard), make([]byte, 3*m+guard)
			for i := range gotA {
				gotA[i], gotB[i] = 0xa5, 0x5a
			}
			horizontal4x2SIMD(a, b, w, pp, gotA[:3*m], gotB[:3*m])
			if !bytes.Equal(gotA[:3*m], wantA) || !bytes.Equal(gotB[:3*m], wantB) {
				t.Fatalf("%d -> %d, rows %d and %d: two-row SIMD pass differs from the Go one", n, m, ia, (ia+1)%len(rows))
			}
			if !bytes.Equal(gotA[3*m:], bytes.Repeat([]byte{0xa5}, guard)) || !bytes.Equal(gotB[3*m:], bytes.Repeat([]byte{0x5a}, guard)) {
				t.Fatalf("%d -> %d: two-row SIMD pass wrote past its outputs", n, m)
			}

			want1 := make([]byte, 3*m)
			horizontal4(a, w, rb, g, want1)
			got1 := make([]byte, 3*m+guard)
			horizontal4SIMD(a, w, pp, spare, got1[:3*m])
			if !bytes.Equal(got1[:3*m], want1) || !bytes.Equal(got1[3*m:], make([]byte, guard)) {
				t.Fatalf("%d -> %d, row %d: one-row SIMD pass differs from the Go one", n, m, ia)
			}
			if !bytes.Equal(want1, wantA) {
				t.Fatalf("%d -> %d, row %d: Go one-row and two-row passes differ", n, m, ia)
			}
		}
	}
}

// The whole resize of the test screenshots gives the same bytes and tensor
// with the SIMD pass and without it, in one band or several (several bands
// of odd row counts take the one-row pass too). The Go path always runs,
// and is checked against the plain reference on the smaller images.
func TestResizeSIMDMatchesGo(t *testing.T) {
	names := []string{"rgb_333x517.png", "rgba_300x200.png", "palette_240x160.png", "small_100x60.png", "rgb_224x100.png", "photo_400x300.jpg"}
	if !raceEnabled {
		names = append(names, "phone_1080x2400.png")
	}
	sizes := [][2]int{{224, 224}, {364, 364}, {7, 5}, {1500, 301}}
	cfg := DefaultConfig()
	for _, name := range names {
		img := decodeTestdata(t, name)
		for _, size := range sizes {
			type result struct {
				px      [][]byte
				resized *image.NRGBA
				tensor  []float32
			}
			run := func() result {
				var r result
				for _, workers := range []int{1, 3} {
					s := &scratch{forceWorkers: workers}
					px, _, err := s.resize(img, size[0], size[1])
					if err != nil {
						t.Fatal(err)
					}
					r.px = append(r.px, append([]byte(nil), px...))
				}
				r.resized = ResizeBicubic(img, size[0], size[1])
				if size == [2]int{224, 224} {
					r.tensor = make([]float32, cfg.Len())
					if err := cfg.PixelsInto(r.tensor, img); err != nil {
						t.Fatal(err)
					}
				}
				return r
			}
			var goRes result
			withSIMD(false, func() { goRes = run() })
			if !bytes.Equal(goRes.px[0], goRes.px[1]) {
				t.Fatalf("%s -> %v: Go path differs between 1 and 3 bands", name, size)
			}
			if b := img.Bounds(); b.Dx()*b.Dy() <= 400*300 && size[0]*size[1] <= 364*364 {
				// an opaque NRGBA copy (any RGB will do): the Go path's
				// resize of it against the plain reference's
				src := image.NewNRGBA(b)
				for y := b.Min.Y; y < b.Max.Y; y++ {
					for x := b.Min.X; x < b.Max.X; x++ {
						r, g, bl, _ := img.At(x, y).RGBA()
						i := src.PixOffset(x, y)
						src.Pix[i], src.Pix[i+1], src.Pix[i+2] = byte(r>>8), byte(g>>8), byte(bl>>8)
					}
				}
				want := referenceResize(src, size[0], size[1])
				var got *image.NRGBA
				withSIMD(false, func() { got = ResizeBicubic(src, size[0], size[1]) })
				if !bytes.Equal(got.Pix, want.Pix) {
					t.Fatalf("%s -> %v: Go path differs from the reference", name, size)
				}
			}
			if !haveSIMD {
				continue
			}
			var simdRes result
			withSIMD(true, func() { simdRes = run() })
			for i := range goRes.px {
				if !bytes.Equal(simdRes.px[i], goRes.px[i]) {
					t.Fatalf("%s -> %v: resize with the SIMD pass differs from the Go path", name, size)
				}
			}
			if !bytes.Equal(simdRes.resized.Pix, goRes.resized.Pix) {
				t.Fatalf("%s -> %v: ResizeBicubic with the SIMD pass differs from the Go path", name, size)
			}
			for i := range goRes.tensor {
				if simdRes.tensor[i] != goRes.tensor[i] {
					t.Fatalf("%s: PixelsInto with the SIMD pass differs from the Go path at %d", name, i)
				}
			}
		}
	}
	if !haveSIMD {
		t.Skip("no SIMD horizontal pass on this CPU: checked the Go path only")
	}
}

// BenchmarkHorizontal is the horizontal pass of a 1080x2400 screen to 224
// wide, two rows at a time as resize runs it (1200 row pairs per op), on
// the Go kernel and the SIMD one.
func BenchmarkHorizontal(b *testing.B) {
	const n, m, rows = 1080, 224, 2400
	rng := rand.New(rand.NewSource(1))
	src := make([]byte, 4*n*2)
	rng.Read(src)
	w := newWindow(n, m)
	dst := make([]byte, 2*3*m)
	bench := func(b *testing.B, f func()) {
		b.ReportAllocs()
		for range b.N {
			for range rows / 2 {
				f()
			}
		}
	}
	b.Run("go", func(b *testing.B) {
		p3 := make([]int64, 3*n)
		bench(b, func() { horizontal4x2(src[:4*n], src[4*n:], w, p3, dst[:3*m], dst[3*m:]) })
	})
	b.Run("simd", func(b *testing.B) {
		if !haveSIMD || w.pairs == nil {
			b.Skip("no SIMD horizontal pass on this CPU")
		}
		pp := make([]byte, 32*n)
		bench(b, func() { horizontal4x2SIMD(src[:4*n], src[4*n:], w, pp, dst[:3*m], dst[3*m:]) })
	})
}
