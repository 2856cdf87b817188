package preprocess

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestDecodeRejectsOtherFormats(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"gif", "GIF89a\x01\x00\x01\x00", "looks like GIF"},
		{"text", "hello world", `"hello wo"`},
		{"empty", "", "empty input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), "not a PNG or JPEG") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := Decode(strings.NewReader("\x89PNG\r\n\x1a\ntruncated")); err == nil || !strings.Contains(err.Error(), "decode PNG") {
		t.Fatalf("truncated PNG: %v", err)
	}
	if _, err := DecodeFile("testdata/does-not-exist.png"); err == nil {
		t.Fatal("missing file decoded")
	}
}

func TestFromRaw(t *testing.T) {
	rgb := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12} // 2x2
	img, err := FromRaw(rgb, 2, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.At(1, 1); got != (color.NRGBA{10, 11, 12, 255}) {
		t.Fatalf("pixel (1,1) = %v", got)
	}
	if got := img.At(2, 0); got != (color.NRGBA{}) {
		t.Fatalf("pixel (2,0), outside, = %v", got)
	}
	// The image reads the caller's bytes: nothing was copied.
	rgb[9] = 99
	if got := img.At(1, 1); got != (color.NRGBA{99, 11, 12, 255}) {
		t.Fatalf("pixel (1,1) after a change = %v", got)
	}
	rgba := []byte{1, 2, 3, 0, 5, 6, 7, 128}
	img, err = FromRaw(rgba, 1, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.(*image.NRGBA).NRGBAAt(0, 0); got != (color.NRGBA{1, 2, 3, 0}) {
		t.Fatalf("pixel (0,0) = %v", got)
	}
	// Transparent pixels keep their colour through the resize (no premultiply).
	if got := ResizeBicubic(img, 2, 1).NRGBAAt(0, 0); got != (color.NRGBA{1, 2, 3, 255}) {
		t.Fatalf("resized transparent pixel = %v", got)
	}
	// One channel is grey, read as the same image with three.
	grey, err := FromRaw([]byte{0, 64, 128, 255}, 2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	asRGB, _ := FromRaw([]byte{0, 0, 0, 64, 64, 64, 128, 128, 128, 255, 255, 255}, 2, 2, 3)
	if g, c := ResizeBicubic(grey, 3, 5), ResizeBicubic(asRGB, 3, 5); !bytes.Equal(g.Pix, c.Pix) {
		t.Fatalf("grey resized %v, as RGB %v", g.Pix, c.Pix)
	}
	for _, bad := range []struct {
		pix        []byte
		h, w, c    int
		wantSubstr string
	}{
		{rgb, 2, 2, 4, "bytes"},
		{rgb, 1 << 32, 1 << 32, 3, "overflows"},
		{rgb, 2, 2, 2, "channels"},
		{rgb, 0, 2, 3, "positive"},
		{rgb[:11], 2, 2, 3, "11 bytes"},
	} {
		if _, err := FromRaw(bad.pix, bad.h, bad.w, bad.c); err == nil || !strings.Contains(err.Error(), bad.wantSubstr) {
			t.Errorf("FromRaw(%d bytes, %d, %d, %d) error %v, want %q", len(bad.pix), bad.h, bad.w, bad.c, err, bad.wantSubstr)
		}
	}
}

// The same picture in different Go image types must give the same tensor.
func TestImageTypesAgree(t *testing.T) {
	base := decodeTestdata(t, "rgb_333x517.png")
	cfg := DefaultConfig()
	want := cfg.Pixels(base)
	b := base.Bounds()

	nrgba := image.NewNRGBA(b)
	rgba := image.NewRGBA(b)
	generic := image.NewRGBA64(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(base.At(x, y)).(color.NRGBA)
			nrgba.SetNRGBA(x, y, c)
			rgba.Set(x, y, c)
			generic.Set(x, y, c)
		}
	}
	// A sub-image with an offset origin reads the right pixels.
	big := image.NewNRGBA(image.Rect(-7, -3, b.Dx()+10, b.Dy()+5))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			big.SetNRGBA(x-5, y-2, nrgba.NRGBAAt(x, y))
		}
	}
	sub := big.SubImage(image.Rect(-5, -2, b.Dx()-5, b.Dy()-2))
	// AITW's raw layout, 3 bytes per pixel, at an offset origin too.
	raw := &RGB{Pix: make([]byte, 3*b.Dx()*b.Dy()), Stride: 3 * b.Dx(), Rect: b.Add(image.Pt(4, -9))}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := nrgba.NRGBAAt(x, y)
			i := raw.PixOffset(x+4, y-9)
			raw.Pix[i], raw.Pix[i+1], raw.Pix[i+2] = c.R, c.G, c.B
		}
	}
	for name, img := range map[string]image.Image{"NRGBA": nrgba, "RGBA": rgba, "RGBA64": generic, "SubImage": sub, "RGB": raw} {
		if d := maxDiff(cfg.Pixels(img), want); d != 0 {
			t.Errorf("%s: max diff %g", name, d)
		}
	}
}

