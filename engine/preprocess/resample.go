package preprocess

import (
	"encoding/binary"
	"math"
	"sync"
)

// precisionBits is the fixed-point precision of the 8-bit resampling
// coefficients: 8 bits are left for the pixel value and 2 for overshoot and
// sign, so a whole window sum fits an int32.
const precisionBits = 32 - 8 - 2

// window is the resampling of one axis (inSize -> outSize): for every output
// index, the first source index, the number of source samples and their
// fixed-point bicubic weights (ksize slots per output, the unused ones 0).
// The weights take about 16 bytes per source index (ksize is about four
// times the downscale factor): 1 MB at MaxSide.
type window struct {
	inSize, outSize int
	ksize           int
	first           []int
	count           []int
	coef            []int32

	// pairs holds the weights split for the SIMD horizontal pass (see
	// splitPairs); nil where that pass is unavailable or the window does not
	// qualify, and then the Go kernels run.
	pairs  []int32
	kpairs int // pairs per output index
}

// cubic is the bicubic convolution kernel with a = -0.5. Every product is
// rounded explicitly (float64 conversions) so no fused multiply-add changes
// the weights on any architecture: the weights must match the C reference to
// the last bit before they are quantized.
func cubic(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		t := float64((a+2)*x) - (a + 3)
		t = float64(t * x)
		t = float64(t * x)
		return t + 1
	}
	if x < 2 {
		t := float64((x-5)*x) + 8
		t = float64(t*x) - 4
		return float64(t * a)
	}
	return 0
}

// newWindow computes the antialiased bicubic window of one axis the way
// Pillow's resampler does: support scaled by the downscale factor, bounds
// rounded from the sample centre, weights normalized to sum 1, then
// quantized to precisionBits with round-half-away-from-zero.
func newWindow(inSize, outSize int) *window {
	// Pillow takes the box edges as float32 and the scale in float64.
	scale := float64(float32(inSize)) / float64(outSize)
	filterScale := scale
	if filterScale < 1 {
		filterScale = 1
	}
	support := 2 * filterScale
	ksize := int(math.Ceil(support))*2 + 1
	ss := 1 / filterScale

	w := &window{
		inSize: inSize, outSize: outSize, ksize: ksize,
		first: make([]int, outSize),
		count: make([]int, outSize),
		coef:  make([]int32, outSize*ksize),
	}
	weights := make([]float64, ksize)
	for xx := 0; xx < outSize; xx++ {
		center := float64((float64(xx) + 0.5) * scale)
		lo := int(center - support + 0.5) // truncation toward zero, as C's (int)
		if lo < 0 {
			lo = 0
		}
		hi := int(center + support + 0.5)
		if hi > inSize {
			hi = inSize
		}
		n := hi - lo
		if n > ksize {
			n = ksize // cannot happen for sane sizes; keeps the slices in range
		}
		sum := 0.0
		for x := 0; x < n; x++ {
			v := cubic(float64(float64(x+lo)-center+0.5) * ss)
			weights[x] = v
			sum += v
		}
		w.first[xx] = lo
		w.count[xx] = n
		k := w.coef[xx*ksize : xx*ksize+ksize]
		for x := 0; x < n; x++ {
			k[x] = quantize(weights[x], sum)
		}
	}
	if haveSIMD {
		w.splitPairs()
	}
	return w
}

