package preprocess

import (
	"encoding/binary"
	"image"
	"image/color"
)

// rowSource reads the rows of an image as PIL's convert("RGB") sees them:
// alpha is dropped, never composited nor premultiplied; gray is one channel
// (replicated later, as L -> RGB does); palettes are looked up.
//
// Rows come out as 4 bytes per pixel (R, G, B, unused) or, for gray images,
// 1 byte per pixel. Where the image already stores that layout the row is a
// slice of its own buffer, so nothing is copied.
type rowSource struct {
	img           image.Image
	width, height int
	gray          bool
	palette       [256][4]byte
	cb, cr        []byte // upsampled chroma of one JPEG row
}

// reset points s at img. s lives in pooled scratch so that reading a frame
// allocates nothing.
func (s *rowSource) reset(img image.Image) {
	b := img.Bounds()
	s.img, s.width, s.height, s.gray = img, b.Dx(), b.Dy(), false
	switch m := img.(type) {
	case *image.Gray, *image.Gray16:
		s.gray = true
	case *image.Paletted:
		s.palette = [256][4]byte{} // indices past the palette read as black
		for i, c := range m.Palette {
			if i >= len(s.palette) {
				break
			}
			r, g, bl := straightRGB(c)
			s.palette[i] = [4]byte{r, g, bl, 0}
		}
	}
}

// channels is 1 for gray sources and 3 otherwise.
func (s *rowSource) channels() int {
	if s.gray {
		return 1
	}
	return 3
}

// bytesPerPixel of the rows that row returns.
func (s *rowSource) bytesPerPixel() int {
	if s.gray {
		return 1
	}
	return 4
}

// row returns row y (0-based from the top of the bounds), using buf (at
// least width*bytesPerPixel long) when a conversion is needed.
func (s *rowSource) row(y int, buf []byte) []byte {
	b := s.img.Bounds()
	w := s.width
	y += b.Min.Y
	switch m := s.img.(type) {
	case *image.NRGBA:
		off := m.PixOffset(b.Min.X, y)
		return m.Pix[off : off+4*w]
	case *image.RGBA:
		off := m.PixOffset(b.Min.X, y)
		src := m.Pix[off : off+4*w]
		opaque := true
		for i := 3; i < len(src); i += 4 {
			if src[i] != 0xff {
				opaque = false
				break
			}
		}
		if opaque {
			return src
		}
		dst := buf[:4*w]
		for x := 0; x < w; x++ {
			p := src[4*x : 4*x+4]
			r, g, bl := unpremultiply8(p[0], p[1], p[2], p[3])
			dst[4*x], dst[4*x+1], dst[4*x+2] = r, g, bl
		}
		return dst
	case *RGB:
		off := m.PixOffset(b.Min.X, y)
		src := m.Pix[off : off+3*w : off+3*w]
		dst := buf[:4*w]
		// Four pixels (three words) at a time; the unused fourth bytes
		// get whatever the shifts leave there.
		d, sr := dst, src
		le := binary.LittleEndian
		for len(sr) >= 12 && len(d) >= 16 {
			v0, v1, v2 := le.Uint32(sr), le.Uint32(sr[4:]), le.Uint32(sr[8:])
			le.PutUint32(d, v0)
			le.PutUint32(d[4:], v0>>24|v1<<8)
			le.PutUint32(d[8:], v1>>16|v2<<16)
			le.PutUint32(d[12:], v2>>8)
			d, sr = d[16:], sr[12:]
		}
		for len(sr) >= 3 && len(d) >= 4 {
			d[0], d[1], d[2] = sr[0], sr[1], sr[2]
			d, sr = d[4:], sr[3:]
		}
		return dst
	case *image.Gray:
		off := m.PixOffset(b.Min.X, y)
		return m.Pix[off : off+w]
	case *image.Gray16:
		// PIL opens 16-bit gray as mode I;16, whose conversion to RGB
		// saturates at 255 rather than scaling.
		off := m.PixOffset(b.Min.X, y)
		src := m.Pix[off : off+2*w]
		dst := buf[:w]
		for x := range dst {
			v := uint16(src[2*x])<<8 | uint16(src[2*x+1])
			if v > 255 {
				v = 255
			}
			dst[x] = byte(v)
		}
		return dst
	case *image.Paletted:
		off := m.PixOffset(b.Min.X, y)
		src := m.Pix[off : off+w]
		dst := buf[:4*w]
		for x, idx := range src {
			copy(dst[4*x:4*x+4], s.palette[idx][:])
		}
		return dst
	case *image.YCbCr:
		return s.ycbcrRow(m, y, buf[:4*w])
	case *image.NRGBA64:
		// 16-bit PNGs: PIL keeps the most significant byte.
		off := m.PixOffset(b.Min.X, y)
		src := m.Pix[off : off+8*w]
		dst := buf[:4*w]
		for x := 0; x < w; x++ {
			dst[4*x], dst[4*x+1], dst[4*x+2] = src[8*x], src[8*x+2], src[8*x+4]
		}
		return dst
	default:
		dst := buf[:4*w]
		for x := 0; x < w; x++ {
			r, g, bl := straightRGB(s.img.At(b.Min.X+x, y))
			dst[4*x], dst[4*x+1], dst[4*x+2] = r, g, bl
		}
		return dst
	}
}

// straightRGB returns the non-premultiplied 8-bit colour of c, keeping the
// stored colour of straight-alpha types even where alpha is 0.
func straightRGB(c color.Color) (r, g, b byte) {
	switch v := c.(type) {
	case color.NRGBA:
		return v.R, v.G, v.B
	case color.NRGBA64:
		return byte(v.R >> 8), byte(v.G >> 8), byte(v.B >> 8)
	case color.Gray:
		return v.Y, v.Y, v.Y
	case color.RGBA:
		return unpremultiply8(v.R, v.G, v.B, v.A)
	}
	n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
	return byte(n.R >> 8), byte(n.G >> 8), byte(n.B >> 8)
}

// unpremultiply8 recovers the straight colour of a premultiplied pixel the
// way image/color does (through 16 bits).
func unpremultiply8(r, g, b, a byte) (byte, byte, byte) {
	switch a {
	case 0xff:
		return r, g, b
	case 0:
		return 0, 0, 0
	}
	n := color.NRGBA64Model.Convert(color.RGBA{r, g, b, a}).(color.NRGBA64)
	return byte(n.R >> 8), byte(n.G >> 8), byte(n.B >> 8)
}
