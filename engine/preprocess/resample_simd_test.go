package preprocess

import (
	"bytes"
	"fmt"
	"image"
	"math"
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
// with the SIMD passes (horizontal and vertical) and without them, in one band or several (several bands
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

// verticalTmp fills the rows of a vertical pass's input: noise, rows all 0
// or all 255, or rows alternating between 0 and 255 (the largest overshoot,
// both ways, as every column starts on its own phase).
func verticalTmp(rng *rand.Rand, rows, stride, mode int) []byte {
	tmp := make([]byte, rows*stride)
	switch mode {
	case 0:
		rng.Read(tmp)
	case 1:
		for r := 0; r < rows; r++ {
			row := tmp[r*stride : (r+1)*stride]
			switch rng.Intn(3) {
			case 0:
				rng.Read(row)
			case 1:
				for i := range row {
					row[i] = 255
				}
			}
		}
	default:
		phase := make([]int, stride)
		for i := range phase {
			phase[i] = rng.Intn(2)
		}
		for r := 0; r < rows; r++ {
			for i := 0; i < stride; i++ {
				if (r+phase[i])%2 == 0 {
					tmp[r*stride+i] = 255
				}
			}
		}
	}
	return tmp
}

// checkVertical runs vertical and the SIMD vertical pass over output rows
// [lo, hi) of w, with tmp holding source rows from rowOffset on, into
// buffers prefilled alike and followed by guard bytes, and compares them
// whole: the same bytes in the rows, nothing written outside them.
func checkVertical(t *testing.T, tmp []byte, stride, rowOffset int, w *window, lo, hi int, what string) {
	t.Helper()
	const guard = 64
	size := w.outSize*stride + guard
	want, got := make([]byte, size), make([]byte, size)
	for i := range want {
		want[i], got[i] = byte(i*7+0xa5), byte(i*7+0xa5)
	}
	vertical(tmp, stride, rowOffset, w, lo, hi, make([]int32, stride), want[:w.outSize*stride])
	verticalSIMD(tmp, stride, rowOffset, w, lo, hi, got[:w.outSize*stride])
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: SIMD vertical pass differs from the Go one at byte %d (row %d, column %d): %d, want %d", what, i, i/stride, i%stride, got[i], want[i])
	}
}

// The SIMD vertical pass gives the Go pass's bytes over many source and
// output heights (downscales and upscales), strides (tails of every
// length), row contents and ranges of output rows.
func TestVerticalSIMDMatchesGo(t *testing.T) {
	if !haveSIMD {
		t.Skip("no SIMD vertical pass on this CPU")
	}
	rng := rand.New(rand.NewSource(11))
	strides := []int{1, 2, 3, 7, 8, 9, 15, 16, 24, 31, 32, 33, 40, 63, 64, 65, 100, 672, 1092, 1999, 2000}
	var sizes [][2]int
	for _, in := range []int{1, 2, 3, 4, 7, 17, 100, 224, 800, 2400, 3000} {
		for _, out := range []int{1, 2, 3, 7, 100, 224, 600} {
			sizes = append(sizes, [2]int{in, out})
		}
	}
	random := 150
	if raceEnabled {
		random = 20
	}
	for range random {
		sizes = append(sizes, [2]int{1 + rng.Intn(3000), 1 + rng.Intn(600)})
	}
	sizes = append(sizes, [2]int{2400, 224}, [2]int{2400, 224})
	for ci, sz := range sizes {
		inH, outH := sz[0], sz[1]
		w := newWindow(inH, outH)
		stride := strides[ci%len(strides)]
		if ci%3 == 0 {
			stride = 1 + rng.Intn(2000)
		}
		if sz == [2]int{2400, 224} {
			stride = 672
		}
		if inH*stride > 2<<20 && ci%3 != 1 {
			// keep the large cases few: a third of them run
			stride = 1 + rng.Intn(200)
		}
		mode := ci % 3
		tmp := verticalTmp(rng, inH, stride, mode)
		what := func(lo, hi, off int) string {
			return fmt.Sprintf("%d -> %d rows, stride %d, mode %d, rows [%d, %d), offset %d", inH, outH, stride, mode, lo, hi, off)
		}
		checkVertical(t, tmp, stride, 0, w, 0, outH, what(0, outH, 0))

		// a sub-range of output rows, tmp holding only the source rows
		// their windows reach (as a chunk of rows would)
		lo := rng.Intn(outH)
		hi := lo + 1 + rng.Intn(outH-lo)
		a, b := w.first[lo], 0
		for yy := lo; yy < hi; yy++ {
			a = min(a, w.first[yy])
			b = max(b, w.first[yy]+w.count[yy])
		}
		checkVertical(t, tmp[a*stride:b*stride], stride, a, w, lo, hi, what(lo, hi, a))
	}
}

// The SIMD vertical pass wraps as Go's int32 does and saturates the same
// way for any weights, not only bicubic ones: random windows of random
// full-range weights, and weights at the int32 extremes.
func TestVerticalSIMDWraps(t *testing.T) {
	if !haveSIMD {
		t.Skip("no SIMD vertical pass on this CPU")
	}
	rng := rand.New(rand.NewSource(12))
	for c := range 300 {
		inH, outH := 1+rng.Intn(60), 1+rng.Intn(20)
		ks := 1 + rng.Intn(inH)
		w := &window{inSize: inH, outSize: outH, ksize: ks,
			first: make([]int, outH), count: make([]int, outH), coef: make([]int32, outH*ks)}
		for yy := range outH {
			n := rng.Intn(ks + 1) // 0 taps too
			w.count[yy] = n
			w.first[yy] = rng.Intn(inH - n + 1)
			for j := range n {
				switch rng.Intn(4) {
				case 0:
					w.coef[yy*ks+j] = math.MaxInt32
				case 1:
					w.coef[yy*ks+j] = math.MinInt32
				case 2:
					w.coef[yy*ks+j] = int32(rng.Intn(1<<24)) - 1<<23
				default:
					w.coef[yy*ks+j] = int32(rng.Uint32())
				}
			}
		}
		stride := 1 + rng.Intn(150)
		tmp := verticalTmp(rng, inH, stride, c%3)
		checkVertical(t, tmp, stride, 0, w, 0, outH, fmt.Sprintf("case %d: %d -> %d rows, stride %d", c, inH, outH, stride))
	}
}

// BenchmarkVertical is the vertical pass of a 1080x2400 screen from 2400
// rows of 224 RGB pixels to 224, on the Go kernel and the SIMD one.
func BenchmarkVertical(b *testing.B) {
	const stride, in, out = 224 * 3, 2400, 224
	rng := rand.New(rand.NewSource(1))
	tmp := make([]byte, in*stride)
	rng.Read(tmp)
	w := newWindow(in, out)
	dst := make([]byte, out*stride)
	b.Run("go", func(b *testing.B) {
		acc := make([]int32, stride)
		b.ReportAllocs()
		for range b.N {
			vertical(tmp, stride, 0, w, 0, out, acc, dst)
		}
	})
	b.Run("simd", func(b *testing.B) {
		if !haveSIMD {
			b.Skip("no SIMD vertical pass on this CPU")
		}
		b.ReportAllocs()
		for range b.N {
			verticalSIMD(tmp, stride, 0, w, 0, out, dst)
		}
	})
}
