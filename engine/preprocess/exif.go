package preprocess

import (
	"bufio"
	"encoding/binary"
	"errors"
	"image"
	"io"
)

// JPEG markers the header scan knows.
const (
	mSOF0  = 0xc0
	mSOF2  = 0xc2
	mSOS   = 0xda
	mEOI   = 0xd9
	mRST0  = 0xd0
	mRST7  = 0xd7
	mAPP0  = 0xe0
	mAPP1  = 0xe1
	mAPP14 = 0xee
	mAPP15 = 0xef
	mCOM   = 0xfe
)

// maxJPEGTables bounds the segments kept for image/jpeg before the frame
// header (tables, JFIF and Adobe segments; each at most 64 KB). Real files
// have a few kilobytes.
const maxJPEGTables = 1 << 20

// jpegHeader is what scanJPEG learned.
type jpegHeader struct {
	sof           bool // a SOF0-2 frame header was read (the ones image/jpeg decodes)
	width, height int
	orientation   int // EXIF Orientation 1-8; 1 when absent or invalid
	// replay is the stream up to the end of where the scan stopped, without
	// the segments image/jpeg ignores (APP1-APP13, APP15, COM), fill and
	// extraneous bytes.
	replay []byte
}

// scanJPEG reads segments the way image/jpeg does until the frame header
// (or any marker it does not step over: SOS, EOI, unknown ones, which
// image/jpeg then reports on). Memory is bounded: skipped segments are
// discarded as they are read, kept ones are limited to maxJPEGTables, and
// only the first EXIF segment is held while it is parsed.
func scanJPEG(br *bufio.Reader) (*jpegHeader, error) {
	h := &jpegHeader{orientation: 1}
	var soi [2]byte
	if _, err := io.ReadFull(br, soi[:]); err != nil {
		return nil, err
	}
	h.replay = append(h.replay, soi[:]...) // checked by the caller's magic
	seenExif := false
	for {
		var t [2]byte
		if _, err := io.ReadFull(br, t[:]); err != nil {
			return h, nil // let image/jpeg report the truncation
		}
		for t[0] != 0xff { // extraneous data, skipped as image/jpeg does
			t[0] = t[1]
			b, err := br.ReadByte()
			if err != nil {
				return h, nil
			}
			t[1] = b
		}
		marker := t[1]
		if marker == 0 {
			continue
		}
		for marker == 0xff {
			b, err := br.ReadByte()
			if err != nil {
				return h, nil
			}
			marker = b
		}
		if marker == mEOI {
			h.replay = append(h.replay, 0xff, marker)
			return h, nil
		}
		if mRST0 <= marker && marker <= mRST7 {
			continue
		}
		var l [2]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			h.replay = append(h.replay, 0xff, marker)
			return h, nil
		}
		n := int(binary.BigEndian.Uint16(l[:])) - 2
		seg := []byte{0xff, marker, l[0], l[1]}
		switch {
		case n < 0, marker == mSOS:
			h.replay = append(h.replay, seg...)
			return h, nil
		case mAPP0 < marker && marker <= mAPP15 && marker != mAPP14 || marker == mCOM:
			if marker == mAPP1 && !seenExif && n >= 6 {
				p, err := br.Peek(6)
				if err == nil && string(p) == "Exif\x00\x00" {
					seenExif = true
					payload := make([]byte, n) // at most 64 KB
					if _, err := io.ReadFull(br, payload); err != nil {
						return h, nil
					}
					h.orientation = exifOrientation(payload[6:])
					continue
				}
			}
			if _, err := br.Discard(n); err != nil {
				return h, nil
			}
			continue
		}
		// A segment image/jpeg reads: keep it.
		if len(h.replay)+len(seg)+n > maxJPEGTables {
			return nil, errors.New("more than 1 MB of tables before the frame header")
		}
		h.replay = append(h.replay, seg...)
		start := len(h.replay)
		h.replay = append(h.replay, make([]byte, n)...)
		if _, err := io.ReadFull(br, h.replay[start:]); err != nil {
			h.replay = h.replay[:start]
			return h, nil
		}
		if mSOF0 <= marker && marker <= mSOF2 {
			p := h.replay[start:]
			if len(p) >= 5 {
				h.sof = true
				h.height = int(binary.BigEndian.Uint16(p[1:3]))
				h.width = int(binary.BigEndian.Uint16(p[3:5]))
			}
			return h, nil
		}
		if marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc {
			return h, nil // another SOF: image/jpeg refuses it
		}
	}
}

