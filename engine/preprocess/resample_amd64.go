//go:build amd64

package preprocess

import "golang.org/x/sys/cpu"

// haveSIMD reports whether the AVX2 horizontal and vertical passes can run
// here.
var haveSIMD = cpu.X86.HasAVX2

// packPairsAVX2 writes, for every source index x < n, the 32 bytes of
// p[32x:]: 16 int16s, for each byte k = 0..3 of a pixel (R, G, B, ignored)
// of row a then of row b, byte k of pixel x then byte k of pixel x+1 (0 for
// x = n-1). a and b hold 4n bytes, p 32n; n >= 1.
//
//go:noescape
func packPairsAVX2(p, a, b *byte, n int)

// resampleAVX2 computes m output pixels of both rows from the pairs p made
// by packPairsAVX2: output xx sums (count[xx]+1)/2 tap pairs starting at
// source index first[xx] with the split weights at pairs[xx*kpairs*2:] (see
// window.splitPairs), and writes 3 bytes at dstA[3xx:] and dstB[3xx:].
//
//go:noescape
func resampleAVX2(p *byte, first, count *int, pairs *int32, kpairs, m int, dstA, dstB *byte)

// horizontal4x2SIMD is horizontal4x2 on the AVX2 kernel: w.pairs must be
// set (by splitPairs, which checked the windows), and p is scratch of
// 32*source width bytes.
func horizontal4x2SIMD(a, b []byte, w *window, p []byte, dstA, dstB []byte) {
	n, m, kp := w.inSize, w.outSize, w.kpairs
	a, b, p = a[:4*n], b[:4*n], p[:32*n]
	dstA, dstB = dstA[:3*m], dstB[:3*m]
	// splitPairs set pairs only for windows within [0, n) with at most
	// 2*kp taps: the kernel reads p[32*first : 32*(first+count)].
	first, count, pairs := w.first[:m], w.count[:m], w.pairs[:m*kp*2]
	packPairsAVX2(&p[0], &a[0], &b[0], n)
	resampleAVX2(&p[0], &first[0], &count[0], &pairs[0], kp, m, &dstA[0], &dstB[0])
}

// horizontal4SIMD is horizontal4 on the AVX2 kernel (the row paired with
// itself): p is scratch of 32*source width bytes, spare of 3*output width.
func horizontal4SIMD(src []byte, w *window, p, spare, dst []byte) {
	horizontal4x2SIMD(src, src, w, p, dst, spare)
}

// verticalRowAVX2 writes width bytes of one output row of the vertical
// pass: for every column i < width (a multiple of 8), clip8 of half plus
// src[j*stride+i]*coef[j] summed over the n taps j, in wrapping int32 as
// vertical computes it. src holds the n source rows, stride bytes apart.
//
//go:noescape
func verticalRowAVX2(src *byte, stride int, coef *int32, n, width int, dst *byte)

// verticalSIMD is vertical on the AVX2 kernel: the columns of each output
// row in blocks of 8, the last stride%8 in Go. It needs no accumulators.
func verticalSIMD(tmp []byte, stride, rowOffset int, w *window, lo, hi int, dst []byte) {
	ks := w.ksize
	vec := stride &^ 7
	for yy := lo; yy < hi; yy++ {
		n := w.count[yy]
		k := w.coef[yy*ks : yy*ks+n]
		base := w.first[yy] - rowOffset
		// the kernel reads src[j*stride : j*stride+vec] for j < n
		src := tmp[base*stride : (base+n)*stride]
		out := dst[yy*stride : (yy+1)*stride]
		if n == 0 || stride == 0 {
			for i := range out {
				out[i] = clip8(half)
			}
			continue
		}
		if vec > 0 {
			verticalRowAVX2(&src[0], stride, &k[0], n, vec, &out[0])
		}
		for i := vec; i < stride; i++ {
			acc := half
			for j, c := range k {
				acc += int32(src[j*stride+i]) * c
			}
			out[i] = clip8(acc)
		}
	}
}
