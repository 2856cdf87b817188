//go:build !amd64

package preprocess

// haveSIMD reports whether a SIMD horizontal pass can run here: none is
// written for this architecture, so the Go kernels run.
const haveSIMD = false

func horizontal4x2SIMD(a, b []byte, w *window, p []byte, dstA, dstB []byte) {
	panic("preprocess: no SIMD horizontal pass on this architecture")
}

func horizontal4SIMD(src []byte, w *window, p, spare, dst []byte) {
	panic("preprocess: no SIMD horizontal pass on this architecture")
}

func verticalSIMD(tmp []byte, stride, rowOffset int, w *window, lo, hi int, dst []byte) {
	panic("preprocess: no SIMD vertical pass on this architecture")
}
