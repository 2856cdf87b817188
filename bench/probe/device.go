package probe

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// The device probe measures what ONNX Runtime achieves on the device of an
// execution provider — the GPU under cuda — through the same session options
// as the engine: how long one Run takes at all, how fast a product streams
// weights from device memory, and the fp32 (and fp16) product rate. The host
// probes (MeasureBandwidth, MeasureGEMM) say nothing about a GPU.

// DeviceProbe says what to measure.
type DeviceProbe struct {
	GEMM      GEMMShape // the product, its input generated on the device
	StreamMiB int       // the weight a one-row product streams
	Runs      int
	Half      bool // also the fp16 product (fp16 bundles)
}

// DefaultDeviceProbe is sized for a data-centre GPU: a 4096^3 product (137
// GFLOP, milliseconds) and 512 MiB of weights, far above its L2 cache.
var DefaultDeviceProbe = DeviceProbe{GEMM: GEMMShape{M: 4096, K: 4096, N: 4096}, StreamMiB: 512, Runs: 10}

// DeviceResult is what the device probe measured.
type DeviceResult struct {
	// Overhead is the fastest Run of a 64x64 one-row product: launch, sync
	// and the copies of tiny inputs and outputs, subtracted from the others.
	Overhead time.Duration
	// Stream is the weight-streaming rate of a one-row product [1, K] x
	// [K, N] over StreamMiB of fp32 weights (what a decoder call does).
	Stream BandwidthResult
	// GEMM and GEMMHalf are the product rates, fp32 and fp16 (Half only).
	GEMM, GEMMHalf GEMMResult
}

// MeasureDevice runs the probe graphs with session options from newSO (a
// fresh set per session, destroyed here). The runtime must be initialised.
func MeasureDevice(newSO func() (*ort.SessionOptions, error), p DeviceProbe) (DeviceResult, error) {
	var res DeviceResult
	runs := max(p.Runs, 1)
	tiny, _, err := gemv(newSO, 64, 64, runs)
	if err != nil {
		return res, fmt.Errorf("device probe overhead: %w", err)
	}
	res.Overhead = tiny[0]
	const k = 4096
	n := max(p.StreamMiB<<20/(4*k), 1)
	times, c, err := gemv(newSO, k, n, runs)
	if err != nil {
		return res, fmt.Errorf("device probe bandwidth: %w", err)
	}
	if want, scale := expectFirst(probeInput(k), GEMMShape{M: 1, K: k, N: n}); math.Abs(float64(c[0]-want)) > 1e-3*float64(scale) {
		return res, fmt.Errorf("device probe bandwidth: C[0] = %v, want %v (graph miscomputed)", c[0], want)
	}
	bytes := int64(4 * k * n)
	res.Stream = BandwidthResult{Bytes: bytes, Passes: runs}
	res.Stream.Best, res.Stream.Median = rates(float64(bytes), times, res.Overhead)
	if res.GEMM, err = deviceGEMM(newSO, p.GEMM, false, runs, res.Overhead); err != nil {
		return res, err
	}
	if p.Half {
		if res.GEMMHalf, err = deviceGEMM(newSO, p.GEMM, true, runs, res.Overhead); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Machine is the device's rates, as the bounds take them.
func (d DeviceResult) Machine() Machine {
	return Machine{Bandwidth: d.Stream.Best, GEMM: d.GEMM.Best, GEMMHalf: d.GEMMHalf.Best}
}

// gemv times the one-row product [1, k] x [k, n] (matMulModel).
func gemv(newSO func() (*ort.SessionOptions, error), k, n, runs int) ([]time.Duration, []float32, error) {
	so, err := newSO()
	if err != nil {
		return nil, nil, err
	}
	defer so.Destroy()
	return timeRuns(matMulModel(1, k, n), so, ort.NewShape(1, int64(k)), probeInput(k), ort.NewShape(1, int64(n)), runs)
}

// deviceGEMM times the product of deviceGEMMModel and checks its sum.
func deviceGEMM(newSO func() (*ort.SessionOptions, error), s GEMMShape, half bool, runs int, overhead time.Duration) (GEMMResult, error) {
	what := "fp32"
	tol := 1e-3 // TF32 tensor cores may round the fp32 inputs to 10 bits
	if half {
		what, tol = "fp16", 1e-2
	}
	res := GEMMResult{Shape: s, Runs: runs}
	so, err := newSO()
	if err != nil {
		return res, err
	}
	defer so.Destroy()
	times, c, err := timeRuns(deviceGEMMModel(s, half), so, ort.NewShape(1), []float32{1}, ort.NewShape(1, 1), runs)
	if err != nil {
		return res, fmt.Errorf("device probe %s gemm: %w", what, err)
	}
	want, scale := expectSum(s)
	if math.Abs(float64(c[0])-want) > tol*scale {
		return res, fmt.Errorf("device probe %s gemm: sum %v, want %v (graph miscomputed)", what, c[0], want)
	}
	res.Best, res.Median = rates(s.FLOPs(), times, overhead)
	return res, nil
}

// deviceGEMMModel computes C = sum(X x W) with X = A * WA for the scalar
// input A: X [M, K] is made on the device, so the timing is the product's
// and not a copy of X over the bus, and C is one number. WA and W are
// constants (probeInput's and weight's values); half casts X and stores W in
// fp16, and sums in fp32.
func deviceGEMMModel(s GEMMShape, half bool) []byte {
	xs := probeInput(s.M * s.K)
	wa := make([]byte, 4*len(xs))
	for i, v := range xs {
		binary.LittleEndian.PutUint32(wa[4*i:], math.Float32bits(v))
	}
	elem := uint64(onnxFloat)
	if half {
		elem = onnxFloat16
	}
	nodes := [][]byte{nodeProto("Mul", []string{"WA", "A"}, []string{"X"})}
	x, y := "X", "Y"
	if half {
		nodes = append(nodes, nodeProto("Cast", []string{"X"}, []string{"X16"}, attrInt("to", onnxFloat16)))
		x, y = "X16", "Y16"
	}
	nodes = append(nodes, nodeProto("MatMul", []string{x, "W"}, []string{y}))
	if half {
		nodes = append(nodes, nodeProto("Cast", []string{"Y16"}, []string{"Y"}, attrInt("to", onnxFloat)))
	}
	nodes = append(nodes, nodeProto("ReduceSum", []string{"Y"}, []string{"C"}, attrInt("keepdims", 1)))
	inits := [][]byte{tensorProto("WA", onnxFloat, wa, s.M, s.K), tensorProto("W", elem, weightBytes(s.K*s.N, half), s.K, s.N)}
	return graphModel("device_gemm_probe", nodes, inits, []int64{1}, []int64{1, 1})
}

// expectSum is sum(X x W) = sum over k of (column k of X summed) x (row k of
// W summed), in float64, and the same over magnitudes (the tolerance scale).
func expectSum(s GEMMShape) (sum, abs float64) {
	x := probeInput(s.M * s.K)
	for k := 0; k < s.K; k++ {
		var xs, xa, ws, wa float64
		for i := 0; i < s.M; i++ {
			v := float64(x[i*s.K+k])
			xs, xa = xs+v, xa+math.Abs(v)
		}
		for j := 0; j < s.N; j++ {
			v := float64(weight(k*s.N + j))
			ws, wa = ws+v, wa+math.Abs(v)
		}
		sum, abs = sum+xs*ws, abs+xa*wa
	}
	return sum, abs
}
