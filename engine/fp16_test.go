package engine

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// fp16Dir holds the half-precision variants of the tiny bundle that `make
// testdata-fp16` writes (make test does): tiny-fp16, fp16 everywhere with
// float32 graph IO (scripts.half --roles all, no op type kept fp32), and
// tiny-fp16cache, the same with the decoder graphs' K/V float16 too
// (--fp16-cache).
const fp16Dir = "../build/testdata"

// fp16Twins opens the two variants with opts, their caches placed at place.
func fp16Twins(t *testing.T, place placement, opts Options) (io32, io16 *Predictor) {
	t.Helper()
	var ps [2]*Predictor
	for i, name := range []string{"tiny-fp16", "tiny-fp16cache"} {
		dir := filepath.Join(fp16Dir, name)
		if _, err := os.Stat(dir); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%v: make testdata-fp16 writes it", err)
			}
			t.Skipf("%v: make testdata-fp16 writes it", err)
		}
		b, err := models.Load(dir, models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Truncation, opts.CUDAGraph = TruncateRight, place == placeStatic
		p, err := NewPredictor(b, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if i == 1 && !opts.CUDAGraph && p.cachePlace != placeDevice {
			t.Errorf("float16 cache on the cpu provider placed at %d, want the device path", p.cachePlace)
		}
		p.cachePlace = place
		ps[i] = p
	}
	return ps[0], ps[1]
}

// A float16 cache changes where the values cross the graphs' boundary, not
// the values: the twins give the same outputs in batches of 1 and 3 (rows
// leaving the batch: the gather graph in float16), on the device-resident
// cache and the static one; on the host path's float32 buffers it is
// refused, and on the cpu provider's default placement it stays where ORT
// computes it (fp16Twins checks). A continuous decode too gives the same.
func TestFP16Cache(t *testing.T) {
	cases := loadGolden(t)[:12]
	var reqs []predict.Request
	for _, c := range cases {
		reqs = append(reqs, c.featureRequest(t))
	}
	for _, place := range []placement{placeDevice, placeStatic} {
		io32, io16 := fp16Twins(t, place, Options{})
		if io32.cacheElem != kv.Float32 || io16.cacheElem != kv.Float16 {
			t.Fatalf("cache types %s and %s", io32.cacheElem, io16.cacheElem)
		}
		for _, size := range []int{1, 3} {
			for lo := 0; lo < len(reqs); lo += size {
				batch := reqs[lo:min(lo+size, len(reqs))]
				want, err := io32.PredictBatch(context.Background(), batch)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io16.PredictBatch(context.Background(), batch)
				if err != nil {
					t.Fatalf("place %d size %d: %v", place, size, err)
				}
				for j := range got {
					if d := sameResult(got[j], want[j]); d != "" {
						t.Errorf("place %d size %d %s: %s differ with a float16 cache", place, size, cases[lo+j].ID, d)
					}
				}
			}
		}
	}
	// a continuous decode (cross K/V scattered and adopted in float16)
	io32, io16 := fp16Twins(t, placeStatic, Options{})
	want, err := io32.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	var moves streamMoves
	io16.adoptHook = moves.record
	f := newStreamFeed(reqs, 1, 2)
	if err := io16.Stream(context.Background(), 3, f.ask); err != nil {
		t.Fatal(err)
	}
	if moves.count(func(from, to staticKey) bool { return to.enc > from.enc }) == 0 {
		t.Error("stream: the buffers never grew with rows busy")
	}
	for i := range reqs {
		if f.errs[i] != nil {
			t.Fatalf("stream %s: %v", cases[i].ID, f.errs[i])
		}
		if d := sameResult(f.res[i], want[i]); d != "" {
			t.Errorf("stream %s: %s differ with a float16 cache", cases[i].ID, d)
		}
	}
	_, io16 = fp16Twins(t, placeHost, Options{})
	if _, err := io16.PredictBatch(context.Background(), reqs[:1]); err == nil || !strings.Contains(err.Error(), "whose buffers are float32") {
		t.Errorf("a float16 cache in the host path's buffers: %v", err)
	}
	// one cache type throughout
	m := io16.bundle.Manifest
	m.Files = maps.Clone(m.Files)
	spec := m.Files[models.RoleDecoderCross]
	spec.Outputs = slices.Clone(spec.Outputs) // not the live bundle's
	spec.Outputs[0].DType = "float32"
	m.Files[models.RoleDecoderCross] = spec
	if _, err := cacheElem(&m); err == nil {
		t.Error("a float32 cross K/V beside a float16 cache: no error")
	}
}
