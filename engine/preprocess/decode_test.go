package preprocess

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/autoui/autoui/engine/preprocess/imagetest"
)

func hostilePNG(w, h uint32) []byte { return imagetest.HostilePNG(w, h, 64<<10) }

// markedImage is w x h white with a red 8x8 block at the top-left, so the
// block survives JPEG's 8x8 DCT and says where the stored corner went.
func markedImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{255, 255, 255, 255}
			if x < 8 && y < 8 {
				c = color.NRGBA{255, 0, 0, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// exifSegment is an APP1 Exif segment whose IFD0 holds a Make tag and then
// the Orientation tag, in the given byte order.
func exifSegment(orientation uint16, bo binary.AppendByteOrder) []byte {
	var tiff []byte
	if bo == binary.LittleEndian {
		tiff = append(tiff, "II"...)
	} else {
		tiff = append(tiff, "MM"...)
	}
	tiff = bo.AppendUint16(tiff, 42)
	tiff = bo.AppendUint32(tiff, 8) // IFD0 right after the header
	tiff = bo.AppendUint16(tiff, 2)
	// Make, ASCII, 4 bytes stored in the entry: "Go\0\0".
	tiff = bo.AppendUint16(tiff, 0x010f)
	tiff = bo.AppendUint16(tiff, 2)
	tiff = bo.AppendUint32(tiff, 4)
	tiff = append(tiff, 'G', 'o', 0, 0)
	// Orientation, SHORT, 1 value, left-justified in the 4-byte field.
	tiff = bo.AppendUint16(tiff, 0x0112)
	tiff = bo.AppendUint16(tiff, 3)
	tiff = bo.AppendUint32(tiff, 1)
	tiff = bo.AppendUint16(tiff, orientation)
	tiff = bo.AppendUint16(tiff, 0)
	tiff = bo.AppendUint32(tiff, 0) // no IFD1
	payload := append([]byte("Exif\x00\x00"), tiff...)
	seg := []byte{0xff, 0xe1}
	seg = binary.BigEndian.AppendUint16(seg, uint16(len(payload)+2))
	return append(seg, payload...)
}

// withSegment splices a segment in right after a JPEG's SOI.
func withSegment(jpg, seg []byte) []byte {
	out := append([]byte(nil), jpg[:2]...)
	out = append(out, seg...)
	return append(out, jpg[2:]...)
}

// withJPEGSize rewrites the size in a JPEG's SOF0 header.
func withJPEGSize(t testing.TB, jpg []byte, w, h uint16) []byte {
	t.Helper()
	out := append([]byte(nil), jpg...)
	i := bytes.Index(out, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0 in the encoded JPEG")
	}
	binary.BigEndian.PutUint16(out[i+5:], h)
	binary.BigEndian.PutUint16(out[i+7:], w)
	return out
}

// allocated is the bytes f allocates (the most of three runs, so a GC
// cycle in between cannot hide anything).
func allocated(f func()) uint64 {
	var most uint64
	for range 3 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		most = max(most, b.TotalAlloc-a.TotalAlloc)
	}
	return most
}

func TestDecodeRefusesHostileHeadersWithoutAllocating(t *testing.T) {
	small := encodeJPEG(t, markedImage(32, 16))
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"png 200000x200000", "PNG header says 200000x200000", hostilePNG(200000, 200000)},
		{"png 20000x20000", "PNG header says 20000x20000", hostilePNG(20000, 20000)},
		{"png 2^32-1 square", "4294967295x4294967295", hostilePNG(1<<32-1, 1<<32-1)},
		{"jpeg 65535x65535", "JPEG header says 65535x65535", withJPEGSize(t, small, 65535, 65535)},
		{"jpeg with exif 65535x65535", "JPEG header says 65535x65535",
			withJPEGSize(t, withSegment(small, exifSegment(6, binary.BigEndian)), 65535, 65535)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Decode(bytes.NewReader(c.data)) })
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, "limit of 40000000") ||
				!strings.Contains(msg, "--max-pixels") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming the size (%s), the cap and --max-pixels", msg, c.want)
			}
			if n > 10<<20 {
				t.Errorf("refusing allocated %d bytes, want < 10 MB", n)
			}
			t.Logf("%d-byte input refused after allocating %d bytes: %v", len(c.data), n, err)
		})
	}
	if n := len(hostilePNG(200000, 200000)); n > 1000 {
		t.Errorf("hostile PNG is %d bytes; the point is that it is tiny", n)
	}
}

