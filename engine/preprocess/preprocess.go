// Package preprocess turns screenshots into the vision model's input exactly
// as Hugging Face's BlipImageProcessor does: convert to RGB like PIL's
// convert("RGB"), resize ignoring the aspect ratio with PIL's antialiased
// bicubic resampler (reproduced bit for bit), rescale by 1/255, normalize by
// mean and std, and lay out channels first.
//
// It also decodes PNG and JPEG screenshots and wraps AITW's raw pixel arrays.
package preprocess

import (
	"errors"
	"fmt"
	"image"
	"math"
	"runtime"
	"sync"
)

// Config is the processor configuration of the bundle manifest's
// "preprocess" section.
type Config struct {
	Height, Width int
	// RescaleFactor multiplies the 8-bit values (1/255). transformers
	// multiplies in float64; a float32 factor that is the float32 rounding of
	// 1/n is taken as exactly 1/n so the result rounds the same way.
	RescaleFactor float32
	Mean, Std     [3]float32
}

// DefaultConfig is BLIP-2's processor: 224x224, 1/255, CLIP mean and std.
func DefaultConfig() Config {
	return Config{
		Height: 224, Width: 224,
		RescaleFactor: float32(1.0 / 255),
		Mean:          [3]float32{0.48145466, 0.4578275, 0.40821073},
		Std:           [3]float32{0.26862954, 0.26130258, 0.27577711},
	}
}

// Len is the number of floats Pixels produces: 3*Height*Width.
func (c Config) Len() int { return 3 * c.Height * c.Width }

func (c Config) validate() error {
	if c.Height <= 0 || c.Width <= 0 {
		return fmt.Errorf("preprocess config: size %dx%d must be positive", c.Width, c.Height)
	}
	for i, s := range c.Std {
		if s == 0 || math.IsNaN(float64(s)) {
			return fmt.Errorf("preprocess config: std[%d] = %v", i, s)
		}
	}
	return nil
}

// Pixels returns the CHW float32 tensor (without batch dimension) for img.
// It panics if the Config is invalid or img is empty (programmer errors);
// use PixelsInto to get those as errors.
func (c Config) Pixels(img image.Image) []float32 {
	dst := make([]float32, c.Len())
	if err := c.PixelsInto(dst, img); err != nil {
		panic(err)
	}
	return dst
}

// PixelsInto writes the CHW tensor for img into dst, which must hold exactly
// c.Len() floats. After the first call for a given screen size it allocates
// nothing. Safe for concurrent use.
func (c Config) PixelsInto(dst []float32, img image.Image) error {
	if err := c.validate(); err != nil {
		return err
	}
	if len(dst) != c.Len() {
		return fmt.Errorf("preprocess: destination holds %d floats, want 3*%d*%d = %d", len(dst), c.Height, c.Width, c.Len())
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	px, ch, err := s.resize(img, c.Width, c.Height)
	if err != nil {
		return err
	}

	// Every output is a function of (channel, byte): a 3x256 table computed
	// with transformers' rounding — x*scale in float64 cast to float32, then
	// (x - mean) / std in float32 — makes the loop below a lookup.
	var lut [3][256]float32
	scale := c.rescale64()
	for i := 0; i < 256; i++ {
		v := float32(float64(i) * scale)
		for k := 0; k < 3; k++ {
			lut[k][i] = (v - c.Mean[k]) / c.Std[k]
		}
	}
	plane := c.Height * c.Width
	r, g, b := dst[:plane], dst[plane:2*plane], dst[2*plane:3*plane]
	if ch == 1 {
		for i, v := range px[:plane] {
			r[i], g[i], b[i] = lut[0][v], lut[1][v], lut[2][v]
		}
		return nil
	}
	px = px[:3*plane]
	for i := range r {
		p := px[3*i : 3*i+3 : 3*i+3]
		r[i], g[i], b[i] = lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]
	}
	return nil
}

// rescale64 is the float64 factor transformers would multiply by.
func (c Config) rescale64() float64 {
	f := float64(c.RescaleFactor)
	if f > 0 {
		n := math.Round(1 / f)
		if n >= 1 && float32(1/n) == c.RescaleFactor {
			return 1 / n
		}
	}
	return f
}