// exifOrientation reads the Orientation tag (0x0112) from IFD0 of a TIFF
// structure (an EXIF APP1 payload after "Exif\0\0"), either byte order.
// Anything malformed or out of range gives 1 (as stored).
func exifOrientation(tiff []byte) int {
	if len(tiff) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(tiff[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 1
	}
	if bo.Uint16(tiff[2:4]) != 42 {
		return 1
	}
	ifd := uint64(bo.Uint32(tiff[4:8]))
	if ifd+2 > uint64(len(tiff)) {
		return 1
	}
	count := uint64(bo.Uint16(tiff[ifd:]))
	for i := uint64(0); i < count; i++ {
		e := ifd + 2 + 12*i
		if e+12 > uint64(len(tiff)) {
			return 1
		}
		entry := tiff[e : e+12]
		if bo.Uint16(entry[0:2]) != 0x0112 {
			continue
		}
		typ, n := bo.Uint16(entry[2:4]), bo.Uint32(entry[4:8])
		var v uint16
		switch {
		case typ == 3 && n >= 1: // SHORT, stored in the entry
			v = bo.Uint16(entry[8:10])
		case typ == 4 && n >= 1: // LONG, seen from sloppy writers
			v = uint16(min(bo.Uint32(entry[8:12]), 0xffff))
		default:
			return 1
		}
		if v >= 1 && v <= 8 {
			return int(v)
		}
		return 1
	}
	return 1
}

// orient returns img turned upright for EXIF orientation o, as PIL's
// ImageOps.exif_transpose (which transformers' load_image applies) does:
// the pixels converted to RGB as PIL decodes them (libjpeg's upsampling),
// then flipped and/or rotated into a new *image.NRGBA (*image.Gray for gray
// images). Orientation 1 returns img unchanged.
func orient(img image.Image, o int) image.Image {
	if o < 2 || o > 8 {
		return img
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return img
	}
	dw, dh := w, h
	if o >= 5 { // 5-8 swap the axes
		dw, dh = h, w
	}
	var src rowSource
	src.reset(img)
	bpp := src.bytesPerPixel()
	var pix []byte
	var stride int
	var out image.Image
	if bpp == 1 {
		g := image.NewGray(image.Rect(0, 0, dw, dh))
		pix, stride, out = g.Pix, g.Stride, g
	} else {
		n := image.NewNRGBA(image.Rect(0, 0, dw, dh))
		pix, stride, out = n.Pix, n.Stride, n
	}
	buf := make([]byte, w*4)
	for y := 0; y < h; y++ {
		row := src.row(y, buf)
		for x := 0; x < w; x++ {
			var dx, dy int
			switch o {
			case 2: // mirrored horizontally
				dx, dy = w-1-x, y
			case 3: // rotated 180
				dx, dy = w-1-x, h-1-y
			case 4: // mirrored vertically
				dx, dy = x, h-1-y
			case 5: // transposed
				dx, dy = y, x
			case 6: // needs a quarter turn clockwise
				dx, dy = h-1-y, x
			case 7: // transversed
				dx, dy = h-1-y, w-1-x
			case 8: // needs a quarter turn counter-clockwise
				dx, dy = y, w-1-x
			}
			if bpp == 1 {
				pix[dy*stride+dx] = row[x]
				continue
			}
			d := pix[dy*stride+4*dx : dy*stride+4*dx+4 : dy*stride+4*dx+4]
			d[0], d[1], d[2], d[3] = row[4*x], row[4*x+1], row[4*x+2], 0xff
		}
	}
	return out
}
