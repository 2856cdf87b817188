package preprocess

import "image"

// JPEG screenshots reach the model through PIL, i.e. libjpeg-turbo, which
// upsamples subsampled chroma with its "fancy" triangle filter and converts
// YCbCr to RGB with its own fixed-point tables. Go's image/jpeg keeps the
// chroma planes at their stored resolution, so we upsample and convert here
// the way libjpeg does; only the IDCT rounding then differs.

const (
	yccScaleBits = 16
	yccHalf      = 1 << (yccScaleBits - 1)
)

// fix16 is libjpeg's FIX(): the constant in 16-bit fixed point, rounded.
func fix16(x float64) int32 { return int32(x*(1<<yccScaleBits) + 0.5) }

var crR, cbB, crG, cbG [256]int32

func init() {
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix16(1.40200)*x + yccHalf) >> yccScaleBits
		cbB[i] = (fix16(1.77200)*x + yccHalf) >> yccScaleBits
		crG[i] = -fix16(0.71414) * x
		cbG[i] = -fix16(0.34414)*x + yccHalf
	}
}

func clampByte(v int32) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// ycbcrRow converts row y of a YCbCr image into dst (4 bytes per pixel).
func (s *rowSource) ycbcrRow(m *image.YCbCr, y int, dst []byte) []byte {
	w := s.width
	s.cb = grow(s.cb, w)
	s.cr = grow(s.cr, w)
	cb, cr := s.cb, s.cr
	b := m.Rect
	cw := (b.Max.X+1)/2 - b.Min.X/2 // chroma columns of a 2:1 horizontal subsampling
	atOrigin := b.Min == image.Point{}
	switch {
	case m.SubsampleRatio == image.YCbCrSubsampleRatio420 && atOrigin && cw > 2:
		ch := (b.Max.Y + 1) / 2
		i := y / 2
		far := i + 1
		if y%2 == 0 {
			far = i - 1
		}
		far = max(0, min(far, ch-1))
		fancyH2V2(m.Cb[i*m.CStride:], m.Cb[far*m.CStride:], cw, cb)
		fancyH2V2(m.Cr[i*m.CStride:], m.Cr[far*m.CStride:], cw, cr)
	case m.SubsampleRatio == image.YCbCrSubsampleRatio422 && atOrigin && cw > 2:
		fancyH2V1(m.Cb[y*m.CStride:], cw, cb)
		fancyH2V1(m.Cr[y*m.CStride:], cw, cr)
	default:
		for x := range w {
			ci := m.COffset(b.Min.X+x, y)
			cb[x], cr[x] = m.Cb[ci], m.Cr[ci]
		}
	}
	yrow := m.Y[m.YOffset(b.Min.X, y):]
	yrow = yrow[:w]
	for x, yv := range yrow {
		l := int32(yv)
		d := dst[4*x : 4*x+3 : 4*x+3]
		d[0] = clampByte(l + crR[cr[x]])
		d[1] = clampByte(l + (cbG[cb[x]]+crG[cr[x]])>>yccScaleBits)
		d[2] = clampByte(l + cbB[cb[x]])
	}
	return dst
}

// fancyH2V2 upsamples one chroma row 2x in both directions for the output
// row whose nearest chroma row is near and next nearest far: weights 9/16,
// 3/16, 3/16, 1/16 with libjpeg's alternating rounding bias. dst may be one
// shorter than 2*cw (odd widths).
func fancyH2V2(near, far []byte, cw int, dst []byte) {
	near, far = near[:cw], far[:cw]
	sum := func(c int) int32 { return int32(near[c])*3 + int32(far[c]) }
	put := func(x int, v int32) {
		if x < len(dst) {
			dst[x] = byte(v)
		}
	}
	this, next := sum(0), sum(1)
	put(0, (this*4+8)>>4)
	put(1, (this*3+next+7)>>4)
	last := this
	this = next
	for c := 1; c < cw-1; c++ {
		next = sum(c + 1)
		put(2*c, (this*3+last+8)>>4)
		put(2*c+1, (this*3+next+7)>>4)
		last, this = this, next
	}
	put(2*(cw-1), (this*3+last+8)>>4)
	put(2*(cw-1)+1, (this*4+7)>>4)
}

// fancyH2V1 upsamples one chroma row 2x horizontally: 3/4 nearer + 1/4
// further sample, first and last samples copied.
func fancyH2V1(in []byte, cw int, dst []byte) {
	in = in[:cw]
	put := func(x int, v int32) {
		if x < len(dst) {
			dst[x] = byte(v)
		}
	}
	put(0, int32(in[0]))
	put(1, (int32(in[0])*3+int32(in[1])+2)>>2)
	for c := 1; c < cw-1; c++ {
		v := int32(in[c]) * 3
		put(2*c, (v+int32(in[c-1])+1)>>2)
		put(2*c+1, (v+int32(in[c+1])+2)>>2)
	}
	put(2*(cw-1), (int32(in[cw-1])*3+int32(in[cw-2])+1)>>2)
	put(2*(cw-1)+1, int32(in[cw-1]))
}