// splitPairs fills w.pairs for the SIMD horizontal pass. Each weight c is
// split into hi = c>>11 and lo = c&0x7ff (c = hi<<11 + lo, both int16), and
// the taps of an output index are taken in pairs: pair j is two int32s, the
// first holding hi of taps 2j and 2j+1 as two int16s (low half first), the
// second their lo. kpairs pairs per output index; the slots past its count
// are 0. The kernel sums pixel*hi and pixel*lo separately in int32 lanes
// and returns (sumHi<<11)+sumLo+half, which wraps to the exact sum whenever
// that sum fits an int32. Windows where a weight does not split into int16
// halves, or where a sum of 8-bit pixels could leave int32 (so that the Go
// kernels' own wrap-around would decide the result), keep pairs nil; so do
// windows reaching outside the source, which the kernel does not check.
func (w *window) splitPairs() {
	ks := w.ksize
	kp := (ks + 1) / 2
	for xx := 0; xx < w.outSize; xx++ {
		if f, n := w.first[xx], w.count[xx]; f < 0 || n < 0 || n > ks || f+n > w.inSize {
			return
		}
		var pos, neg int64
		for _, c := range w.coef[xx*ks : xx*ks+w.count[xx]] {
			if c < -1<<26 || c >= 1<<26 {
				return
			}
			if c > 0 {
				pos += int64(c)
			} else {
				neg += int64(c)
			}
		}
		if int64(half)+255*pos > math.MaxInt32 || int64(half)+255*neg < math.MinInt32 {
			return
		}
	}
	pairs := make([]int32, w.outSize*kp*2)
	for xx := 0; xx < w.outSize; xx++ {
		k := w.coef[xx*ks : xx*ks+ks]
		d := pairs[xx*kp*2 : (xx+1)*kp*2]
		for j := 0; j < kp; j++ {
			var c0, c1 int32
			c0 = k[2*j]
			if 2*j+1 < ks {
				c1 = k[2*j+1]
			}
			hi0, lo0 := uint32(uint16(c0>>11)), uint32(c0&0x7ff)
			hi1, lo1 := uint32(uint16(c1>>11)), uint32(c1&0x7ff)
			d[2*j] = int32(hi0 | hi1<<16)
			d[2*j+1] = int32(lo0 | lo1<<16)
		}
	}
	w.pairs, w.kpairs = pairs, kp
}

// quantize normalizes weight v by the window's sum and rounds it to
// precisionBits, half away from zero.
func quantize(v, sum float64) int32 {
	if sum != 0 {
		v /= sum
	}
	f := float64(v * (1 << precisionBits))
	if v < 0 {
		return int32(f - 0.5)
	}
	return int32(f + 0.5)
}

// coefAt is the weight of source index j for output index xx (j within its
// window).
func (w *window) coefAt(xx, j int) int32 { return w.coef[xx*w.ksize+j-w.first[xx]] }

// windowCache keeps the windows of recently used (in, out) sizes: a phone
// produces one screen size, so after the first frame no window is rebuilt.
var windowCache struct {
	sync.Mutex
	m map[[2]int]*window
}

const maxCachedWindows = 64

func cachedWindow(inSize, outSize int) *window {
	key := [2]int{inSize, outSize}
	windowCache.Lock()
	w := windowCache.m[key]
	windowCache.Unlock()
	if w != nil {
		return w
	}
	w = newWindow(inSize, outSize)
	windowCache.Lock()
	if windowCache.m == nil || len(windowCache.m) >= maxCachedWindows {
		windowCache.m = make(map[[2]int]*window)
	}
	windowCache.m[key] = w
	windowCache.Unlock()
	return w
}

