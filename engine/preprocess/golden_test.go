package preprocess

import (
	"compress/gzip"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/npy"
)

// Tolerances against the Python goldens (scripts/preprocess_golden.py).
// PNG inputs decode identically in Go and PIL, so the resize is bit-exact and
// the normalized tensor identical. JPEG decoders differ (Go's IDCT and
// nearest-neighbour chroma upsampling vs libjpeg-turbo's fancy upsampling),
// so the JPEG case is held to the measured difference.
const (
	jpegMaxByteDiff   = 3                                            // measured: 3 of 255, on 5360 of 150528 values
	jpegMaxNormalized = jpegMaxByteDiff / 255. / 0.26130258 * 1.0001 // same in normalized units (smallest std)
)

type goldenCase struct {
	Name        string `json:"name"`
	Input       string `json:"input"`
	Format      string `json:"format"`
	Mode        string `json:"mode"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	Resized     string `json:"resized"`
	PixelValues string `json:"pixel_values"`
}

type goldenIndex struct {
	Size          [2]int       `json:"size"`
	RescaleFactor float64      `json:"rescale_factor"`
	Mean          [3]float32   `json:"mean"`
	Std           [3]float32   `json:"std"`
	Cases         []goldenCase `json:"cases"`
}

func loadIndex(t testing.TB) goldenIndex {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatalf("golden index (regenerate with python -m scripts.preprocess_golden): %v", err)
	}
	var idx goldenIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("parse cases.json: %v", err)
	}
	if len(idx.Cases) == 0 {
		t.Fatal("cases.json lists no cases")
	}
	return idx
}

func decodeTestdata(t testing.TB, name string) image.Image {
	t.Helper()
	img, err := DecodeFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// readNPYGz reads a gzipped little-endian float32 3-D .npy file.
func readNPYGz(t testing.TB, name string) ([]float32, [3]int) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, shape, err := npy.Read(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(shape) != 3 {
		t.Fatalf("%s: shape %v, want 3-D", name, shape)
	}
	return v, [3]int{shape[0], shape[1], shape[2]}
}

func goldenConfig(idx goldenIndex) Config {
	return Config{Height: idx.Size[0], Width: idx.Size[1], RescaleFactor: float32(idx.RescaleFactor), Mean: idx.Mean, Std: idx.Std}
}

func TestGoldenConfigIsDefault(t *testing.T) {
	if got := goldenConfig(loadIndex(t)); got != DefaultConfig() {
		t.Fatalf("golden config %+v != DefaultConfig %+v", got, DefaultConfig())
	}
}

// TestGoldens compares the resize with PIL's (uint8) and the tensor with
// BlipImageProcessor's for every golden image.
func TestGoldens(t *testing.T) {
	idx := loadIndex(t)
	cfg := goldenConfig(idx)
	for _, c := range idx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			img := decodeTestdata(t, c.Input)
			if b := img.Bounds(); b.Dx() != c.Width || b.Dy() != c.Height {
				t.Fatalf("decoded %v, want %dx%d", b, c.Width, c.Height)
			}
			want := decodeTestdata(t, c.Resized)
			got := ResizeBicubic(img, cfg.Width, cfg.Height)
			maxByte, nDiff := compareRGB(t, got, want)

			pv, shape := readNPYGz(t, c.PixelValues)
			if shape != [3]int{3, cfg.Height, cfg.Width} {
				t.Fatalf("golden shape %v", shape)
			}
			px := cfg.Pixels(img)
			maxNorm, sumNorm := 0.0, 0.0
			for i := range pv {
				d := math.Abs(float64(px[i]) - float64(pv[i]))
				maxNorm = math.Max(maxNorm, d)
				sumNorm += d
			}
			t.Logf("%s (%s %s): resize max |diff| %d/255, %d of %d values differ; tensor max |diff| %.3g, mean %.2g",
				c.Name, c.Format, c.Mode, maxByte, nDiff, len(pv), maxNorm, sumNorm/float64(len(pv)))
			if c.Format == "jpg" {
				if maxByte > jpegMaxByteDiff || maxNorm > jpegMaxNormalized {
					t.Errorf("JPEG: resize diff %d > %d or tensor diff %g > %g", maxByte, jpegMaxByteDiff, maxNorm, jpegMaxNormalized)
				}
				return
			}
			if nDiff != 0 {
				t.Errorf("resize differs from PIL in %d values (max %d)", nDiff, maxByte)
			}
			if maxNorm != 0 {
				t.Errorf("tensor differs from BlipImageProcessor by up to %g", maxNorm)
			}
		})
	}
}

// compareRGB returns the largest channel difference and how many channel
// values differ between two same-sized images.
func compareRGB(t testing.TB, got *image.NRGBA, want image.Image) (maxDiff, n int) {
	t.Helper()
	if got.Bounds() != want.Bounds() {
		t.Fatalf("size %v, want %v", got.Bounds(), want.Bounds())
	}
	wantRGB := ResizeBicubic(want, want.Bounds().Dx(), want.Bounds().Dy()) // same size: plain RGB copy
	for i := 0; i < len(got.Pix); i += 4 {
		for k := 0; k < 3; k++ {
			d := int(got.Pix[i+k]) - int(wantRGB.Pix[i+k])
			if d < 0 {
				d = -d
			}
			if d != 0 {
				n++
			}
			if d > maxDiff {
				maxDiff = d
			}
		}
		if got.Pix[i+3] != 0xff {
			t.Fatalf("alpha %d at byte %d, want opaque", got.Pix[i+3], i)
		}
	}
	return maxDiff, n
}