// ResizeBicubic converts src to RGB as PIL's convert("RGB") does (alpha
// dropped) and resizes it to width x height with PIL's antialiased bicubic
// filter, bit-exactly. The result is opaque.
func ResizeBicubic(src image.Image, width, height int) *image.NRGBA {
	if width <= 0 || height <= 0 {
		panic(fmt.Sprintf("preprocess.ResizeBicubic: size %dx%d must be positive", width, height))
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	out := image.NewNRGBA(image.Rect(0, 0, width, height))
	px, ch, err := s.resize(src, width, height)
	if err != nil {
		return out // an empty source (or a side Decode and FromRaw refuse): black
	}
	n := width * height
	for i := 0; i < n; i++ {
		d := out.Pix[4*i : 4*i+4 : 4*i+4]
		if ch == 1 {
			d[0], d[1], d[2] = px[i], px[i], px[i]
		} else {
			d[0], d[1], d[2] = px[3*i], px[3*i+1], px[3*i+2]
		}
		d[3] = 0xff
	}
	return out
}

// scratch holds the buffers of one resize; pooled so steady-state frames
// allocate nothing.
type scratch struct {
	bands []band  // one per worker
	tmp   []byte  // horizontal pass output
	out   []byte  // vertical pass output
	acc   []int32 // chunked resizes: the vertical sums of every output row

	// the current resize, read by the workers
	first, stride int
	chunkEnd      int // chunked resizes: tmp holds source rows [first, chunkEnd)
	needH         bool
	hw, vw        *window
	wg            sync.WaitGroup

	forceWorkers   int // tests: bands regardless of size and cores
	forceChunkRows int // tests: chunked resize with this many source rows
}

// band holds one worker's row buffers: workers share only tmp and out, and
// write disjoint rows of them.
type band struct {
	src  rowSource
	row  []byte  // one converted source row
	row2 []byte  // the next one, for the two-row horizontal pass
	p3   []int64 // two rows' channels packed in pairs
	acc  []int32 // vertical accumulators, one output row
	rb   []int64 // packed red/blue of one source row
	g    []int32 // green of one source row

	pp    []byte // SIMD horizontal pass: tap pairs of two rows
	spare []byte // SIMD one-row pass: the discarded second output row
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

var errEmptyImage = errors.New("preprocess: empty image")

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// parallelPixels is the source size from which a resize splits its rows
// across cores: a phone screenshot (2.6 Mpx) takes ~20 ms on one core, a
// small image less than the cost of starting workers.
const parallelPixels = 1 << 18

// maxWorkers bounds the bands of one resize. A lone screen (one action, on
// a GPU host whose other cores are idle) is resized by up to this many
// cores: with 4, a 1080x2400 screen took 5.7 ms of a 126 ms action on the
// H200's 16-core host. Screens of a batch are resized side by side anyway.
const maxWorkers = 16

func workers(pixels int) int {
	if pixels < parallelPixels {
		return 1
	}
	return max(1, min(runtime.GOMAXPROCS(0), maxWorkers))
}

// Passes of a resize, run over bands of rows.
const (
	passH = iota
	passV
	passVAcc
)

// maxTmpBytes bounds the horizontal pass's output held at once. A phone
// screenshot's (2400 source rows of 224 RGB pixels, 1.6 MB) fits, and is
// resized in one piece; a taller source goes through in chunks of source
// rows (see resizeChunked), so that a resize never holds more than this
// plus 4 bytes per output byte beyond the source image, whatever its shape:
// without chunks a 1 x 40M image resized to 224x224 would need 27 GB here.
const maxTmpBytes = 8 << 20

// pass runs one pass over rows [lo, hi) with band w's buffers: source rows
// for the horizontal pass, output rows for the vertical one.
func (s *scratch) pass(kind, w, lo, hi int) {
	bd := &s.bands[w]
	if kind == passH {
		bd.horizontal(s.tmp[(lo-s.first)*s.stride:(hi-s.first)*s.stride], lo, hi, s.needH, s.hw, s.stride)
		return
	}
	if kind == passVAcc {
		verticalAcc(s.tmp, s.stride, s.first, s.chunkEnd, s.vw, lo, hi, s.acc)
		return
	}
	bd.verticalRows(s.tmp, s.stride, s.first, s.vw, lo, hi, s.out)
}

// parallel runs a pass over [lo, hi) cut into up to len(s.bands) contiguous
// pieces whose starts are aligned to align rows (so the two-row horizontal
// pass pairs rows as the serial pass does), and waits. No closures: the
// serial path must not allocate.
func (s *scratch) parallel(kind, lo, hi, align int) {
	n := len(s.bands)
	if n == 1 || hi-lo < 2*align*n {
		s.pass(kind, 0, lo, hi)
		return
	}
	size := ((hi-lo)/n + align - 1) / align * align
	for w := 0; w < n; w++ {
		a, b := lo+w*size, min(hi, lo+(w+1)*size)
		if w == n-1 {
			b = hi
		}
		if a >= b {
			break
		}
		s.wg.Add(1)
		go s.runPass(kind, w, a, b)
	}
	s.wg.Wait()
}

func (s *scratch) runPass(kind, w, lo, hi int) {
	defer s.wg.Done()
	s.pass(kind, w, lo, hi)
}

// resize runs Pillow's two passes — horizontal over the source rows the
// vertical window needs, rounding to bytes, then vertical — skipping a pass
// whose size does not change, as Pillow does. Both passes compute each row
// independently, so bands of rows run on separate cores with results
// identical to the serial order. It returns packed pixels with ch channels (1
// for gray sources, else 3), valid until s is reused.
func (s *scratch) resize(img image.Image, outW, outH int) (px []byte, ch int, err error) {
	b := img.Bounds()
	inW, inH := b.Dx(), b.Dy()
	if inW <= 0 || inH <= 0 {
		return nil, 0, errEmptyImage
	}
	if inW > MaxSide || inH > MaxSide {
		// what Decode and FromRaw refuse: the scratch grows with a side
		return nil, 0, fmt.Errorf("preprocess: image %dx%d has a side over %d pixels", inW, inH, MaxSide)
	}
	n := workers(inW * inH)
	if s.forceWorkers > 0 {
		n = s.forceWorkers
	}
	s.bands = grow(s.bands, n)
	for i := range s.bands {
		s.bands[i].src.reset(img)
	}
	defer func() { // do not keep the frame alive in the pool
		for i := range s.bands {
			s.bands[i].src.img = nil
		}
	}()
	src := &s.bands[0].src
	ch = src.channels()
	needH, needV := outW != inW, outH != inH

	var vw, hw *window
	first, last := 0, inH
	if needV {
		vw = cachedWindow(inH, outH)
		first = vw.first[0]
		last = vw.first[outH-1] + vw.count[outH-1]
	}
	if needH {
		hw = cachedWindow(inW, outW)
	}
	stride := outW * ch
	s.first, s.stride, s.needH, s.hw, s.vw = first, stride, needH, hw, vw
	if chunk := s.chunkRows(stride); needV && chunk < last-first {
		return s.resizeChunked(first, last, outH, chunk), ch, nil
	}
	s.tmp = grow(s.tmp, (last-first)*stride)
	s.parallel(passH, first, last, 2)
	if !needV {
		return s.tmp, ch, nil
	}
	s.out = grow(s.out, outH*stride)
	s.parallel(passV, 0, outH, 1)
	return s.out, ch, nil
}

// chunkRows is how many horizontally resampled source rows of stride bytes
// a resize holds at once.
func (s *scratch) chunkRows(stride int) int {
	if s.forceChunkRows > 0 {
		return s.forceChunkRows
	}
	return max(2, maxTmpBytes/stride)
}

// resizeChunked is resize's two passes for sources whose horizontal pass
// output would exceed maxTmpBytes: source rows [first, last) go through the
// horizontal pass chunk rows at a time, and each chunk is added into the
// vertical sums of the output rows whose windows it reaches, kept for all
// output rows (4 bytes per output byte). Integer sums do not depend on their
// order, so the result is identical to the one-piece resize, and every
// source row is resampled once.
func (s *scratch) resizeChunked(first, last, outH, chunk int) []byte {
	stride, vw := s.stride, s.vw
	s.acc = grow(s.acc, outH*stride)
	for i := range s.acc {
		s.acc[i] = half
	}
	s.tmp = grow(s.tmp, chunk*stride)
	oLo := 0
	for lo := first; lo < last; lo += chunk {
		hi := min(last, lo+chunk)
		s.first, s.chunkEnd = lo, hi
		s.parallel(passH, lo, hi, 2)
		// Windows move forward with the output row: skip those that end
		// before this chunk, take those that start before its end.
		for oLo < outH && vw.first[oLo]+vw.count[oLo] <= lo {
			oLo++
		}
		oHi := oLo
		for oHi < outH && vw.first[oHi] < hi {
			oHi++
		}
		s.parallel(passVAcc, oLo, oHi, 1)
	}
	s.out = grow(s.out, outH*stride)
	for i, a := range s.acc {
		s.out[i] = clip8(a)
	}
	return s.out
}

// horizontal runs the horizontal pass (or the channel packing when the width
// is unchanged) over source rows [lo, hi) into tmp, which starts at row lo.
func (bd *band) horizontal(tmp []byte, lo, hi int, needH bool, hw *window, stride int) {
	src := &bd.src
	ch, inW := src.channels(), src.width
	bd.row = grow(bd.row, inW*src.bytesPerPixel())
	y := lo
	if needH && ch == 3 {
		bd.row2 = grow(bd.row2, inW*4)
		for ; y+1 < hi; y += 2 {
			a := src.row(y, bd.row)
			b := src.row(y+1, bd.row2)
			t := tmp[(y-lo)*stride : (y-lo+2)*stride]
			bd.horizontalPair(a, b, hw, t[:stride], t[stride:])
		}
	}
	for ; y < hi; y++ {
		r := src.row(y, bd.row)
		t := tmp[(y-lo)*stride : (y-lo+1)*stride]
		switch {
		case needH && ch == 1:
			horizontal1(r, hw, t)
		case needH:
			bd.horizontalOne(r, hw, t)
		case ch == 1:
			copy(t, r)
		default:
			for x := 0; x < inW; x++ {
				t[3*x], t[3*x+1], t[3*x+2] = r[4*x], r[4*x+1], r[4*x+2]
			}
		}
	}
}
