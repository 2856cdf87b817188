package probe

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
)

func initORT(t *testing.T) {
	t.Helper()
	if err := engine.InitRuntime(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ONNX Runtime: %v", err)
		}
		t.Skipf("ONNX Runtime not available: %v", err)
	}
}

// The generated MatMul graph loads in ONNX Runtime and computes the product
// (MeasureGEMM checks C[0,0] against Go).
func TestMeasureGEMMRunsGeneratedGraph(t *testing.T) {
	initORT(t)
	res, err := MeasureGEMM(GEMMShape{M: 8, K: 32, N: 16}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Best <= 0 || res.Median <= 0 || res.Median > res.Best {
		t.Fatalf("rates best=%v median=%v", res.Best, res.Median)
	}
}

func TestMeasureBandwidth(t *testing.T) {
	res := MeasureBandwidth(1<<20, 2, 3)
	if res.Bytes != 1<<20 || res.Best <= 0 || res.Median > res.Best {
		t.Fatalf("%+v", res)
	}
}

func TestSumWords(t *testing.T) {
	b := make([]uint64, 21)
	var want uint64
	for i := range b {
		b[i] = uint64(i * i)
		want += b[i]
	}
	if got := sumWords(b); got != want {
		t.Fatalf("sum %d, want %d", got, want)
	}
}

func TestBound(t *testing.T) {
	m := Machine{Bandwidth: 10e9, GEMM: 100e9}
	// 1 GB at 10 GB/s = 100 ms beats 1 GFLOP at 100 GFLOP/s = 10 ms
	if got := m.Bound(Cost{FLOPs: 1e9, Bytes: 1e9}); got.Milliseconds() != 100 {
		t.Fatalf("bandwidth-bound: %v", got)
	}
	if got := m.Bound(Cost{FLOPs: 1e11, Bytes: 1e6}); got.Milliseconds() != 1000 {
		t.Fatalf("compute-bound: %v", got)
	}
}

// T5-base's shapes give the textbook counts: ~85M encoder weights, a decode
// step reading ~124M weights (DESIGN §6: ~495 MB fp32).
func TestT5BaseCosts(t *testing.T) {
	s := Shapes{WeightBytes: 4, Model: models.ModelConfig{
		DModel: 768, DKV: 64, DFF: 2048, NumLayers: 12, NumDecoderLayers: 12, NumHeads: 12,
		VocabSize: 32128, FeedForwardProj: "gated-gelu", ImageDim: 1408,
	}}
	enc := s.Encoder(256)
	encParams := 12 * (4*768*768 + 3*768*2048.0)
	if enc.Bytes != 4*encParams {
		t.Fatalf("encoder bytes %v, want %v", enc.Bytes, 4*encParams)
	}
	wantFLOPs := 2*256*encParams + 12*4*256*256*768.0
	if math.Abs(enc.FLOPs-wantFLOPs) > 1 {
		t.Fatalf("encoder FLOPs %v, want %v", enc.FLOPs, wantFLOPs)
	}
	if g := enc.FLOPs / 1e9; g < 40 || g > 60 {
		t.Fatalf("encoder at 256 tokens: %.1f GFLOP, want ~46-56", g)
	}
	step := s.DecodeStep(10, 256)
	weights := 12*(6*768*768+3*768*2048.0) + 32128*768
	kv := 12 * 2 * 768 * (11 + 256) * 4.0
	if step.Bytes != 4*weights+kv {
		t.Fatalf("step bytes %v, want %v", step.Bytes, 4*weights+kv)
	}
	if mb := step.Bytes / 1e6; mb < 450 || mb > 560 {
		t.Fatalf("decode step reads %.0f MB, want ~500", mb)
	}
	first := s.DecodeStep(0, 256)
	if first.FLOPs <= step.FLOPs || first.Bytes <= 4*weights {
		t.Fatalf("first step should add the cross K/V projections: %+v vs %+v", first, step)
	}
	half := s
	half.CacheBytes = 2 // a float16 cache reads half the K/V bytes
	if got := half.DecodeStep(10, 256).Bytes; got != 4*weights+kv/2 {
		t.Fatalf("step bytes with a float16 cache %v, want %v", got, 4*weights+kv/2)
	}
	s.WeightBytes = 1
	if s.DecodeStep(10, 256).Bytes >= step.Bytes/3 {
		t.Fatal("int8 weights should read ~4x fewer bytes")
	}
}

// The ViT-g tower (~1B parameters, 257 tokens) costs ~0.5 TFLOP (DESIGN §6).
func TestViTgCost(t *testing.T) {
	s := Shapes{WeightBytes: 4, VisionParams: 985e6,
		Vision: models.VisionConfig{ImageSize: 224, PatchSize: 14, HiddenSize: 1408, NumLayers: 39}}
	if tf := s.Image().FLOPs / 1e12; tf < 0.45 || tf > 0.6 {
		t.Fatalf("ViT-g: %.2f TFLOP", tf)
	}
	// 38 layers x 2 products x 2 FLOP x 257^2 x 1408, and the last one's
	// CLS query: ~14.1 GFLOP of attention
	if g := s.Image().ActFLOPs / 1e9; g < 13.8 || g > 14.4 {
		t.Fatalf("ViT-g attention: %.1f GFLOP", g)
	}
	// The last layer for the CLS token alone, but for every token's keys and
	// values: 256 tokens x 2 FLOP x (985M/39 - 2 x 1408^2) fewer, ~2% of it.
	full := 2*985e6*257 + 39*2*2*257*257*1408.0
	if saved := (full - s.Image().FLOPs) / full; saved < 0.018 || saved > 0.024 {
		t.Fatalf("ViT-g: the CLS-only last layer saves %.3f of the tower's FLOPs", saved)
	}
	if (Shapes{}).Image() != (Cost{}) {
		t.Fatal("no vision config should cost nothing")
	}
	noLayers := s
	noLayers.Vision.NumLayers = 0
	if noLayers.Image() != (Cost{}) {
		t.Fatal("a tower of no layers should cost nothing")
	}
}

// A small tower (the default model's: 448-pixel screens in 32-pixel patches,
// 3 layers of 128) whose patch projection is a third of its parameters: the
// last layer's saving counts the layer's own parameters, not the embeddings'.
func TestSmallTowerLastLayer(t *testing.T) {
	const hd, ff, L, p, T = 128.0, 512.0, 3.0, 32.0, 197.0
	embed := 3*p*p*hd + hd + hd + T*hd + 2*hd
	layer := 4*hd*hd + 4*hd + 2*hd*ff + ff + hd + 4*hd // qkv, projection, MLP, two norms
	s := Shapes{WeightBytes: 4, VisionParams: embed + L*layer,
		Vision: models.VisionConfig{ImageSize: 448, PatchSize: 32, HiddenSize: hd, NumLayers: L}}
	attn := 2 * 2 * T * hd * ((L-1)*T + 1)
	want := 2*s.VisionParams*T - (T-1)*2*(layer-2*hd*hd) + attn
	if got := s.Image().FLOPs; math.Abs(got-want) > 1e-6*want {
		t.Fatalf("small tower: %.4g FLOP, want %.4g", got, want)
	}
}

// The generated int8 graph (DynamicQuantizeMatMul, as in int8 bundles)
// loads and computes the product within its quantization error.
func TestMeasureGEMMInt8RunsGeneratedGraph(t *testing.T) {
	initORT(t)
	res, err := MeasureGEMMInt8(GEMMShape{M: 8, K: 32, N: 16}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Best <= 0 || res.Median > res.Best {
		t.Fatalf("rates best=%v median=%v", res.Best, res.Median)
	}
}

// An int8 cost is bounded by the int8 rate when one was measured.
func TestBoundInt8(t *testing.T) {
	m := Machine{Bandwidth: 1e12, GEMM: 100e9}
	c := Cost{FLOPs: 1e11, Int8: true}
	if got := m.Bound(c).Milliseconds(); got != 1000 {
		t.Fatalf("int8 cost without an int8 rate: %d ms, want the fp32 rate's 1000", got)
	}
	m.GEMMInt8 = 200e9
	if got := m.Bound(c).Milliseconds(); got != 500 {
		t.Fatalf("int8 cost: %d ms, want 500", got)
	}
	if got := m.Bound(Cost{FLOPs: 1e11}).Milliseconds(); got != 1000 {
		t.Fatalf("fp32 cost: %d ms, want 1000", got)
	}
	// Attention products stay fp32 in an int8 bundle: 8e10 at 200 GFLOP/s
	// plus 2e10 at 100 GFLOP/s.
	c.ActFLOPs = 2e10
	if got := m.Bound(c).Milliseconds(); got != 600 {
		t.Fatalf("int8 cost with fp32 attention: %d ms, want 600", got)
	}
	if !m.ComputeBound(c) || m.ComputeBound(Cost{FLOPs: 1, Bytes: 1e12}) {
		t.Fatal("ComputeBound")
	}
	if sum := c.Plus(Cost{FLOPs: 1, ActFLOPs: 1, Bytes: 2}); sum != (Cost{FLOPs: 1e11 + 1, ActFLOPs: 2e10 + 1, Bytes: 2, Int8: true}) {
		t.Fatalf("Plus = %+v", sum)
	}
}

// A batch of B screens does B times the arithmetic and reads B caches, but
// streams the weights once.
func TestBatchCosts(t *testing.T) {
	s := Shapes{WeightBytes: 4, VisionParams: 1e6,
		Model: models.ModelConfig{DModel: 64, DKV: 16, DFF: 128, NumLayers: 2, NumDecoderLayers: 2, NumHeads: 4,
			VocabSize: 100, FeedForwardProj: "gated-gelu", ImageDim: 32},
		Vision: models.VisionConfig{ImageSize: 224, PatchSize: 14, HiddenSize: 64, NumLayers: 2}}
	b := s
	b.Batch = 8
	for name, c := range map[string][2]Cost{
		"encoder": {s.Encoder(50), b.Encoder(50)}, "fusion": {s.Fusion(50), b.Fusion(50)},
		"image": {s.Image(), b.Image()}, "first": {s.DecodeStep(0, 50), b.DecodeStep(0, 50)},
		"step": {s.DecodeStep(9, 50), b.DecodeStep(9, 50)},
	} {
		one, eight := c[0], c[1]
		if math.Abs(eight.FLOPs-8*one.FLOPs) > 1e-6*eight.FLOPs || eight.ActFLOPs != 8*one.ActFLOPs {
			t.Errorf("%s: FLOPs %v for 8, %v for 1", name, eight.FLOPs, one.FLOPs)
		}
		if eight.Bytes < one.Bytes || eight.Bytes >= 8*one.Bytes {
			t.Errorf("%s: bytes %v for 8, %v for 1: want the weights once", name, eight.Bytes, one.Bytes)
		}
	}
	kv := func(c Shapes, past int) float64 { return c.DecodeStep(past, 50).Bytes }
	if d1, d8 := kv(s, 9)-kv(s, 8), kv(b, 9)-kv(b, 8); math.Abs(d8-8*d1) > 1e-6 {
		t.Errorf("one more past token reads %v bytes more at 8, %v at 1", d8, d1)
	}
}

// The device probe's graphs run through any execution provider's session
// options; CI has no GPU, so this is the CPU provider's path, the same code
// `autoui bench --provider cuda` runs on the GPU.
func TestMeasureDeviceOnCPUProvider(t *testing.T) {
	initORT(t)
	newSO := func() (*ort.SessionOptions, error) { return cpuOptions(1) }
	res, err := MeasureDevice(newSO, DeviceProbe{GEMM: GEMMShape{M: 48, K: 64, N: 32}, StreamMiB: 1, Runs: 3, Half: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Overhead <= 0 || res.Stream.Bytes != 1<<20 || res.Stream.Best <= 0 || res.Stream.Median > res.Stream.Best {
		t.Fatalf("overhead %v, stream %+v", res.Overhead, res.Stream)
	}
	for _, g := range []GEMMResult{res.GEMM, res.GEMMHalf} {
		if g.Best <= 0 || g.Median > g.Best || g.Shape.M != 48 {
			t.Fatalf("gemm %+v", g)
		}
	}
	if m := res.Machine(); m.Bandwidth != res.Stream.Best || m.GEMM != res.GEMM.Best || m.GEMMHalf != res.GEMMHalf.Best {
		t.Fatalf("machine %+v", m)
	}
}

func TestHalfBits(t *testing.T) {
	for f, want := range map[float32]uint16{0: 0, 1: 0x3c00, -2: 0xc000, 0.125: 0x3000, -1.0 / 64: 0xa400, 0.109375: 0x2f00} {
		if got := halfBits(f); got != want {
			t.Errorf("halfBits(%v) = %#04x, want %#04x", f, got, want)
		}
	}
}

// Expected sum of the device product, against the product done in full.
func TestExpectSum(t *testing.T) {
	s := GEMMShape{M: 5, K: 7, N: 3}
	x := probeInput(s.M * s.K)
	var want float64
	for i := 0; i < s.M; i++ {
		for k := 0; k < s.K; k++ {
			for j := 0; j < s.N; j++ {
				want += float64(x[i*s.K+k]) * float64(weight(k*s.N+j))
			}
		}
	}
	if got, abs := expectSum(s); math.Abs(got-want) > 1e-12 || abs < math.Abs(want) {
		t.Fatalf("sum %v (abs %v), want %v", got, abs, want)
	}
}

// An fp16 cost is bounded by the fp16 rate when one was measured.
func TestBoundHalf(t *testing.T) {
	m := Machine{Bandwidth: 1e15, GEMM: 100e9, GEMMHalf: 400e9}
	if got := m.Bound(Cost{FLOPs: 1e11, Half: true}).Milliseconds(); got != 250 {
		t.Fatalf("fp16 cost: %d ms, want 250", got)
	}
	s := Shapes{WeightBytes: 4, VisionParams: 1e6, HalfVision: true,
		Vision: models.VisionConfig{ImageSize: 224, PatchSize: 14, HiddenSize: 64, NumLayers: 2}}
	if c := s.Image(); !c.Half || c.Bytes != 2e6 {
		t.Fatalf("fp16 tower: %+v", c)
	}
}

// ShapesOf reads the cache's element size from the manifest's decoder K/V.
func TestShapesOfCacheBytes(t *testing.T) {
	b, err := models.Load("../../models/testdata/tiny", models.LoadOptions{Verify: models.VerifySizes})
	if err != nil {
		t.Fatal(err)
	}
	if got := ShapesOf(b).CacheBytes; got != 4 {
		t.Errorf("float32 cache: %v bytes", got)
	}
	// as scripts.half --fp16-cache writes it: every K/V of the decoder graphs
	for _, role := range []models.Role{models.RoleDecoder, models.RoleDecoderCross, models.RoleDecoderStatic} {
		spec := b.Manifest.Files[role]
		for _, ts := range [][]models.TensorSpec{spec.Inputs, spec.Outputs} {
			for i := range ts {
				if strings.HasPrefix(ts[i].Name, "past_key_values.") || strings.HasPrefix(ts[i].Name, "present.") {
					ts[i].DType = "float16"
				}
			}
		}
	}
	if got := ShapesOf(b).CacheBytes; got != 2 {
		t.Errorf("float16 cache: %v bytes", got)
	}
}

// The median rate never beats the best, whichever side of twice the
// overhead the times fall (the device probe's median once came out 1.6x its
// best: the fastest run kept the overhead, a slower one lost it).
func TestRatesOrdered(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		times    []time.Duration
		overhead time.Duration
	}{
		{[]time.Duration{7 * ms / 2, 9 * ms / 2, 9 * ms}, 2 * ms}, // fastest under twice the overhead, the median over
		{[]time.Duration{5 * ms, 6 * ms, 9 * ms}, 2 * ms},
		{[]time.Duration{ms, ms, ms}, 0},
	} {
		best, median := rates(1, c.times, c.overhead)
		if best <= 0 || median > best {
			t.Errorf("times %v, overhead %v: best %v, median %v", c.times, c.overhead, best, median)
		}
	}
	if best, _ := rates(1, []time.Duration{5 * ms, 6 * ms}, 2*ms); best != 1/(3*ms).Seconds() {
		t.Errorf("overhead not taken off: %v", best)
	}
}