// A side over MaxSide is refused from the header however few the pixels:
// a 40-megapixel single-row PNG within the pixel cap took 1.5 GB to decode
// and resize.
func TestDecodeRefusesALongSide(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want string
	}{
		{hostilePNG(40_000_000, 1), "PNG header says 40000000x1: a side over 65535 pixels"},
		{hostilePNG(1, 65536), "PNG header says 1x65536: a side over 65535 pixels"},
	} {
		var err error
		n := allocated(func() { _, err = Decode(bytes.NewReader(c.data)) })
		if !errors.Is(err, ErrTooLarge) || err.Error() != c.want || n > 10<<20 {
			t.Errorf("got %v after allocating %d bytes, want %q", err, n, c.want)
		}
	}
	// at the limit: a PNG of 65535x1 decodes
	if _, err := Decode(bytes.NewReader(encodePNG(t, markedImage(MaxSide, 1)))); err != nil {
		t.Errorf("65535x1: %v", err)
	}
	// a raw AITW screen the same, and the resampler behind both
	if _, err := FromRaw(make([]byte, 3*(MaxSide+1)), 1, MaxSide+1, 3); err == nil || !strings.Contains(err.Error(), "a side over 65535") {
		t.Errorf("raw 65536x1: %v", err)
	}
	wide := &RGB{Pix: make([]byte, 3*(MaxSide+1)), Stride: 3 * (MaxSide + 1), Rect: image.Rect(0, 0, MaxSide+1, 1)}
	if err := DefaultConfig().PixelsInto(make([]float32, DefaultConfig().Len()), wide); err == nil || !strings.Contains(err.Error(), "a side over 65535") {
		t.Errorf("resizing 65536x1: %v", err)
	}
}

func TestDecodeCapOptions(t *testing.T) {
	pngData := encodePNG(t, markedImage(40, 30)) // 1200 pixels
	jpgData := encodeJPEG(t, markedImage(40, 30))
	for name, data := range map[string][]byte{"png": pngData, "jpeg": jpgData} {
		if _, err := Decode(bytes.NewReader(data)); err != nil {
			t.Errorf("%s default cap: %v", name, err)
		}
		if _, err := DecodeWith(bytes.NewReader(data), DecodeOptions{MaxPixels: 1200}); err != nil {
			t.Errorf("%s at the cap: %v", name, err)
		}
		_, err := DecodeWith(bytes.NewReader(data), DecodeOptions{MaxPixels: 1199})
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Width != 40 || tl.Height != 30 || tl.MaxPixels != 1199 {
			t.Errorf("%s over the cap: %v", name, err)
		}
		// The user's words: the flag, not a Go field name (issue 22).
		if msg := err.Error(); !strings.Contains(msg, "over the --max-pixels limit of 1199") || strings.Contains(msg, "DecodeOptions") {
			t.Errorf("%s over the cap: %q", name, msg)
		}
	}
	// Under the cap, the hostile PNG is decoded and fails on its missing
	// data, not on its size.
	_, err := DecodeWith(bytes.NewReader(hostilePNG(2000, 2000)), DecodeOptions{MaxPixels: 4_000_000})
	if err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("2000x2000 under a 4 Mpx cap: err = %v, want a data error", err)
	}
}

func TestDecodeFileWith(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/big.png"
	if err := os.WriteFile(path, hostilePNG(1000, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := DecodeFile(path)
	if err == nil || errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("DecodeFile, default cap: %v, want a data error", err)
	}
	_, err = DecodeFileWith(path, DecodeOptions{MaxPixels: 999_999})
	if !errors.Is(err, ErrTooLarge) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("DecodeFileWith, 999999 pixels: %v", err)
	}
}

func TestDecodeEXIFOrientation(t *testing.T) {
	const w, h = 32, 16
	base := encodeJPEG(t, markedImage(w, h))
	// Where the stored top-left block must appear, and the upright size.
	want := []struct {
		right, bottom bool
		portrait      bool
	}{
		1: {false, false, false},
		2: {true, false, false}, // mirrored
		3: {true, true, false},  // 180
		4: {false, true, false}, // flipped
		5: {false, false, true}, // transposed
		6: {true, false, true},  // 90 clockwise
		7: {true, true, true},   // transversed
		8: {false, true, true},  // 90 counter-clockwise
	}
	for o := 1; o <= 8; o++ {
		for _, bo := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
			data := withSegment(base, exifSegment(uint16(o), bo))
			img, err := Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("orientation %d (%v): %v", o, bo, err)
			}
			b := img.Bounds()
			dw, dh := w, h
			if want[o].portrait {
				dw, dh = h, w
			}
			if b.Dx() != dw || b.Dy() != dh {
				t.Errorf("orientation %d (%v): %dx%d, want %dx%d", o, bo, b.Dx(), b.Dy(), dw, dh)
				continue
			}
			// Sample the centre of each 8x8 corner block.
			for _, corner := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				x, y := b.Min.X+4, b.Min.Y+4
				if corner[0] {
					x = b.Max.X - 4
				}
				if corner[1] {
					y = b.Max.Y - 4
				}
				r, g, _, _ := img.At(x, y).RGBA()
				isRed := r>>8 > 200 && g>>8 < 60
				marked := corner[0] == want[o].right && corner[1] == want[o].bottom
				if isRed != marked {
					t.Errorf("orientation %d (%v): corner right=%v bottom=%v red=%v, want %v", o, bo, corner[0], corner[1], isRed, marked)
				}
			}
			if o == 1 {
				if _, ok := img.(*image.YCbCr); !ok {
					t.Errorf("orientation 1 should keep the decoder's %T, got %T", &image.YCbCr{}, img)
				}
			}
		}
	}
}

