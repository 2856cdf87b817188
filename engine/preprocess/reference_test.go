package preprocess

import (
	"image"
	"math/rand"
	"testing"
)

// referenceResize is the two-pass resampler written as plainly as possible,
// channel by channel, with no packing or row pairing. The goldens pin it to
// PIL; this pins the fast kernels to it over many more sizes.
func referenceResize(src *image.NRGBA, outW, outH int) *image.NRGBA {
	inW, inH := src.Rect.Dx(), src.Rect.Dy()
	tmp := make([][3]byte, outW*inH)
	hw := newWindow(inW, outW)
	for y := 0; y < inH; y++ {
		for x := 0; x < outW; x++ {
			for ch := 0; ch < 3; ch++ {
				if outW == inW {
					tmp[y*outW+x][ch] = src.Pix[y*src.Stride+4*x+ch]
					continue
				}
				acc := half
				for i := 0; i < hw.count[x]; i++ {
					acc += int32(src.Pix[y*src.Stride+4*(hw.first[x]+i)+ch]) * hw.coef[x*hw.ksize+i]
				}
				tmp[y*outW+x][ch] = clip8(acc)
			}
		}
	}
	out := image.NewNRGBA(image.Rect(0, 0, outW, outH))
	w := newWindow(inH, outH)
	for y := 0; y < outH; y++ {
		for x := 0; x < outW; x++ {
			for ch := 0; ch < 3; ch++ {
				if outH == inH {
					out.Pix[y*out.Stride+4*x+ch] = tmp[y*outW+x][ch]
					continue
				}
				acc := half
				for i := 0; i < w.count[y]; i++ {
					acc += int32(tmp[(w.first[y]+i)*outW+x][ch]) * w.coef[y*w.ksize+i]
				}
				out.Pix[y*out.Stride+4*x+ch] = clip8(acc)
			}
			out.Pix[y*out.Stride+4*x+3] = 0xff
		}
	}
	return out
}

func TestKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	sizes := [][4]int{{1, 1, 5, 3}, {7, 5, 7, 2}, {9, 13, 4, 13}, {33, 17, 8, 9}, {2, 3, 1, 1}}
	for len(sizes) < 30 {
		sizes = append(sizes, [4]int{1 + rng.Intn(60), 1 + rng.Intn(60), 1 + rng.Intn(40), 1 + rng.Intn(40)})
	}
	for _, sz := range sizes {
		src := image.NewNRGBA(image.Rect(0, 0, sz[0], sz[1]))
		rng.Read(src.Pix) // noise: maximal overshoot and clipping
		want := referenceResize(src, sz[2], sz[3])
		got := ResizeBicubic(src, sz[2], sz[3])
		for i := range want.Pix {
			if got.Pix[i] != want.Pix[i] {
				t.Fatalf("%dx%d -> %dx%d: byte %d = %d, want %d", sz[0], sz[1], sz[2], sz[3], i, got.Pix[i], want.Pix[i])
			}
		}
		// Gray goes through the single-channel kernels.
		gray := image.NewGray(src.Rect)
		for i := range gray.Pix {
			gray.Pix[i] = src.Pix[4*i]
			src.Pix[4*i+1], src.Pix[4*i+2] = src.Pix[4*i], src.Pix[4*i]
		}
		want = referenceResize(src, sz[2], sz[3])
		got = ResizeBicubic(gray, sz[2], sz[3])
		for i := range want.Pix {
			if got.Pix[i] != want.Pix[i] {
				t.Fatalf("gray %dx%d -> %dx%d: byte %d = %d, want %d", sz[0], sz[1], sz[2], sz[3], i, got.Pix[i], want.Pix[i])
			}
		}
	}
}