// Go's RGBA is premultiplied: translucent pixels are un-premultiplied first,
// matching the straight colour PIL would have kept.
func TestPremultipliedRGBA(t *testing.T) {
	n := image.NewNRGBA(image.Rect(0, 0, 3, 1))
	n.SetNRGBA(0, 0, color.NRGBA{200, 100, 50, 255})
	n.SetNRGBA(1, 0, color.NRGBA{200, 100, 50, 128})
	n.SetNRGBA(2, 0, color.NRGBA{10, 20, 30, 0})
	p := image.NewRGBA(n.Bounds())
	for x := 0; x < 3; x++ {
		p.Set(x, 0, n.At(x, 0))
	}
	got := ResizeBicubic(p, 3, 1)
	if c := got.NRGBAAt(0, 0); c != (color.NRGBA{200, 100, 50, 255}) {
		t.Errorf("opaque pixel = %v", c)
	}
	if c := got.NRGBAAt(1, 0); absInt(int(c.R)-200) > 1 || absInt(int(c.G)-100) > 1 || absInt(int(c.B)-50) > 1 {
		t.Errorf("translucent pixel = %v, want about {200 100 50}", c)
	}
	// A premultiplied pixel with alpha 0 has no colour left to recover.
	if c := got.NRGBAAt(2, 0); c != (color.NRGBA{0, 0, 0, 255}) {
		t.Errorf("transparent pixel = %v", c)
	}
}

func TestGray16Saturates(t *testing.T) {
	// PIL opens 16-bit gray PNGs as I;16 and convert("RGB") clips at 255.
	g := image.NewGray16(image.Rect(0, 0, 4, 1))
	for x, v := range []uint16{0, 200, 256, 65535} {
		g.SetGray16(x, 0, color.Gray16{v})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, g); err != nil {
		t.Fatal(err)
	}
	img, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := ResizeBicubic(img, 4, 1)
	for x, w := range []uint8{0, 200, 255, 255} {
		if c := got.NRGBAAt(x, 0); c.R != w || c.G != w || c.B != w {
			t.Errorf("pixel %d = %v, want gray %d", x, c, w)
		}
	}
}

func TestSameSizeIsCopy(t *testing.T) {
	img := decodeTestdata(t, "small_100x60.png")
	got := ResizeBicubic(img, 100, 60)
	for y := 0; y < 60; y++ {
		for x := 0; x < 100; x++ {
			w := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			w.A = 255
			if c := got.NRGBAAt(x, y); c != w {
				t.Fatalf("(%d,%d) = %v, want %v", x, y, c, w)
			}
		}
	}
}

func TestPixelsErrors(t *testing.T) {
	cfg := DefaultConfig()
	img := image.NewNRGBA(image.Rect(0, 0, 4, 4))
	if err := cfg.PixelsInto(make([]float32, 10), img); err == nil || !strings.Contains(err.Error(), "destination") {
		t.Errorf("short dst: %v", err)
	}
	if err := cfg.PixelsInto(make([]float32, cfg.Len()), image.NewNRGBA(image.Rect(0, 0, 0, 5))); err == nil {
		t.Error("empty image accepted")
	}
	bad := cfg
	bad.Width = 0
	if err := bad.PixelsInto(nil, img); err == nil {
		t.Error("zero width accepted")
	}
	bad = cfg
	bad.Std[1] = 0
	if err := bad.PixelsInto(make([]float32, cfg.Len()), img); err == nil {
		t.Error("zero std accepted")
	}
}

// Tiny and extreme aspect ratios: no panic, right size, constant images stay
// constant.
func TestResizeShapes(t *testing.T) {
	for _, sz := range [][4]int{{1, 1, 224, 224}, {1, 2400, 224, 224}, {3, 1, 1, 1}, {224, 224, 1, 1}, {5, 7, 3, 300}} {
		src := image.NewNRGBA(image.Rect(0, 0, sz[0], sz[1]))
		for i := 0; i < len(src.Pix); i += 4 {
			copy(src.Pix[i:], []byte{12, 130, 250, 77})
		}
		got := ResizeBicubic(src, sz[2], sz[3])
		if got.Bounds().Dx() != sz[2] || got.Bounds().Dy() != sz[3] {
			t.Fatalf("%v: bounds %v", sz, got.Bounds())
		}
		for i := 0; i < len(got.Pix); i += 4 {
			if !bytes.Equal(got.Pix[i:i+4], []byte{12, 130, 250, 255}) {
				t.Fatalf("%v: pixel %d = %v", sz, i/4, got.Pix[i:i+4])
			}
		}
	}
}

// The rescale factor is applied the way transformers does: x * (1/255) in
// float64, rounded to float32 — not x * float32(1/255).
func TestNormalizationRounding(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.rescale64() != 1.0/255 {
		t.Fatalf("rescale64 = %v", cfg.rescale64())
	}
	cfg.RescaleFactor = 0.5
	if cfg.rescale64() != 0.5 {
		t.Fatalf("rescale64(0.5) = %v", cfg.rescale64())
	}
	cfg.RescaleFactor = 0.003
	if cfg.rescale64() != float64(float32(0.003)) {
		t.Fatalf("rescale64(0.003) = %v", cfg.rescale64())
	}
}

func TestPixelsIntoDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	img := decodeTestdata(t, "rgb_333x517.png")
	cfg := DefaultConfig()
	dst := make([]float32, cfg.Len())
	if err := cfg.PixelsInto(dst, img); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(5, func() { _ = cfg.PixelsInto(dst, img) }); n != 0 {
		t.Fatalf("PixelsInto allocates %v times per call", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	cfg := DefaultConfig()
	imgs := []image.Image{decodeTestdata(t, "rgb_333x517.png"), decodeTestdata(t, "gray_160x300.png"), decodeTestdata(t, "photo_400x300.jpg")}
	want := make([][]float32, len(imgs))
	for i, img := range imgs {
		want[i] = cfg.Pixels(img)
	}
	done := make(chan error)
	for w := 0; w < 4; w++ {
		go func() {
			var err error
			for i := 0; i < 6; i++ {
				k := (i + w) % len(imgs)
				if d := maxDiff(cfg.Pixels(imgs[k]), want[k]); d != 0 {
					err = errDiff
				}
			}
			done <- err
		}()
	}
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

var errDiff = errorString("concurrent result differs")

type errorString string

func (e errorString) Error() string { return string(e) }

func FuzzDecodePixels(f *testing.F) {
	var buf bytes.Buffer
	small := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	small.Pix[3] = 9
	_ = png.Encode(&buf, small)
	f.Add(buf.Bytes())
	f.Add([]byte("\xff\xd8\xff\xe0garbage"))
	f.Add([]byte("GIF89a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgImg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err == nil && cfgImg.Width*cfgImg.Height > 1<<20 {
			return // keep the fuzzer off huge allocations
		}
		img, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		if b := img.Bounds(); b.Dx() == 0 || b.Dy() == 0 {
			return
		}
		cfg := DefaultConfig()
		cfg.Height, cfg.Width = 5, 7
		px := cfg.Pixels(img)
		for _, v := range px {
			if math.IsNaN(float64(v)) || v < -2 || v > 3 {
				t.Fatalf("value %v out of range", v)
			}
		}
	})
}

func maxDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > m {
			m = d
		}
	}
	return m
}

func absInt(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// Bands of rows on separate cores must give the serial result bit for bit,
// for every band count, including counts that leave uneven or odd bands.
func TestParallelResizeMatchesSerial(t *testing.T) {
	for _, name := range []string{"phone_1080x2400.png", "rgb_333x517.png"} {
		img := decodeTestdata(t, name)
		for _, size := range [][2]int{{224, 224}, {448, 448}, {224, 517}} {
			serial := &scratch{forceWorkers: 1}
			want, _, err := serial.resize(img, size[0], size[1])
			if err != nil {
				t.Fatal(err)
			}
			for n := 2; n <= 5; n++ {
				par := &scratch{forceWorkers: n}
				got, _, err := par.resize(img, size[0], size[1])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s -> %v with %d bands differs from the serial resize", name, size, n)
				}
			}
		}
	}
}

// A raw RGB screen (AITW's layout) resizes to the same bytes as the same
// pixels in an NRGBA image, at every width: its rows are widened four
// pixels at a time, the rest one by one.
func TestRawRGBResizesAsNRGBA(t *testing.T) {
	x := uint32(7)
	for _, w := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 64, 67} {
		h := 5 + w%3
		rgb := make([]byte, w*h*3)
		nrgba := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := range w * h {
			for c := range 3 {
				x = x*1664525 + 1013904223
				rgb[3*i+c] = byte(x >> 24)
				nrgba.Pix[4*i+c] = byte(x >> 24)
			}
			nrgba.Pix[4*i+3] = 255
		}
		img, err := FromRaw(rgb, h, w, 3)
		if err != nil {
			t.Fatal(err)
		}
		// and the inner part of each, with its origin at (1, 1) and a
		// stride past its width
		r := image.Rect(1, 1, w, h)
		inner := &RGB{Pix: rgb[3*w+3:], Stride: 3 * w, Rect: r}
		for _, out := range [][2]int{{3, 2}, {w, h}, {2 * w, 3}} {
			got, want := ResizeBicubic(img, out[0], out[1]), ResizeBicubic(nrgba, out[0], out[1])
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Fatalf("width %d to %dx%d: raw RGB resized to %v, NRGBA to %v", w, out[0], out[1], got.Pix, want.Pix)
			}
			if r.Empty() {
				continue
			}
			got, want = ResizeBicubic(inner, out[0], out[1]), ResizeBicubic(nrgba.SubImage(r), out[0], out[1])
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Fatalf("width %d, inner %v, to %dx%d: raw RGB resized to %v, NRGBA to %v", w, r, out[0], out[1], got.Pix, want.Pix)
			}
		}
	}
}