// Turning the image upright moves PIL-equivalent RGB pixels: rotating a
// JPEG four quarter turns (orientation 6 applied to the result thrice more)
// gives back exactly the pixels preprocessing reads from the original.
func TestOrientKeepsPixelsExact(t *testing.T) {
	src, err := jpeg.Decode(bytes.NewReader(encodeJPEG(t, noisyImage(37, 23))))
	if err != nil {
		t.Fatal(err)
	}
	img := orient(src, 6)
	for range 3 {
		img = orient(img, 6)
	}
	var rs rowSource
	rs.reset(src)
	got := img.(*image.NRGBA)
	buf := make([]byte, 4*37)
	for y := 0; y < 23; y++ {
		row := rs.row(y, buf)
		for x := 0; x < 37; x++ {
			p := got.Pix[got.PixOffset(x, y):]
			if p[0] != row[4*x] || p[1] != row[4*x+1] || p[2] != row[4*x+2] || p[3] != 0xff {
				t.Fatalf("pixel %d,%d = %v, want %v", x, y, p[:4], row[4*x:4*x+3])
			}
		}
	}
	// Gray stays gray.
	g := image.NewGray(image.Rect(0, 0, 3, 2))
	copy(g.Pix, []byte{1, 2, 3, 4, 5, 6})
	o := orient(g, 8).(*image.Gray)
	if o.Rect.Dx() != 2 || o.Rect.Dy() != 3 || !bytes.Equal(o.Pix, []byte{3, 6, 2, 5, 1, 4}) {
		t.Errorf("gray orientation 8: %v %v", o.Rect, o.Pix)
	}
}

func noisyImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	s := uint32(1)
	for i := range img.Pix {
		s = s*1664525 + 1013904223
		img.Pix[i] = byte(s >> 24)
		if i%4 == 3 {
			img.Pix[i] = 0xff
		}
	}
	return img
}

func TestExifOrientationMalformed(t *testing.T) {
	good := exifSegment(6, binary.BigEndian)[10:] // the TIFF structure
	if o := exifOrientation(good); o != 6 {
		t.Fatalf("well-formed: %d", o)
	}
	for n := 0; n < len(good); n++ {
		if o := exifOrientation(good[:n]); o != 1 && o != 6 {
			t.Errorf("truncated to %d: %d", n, o)
		}
	}
	bad := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(bad[len(bad)-8:], 9) // out of range
	if o := exifOrientation(bad); o != 1 {
		t.Errorf("orientation 9: %d, want 1", o)
	}
	huge := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(huge[4:], 0xfffffff0) // IFD far past the end
	if o := exifOrientation(huge); o != 1 {
		t.Errorf("IFD offset past the end: %d", o)
	}
}

// Segments image/jpeg ignores are dropped from the replay, the ones it
// reads are kept, and a flood of tables is refused.
func TestScanJPEGBoundsMetadata(t *testing.T) {
	base := encodeJPEG(t, markedImage(16, 16))
	com := []byte{0xff, 0xfe, 0xff, 0xff}
	com = append(com, make([]byte, 0xfffd)...)
	data := base[:2]
	for range 100 { // 6.5 MB of comments
		data = append(data, com...)
	}
	data = append(data, base[2:]...)
	var err error
	n := allocated(func() { _, err = Decode(bytes.NewReader(data)) })
	if err != nil {
		t.Fatal(err)
	}
	if n > 2<<20 {
		t.Errorf("6.5 MB of comments cost %d bytes", n)
	}
	dqt := []byte{0xff, 0xdb, 0xff, 0xff}
	dqt = append(dqt, make([]byte, 0xfffd)...)
	flood := base[:2]
	for range 20 {
		flood = append(flood, dqt...)
	}
	flood = append(flood, base[2:]...)
	if _, err := Decode(bytes.NewReader(flood)); err == nil || !strings.Contains(err.Error(), "tables") {
		t.Errorf("1.3 MB of tables: %v", err)
	}
}