// clip8 turns a fixed-point accumulator into a byte, saturating.
func clip8(acc int32) byte {
	v := acc >> precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

const half = int32(1) << (precisionBits - 1)

// horizontal4 resamples one row of 4-byte pixels (R, G, B, ignored) into
// packed RGB. R and B share one int64 lane pair (R in the low 32 bits, B in
// the high ones): each window sum fits an int32 — the bound Pillow's int
// accumulators rely on — so one 64-bit multiply-add serves both channels and
// the halves separate exactly afterwards. rb and g are scratch of the source
// width.
func horizontal4(src []byte, w *window, rb []int64, g []int32, dst []byte) {
	n := len(rb)
	src = src[:4*n]
	g = g[:n]
	for x := range rb {
		v := binary.LittleEndian.Uint32(src[4*x:])
		rb[x] = int64(v&0xff) | int64(v>>16&0xff)<<32
		g[x] = int32(v >> 8 & 0xff)
	}
	ks := w.ksize
	const halfRB = int64(half) | int64(half)<<32
	for xx := 0; xx < w.outSize; xx++ {
		cnt := w.count[xx]
		k := w.coef[xx*ks : xx*ks+cnt]
		lo := w.first[xx]
		rbs := rb[lo : lo+len(k)]
		gs := g[lo : lo+len(k)]
		accRB, accG := halfRB, half
		// Unrolled by 4; integer sums are exact in any order.
		for len(k) >= 4 {
			c0, c1, c2, c3 := k[0], k[1], k[2], k[3]
			r4, g4 := rbs[:4:4], gs[:4:4]
			accRB += r4[0]*int64(c0) + r4[1]*int64(c1) + r4[2]*int64(c2) + r4[3]*int64(c3)
			accG += g4[0]*c0 + g4[1]*c1 + g4[2]*c2 + g4[3]*c3
			k, rbs, gs = k[4:], rbs[4:], gs[4:]
		}
		for i, c := range k {
			accRB += rbs[i] * int64(c)
			accG += gs[i] * c
		}
		r := int32(accRB)
		b := int32((accRB - int64(r)) >> 32)
		d := dst[xx*3 : xx*3+3 : xx*3+3]
		d[0] = clip8(r)
		d[1] = clip8(accG)
		d[2] = clip8(b)
	}
}

// horizontal4x2 is horizontal4 for two source rows at once: every channel
// of row a shares an int64 with the same channel of row b (a low, b high),
// so three multiply-adds per tap serve six channel sums. p is scratch of
// 3*source width (interleaved R, G, B pairs).
func horizontal4x2(a, b []byte, w *window, p []int64, dstA, dstB []byte) {
	n := len(p) / 3
	a, b = a[:4*n], b[:4*n]
	for x := 0; x < n; x++ {
		va := binary.LittleEndian.Uint32(a[4*x:])
		vb := binary.LittleEndian.Uint32(b[4*x:])
		q := p[3*x : 3*x+3 : 3*x+3]
		q[0] = int64(va&0xff) | int64(vb&0xff)<<32
		q[1] = int64(va>>8&0xff) | int64(vb>>8&0xff)<<32
		q[2] = int64(va>>16&0xff) | int64(vb>>16&0xff)<<32
	}
	ks := w.ksize
	const half2 = int64(half) | int64(half)<<32
	for xx := 0; xx < w.outSize; xx++ {
		cnt := w.count[xx]
		k := w.coef[xx*ks : xx*ks+cnt]
		lo := w.first[xx]
		q := p[3*lo : 3*(lo+len(k))]
		accR, accG, accB := half2, half2, half2
		for i, c := range k {
			t := q[3*i : 3*i+3 : 3*i+3]
			c64 := int64(c)
			accR += t[0] * c64
			accG += t[1] * c64
			accB += t[2] * c64
		}
		rA, gA, bA := int32(accR), int32(accG), int32(accB)
		da := dstA[xx*3 : xx*3+3 : xx*3+3]
		da[0], da[1], da[2] = clip8(rA), clip8(gA), clip8(bA)
		db := dstB[xx*3 : xx*3+3 : xx*3+3]
		db[0] = clip8(int32((accR - int64(rA)) >> 32))
		db[1] = clip8(int32((accG - int64(gA)) >> 32))
		db[2] = clip8(int32((accB - int64(bA)) >> 32))
	}
}

// useSIMD selects the SIMD horizontal and vertical passes where the CPU has
// them (haveSIMD); tests clear it to run the Go kernels.
var useSIMD = haveSIMD

// horizontalPair resamples two source rows: horizontal4x2, on the SIMD
// kernel where it runs (same bytes).
func (bd *band) horizontalPair(a, b []byte, w *window, dstA, dstB []byte) {
	if useSIMD && w.pairs != nil {
		bd.pp = grow(bd.pp, 32*w.inSize)
		horizontal4x2SIMD(a, b, w, bd.pp, dstA, dstB)
		return
	}
	bd.p3 = grow(bd.p3, 3*w.inSize)
	horizontal4x2(a, b, w, bd.p3, dstA, dstB)
}

// horizontalOne resamples one source row: horizontal4, on the SIMD kernel
// where it runs (same bytes).
func (bd *band) horizontalOne(src []byte, w *window, dst []byte) {
	if useSIMD && w.pairs != nil {
		bd.pp = grow(bd.pp, 32*w.inSize)
		bd.spare = grow(bd.spare, 3*w.outSize)
		horizontal4SIMD(src, w, bd.pp, bd.spare, dst)
		return
	}
	bd.rb = grow(bd.rb, w.inSize)
	bd.g = grow(bd.g, w.inSize)
	horizontal4(src, w, bd.rb, bd.g, dst)
}

// horizontal1 resamples one row of a single-channel image.
func horizontal1(src []byte, w *window, dst []byte) {
	ks := w.ksize
	dst = dst[:w.outSize]
	for xx := range dst {
		n := w.count[xx]
		k := w.coef[xx*ks : xx*ks+n]
		s := src[w.first[xx]:]
		s = s[:len(k)]
		acc := half
		for i, c := range k {
			acc += int32(s[i]) * c
		}
		dst[xx] = clip8(acc)
	}
}

// verticalAcc adds source rows [rowLo, rowHi), held in tmp (stride bytes
// each), into the vertical sums acc of output rows [lo, hi), as far as their
// windows reach into those rows: vertical's sums, one chunk at a time.
func verticalAcc(tmp []byte, stride, rowLo, rowHi int, w *window, lo, hi int, acc []int32) {
	for yy := lo; yy < hi; yy++ {
		f := w.first[yy]
		a, b := max(f, rowLo), min(f+w.count[yy], rowHi)
		out := acc[yy*stride : (yy+1)*stride]
		for j := a; j < b; j++ {
			c := w.coefAt(yy, j)
			row := tmp[(j-rowLo)*stride : (j-rowLo+1)*stride]
			row = row[:len(out)]
			for i, v := range row {
				out[i] += int32(v) * c
			}
		}
	}
}

// vertical resamples the rows of tmp (stride bytes each, row 0 being source
// row rowOffset) into dst, one output row at a time, accumulating whole rows
// so the inner loop streams through memory. Only output rows [lo, hi) are
// written, so bands of rows can run in parallel.
func vertical(tmp []byte, stride, rowOffset int, w *window, lo, hi int, acc []int32, dst []byte) {
	ks := w.ksize
	acc = acc[:stride]
	for yy := lo; yy < hi; yy++ {
		for i := range acc {
			acc[i] = half
		}
		n := w.count[yy]
		k := w.coef[yy*ks : yy*ks+n]
		base := w.first[yy] - rowOffset
		for j, c := range k {
			row := tmp[(base+j)*stride : (base+j+1)*stride]
			row = row[:len(acc)]
			for i, v := range row {
				acc[i] += int32(v) * c
			}
		}
		out := dst[yy*stride : (yy+1)*stride]
		out = out[:len(acc)]
		for i, a := range acc {
			out[i] = clip8(a)
		}
	}
}

// verticalRows is vertical, on the SIMD kernel where it runs (same bytes:
// both sum in wrapping int32, whose result does not depend on the order),
// which needs no accumulators.
func (bd *band) verticalRows(tmp []byte, stride, rowOffset int, w *window, lo, hi int, dst []byte) {
	if useSIMD {
		verticalSIMD(tmp, stride, rowOffset, w, lo, hi, dst)
		return
	}
	bd.acc = grow(bd.acc, stride)
	vertical(tmp, stride, rowOffset, w, lo, hi, bd.acc, dst)
}
