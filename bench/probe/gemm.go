package probe

import (
	"fmt"
	"math"
	"sort"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// GEMMShape is the probe's matrix product [M, K] x [K, N]. The default is an
// encoder feed-forward projection of T5-base at 256 tokens.
type GEMMShape struct{ M, K, N int }

// DefaultGEMM is 256 tokens through a 768 -> 2048 projection (0.8 GFLOP).
var DefaultGEMM = GEMMShape{M: 256, K: 768, N: 2048}

// FLOPs of one product (a multiply-add counts as two).
func (s GEMMShape) FLOPs() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

// GEMMResult is ONNX Runtime's matrix-multiply throughput on this machine.
type GEMMResult struct {
	Shape   GEMMShape
	Threads int
	Runs    int
	// Best and Median are in FLOP/s. Bounds use Best: a lower bound must not
	// be inflated by a noisy run.
	Best, Median float64
}

// MeasureGEMM runs the generated fp32 MatMul graph through ONNX Runtime with
// the given intra-op thread count. The runtime must be initialised already
// (engine.InitRuntime).
func MeasureGEMM(shape GEMMShape, threads, runs int) (GEMMResult, error) {
	return measureGEMM(matMulModel(shape.M, shape.K, shape.N), shape, threads, runs, 0)
}

// MeasureGEMMInt8 does the same for the int8 product int8 bundles run
// (DynamicQuantizeMatMul: the input quantized per call, int8 weights).
func MeasureGEMMInt8(shape GEMMShape, threads, runs int) (GEMMResult, error) {
	// A is quantized to 8 bits per call: C[0,0] is exact to about 1%.
	return measureGEMM(quantMatMulModel(shape.M, shape.K, shape.N), shape, threads, runs, 0.02)
}

// measureGEMM times model (A [M, K] in, C [M, N] out) and checks C[0,0]
// against Go within tol of the sum of |terms| (0: exact).
func measureGEMM(model []byte, shape GEMMShape, threads, runs int, tol float64) (GEMMResult, error) {
	if runs < 1 {
		runs = 1
	}
	res := GEMMResult{Shape: shape, Threads: threads, Runs: runs}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return res, fmt.Errorf("gemm probe session options: %w", err)
	}
	defer so.Destroy()
	if threads > 0 {
		if err := so.SetIntraOpNumThreads(threads); err != nil {
			return res, fmt.Errorf("gemm probe threads: %w", err)
		}
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		return res, fmt.Errorf("gemm probe threads: %w", err)
	}
	a := make([]float32, shape.M*shape.K)
	for i := range a {
		a[i] = float32(i%13-6) / 32
	}
	in, err := ort.NewTensor(ort.NewShape(int64(shape.M), int64(shape.K)), a)
	if err != nil {
		return res, fmt.Errorf("gemm probe input: %w", err)
	}
	defer in.Destroy()
	out, err := ort.NewEmptyTensor[float32](ort.NewShape(int64(shape.M), int64(shape.N)))
	if err != nil {
		return res, fmt.Errorf("gemm probe output: %w", err)
	}
	defer out.Destroy()
	sess, err := ort.NewAdvancedSessionWithONNXData(model, []string{"A"}, []string{"C"}, []ort.Value{in}, []ort.Value{out}, so)
	if err != nil {
		return res, fmt.Errorf("gemm probe session: %w", err)
	}
	defer sess.Destroy()
	// two warm-up runs: prepacking and thread-pool start-up are not throughput
	for i := 0; i < 2; i++ {
		if err := sess.Run(); err != nil {
			return res, fmt.Errorf("gemm probe run: %w", err)
		}
	}
	rates := make([]float64, runs)
	for i := range rates {
		t := time.Now()
		if err := sess.Run(); err != nil {
			return res, fmt.Errorf("gemm probe run: %w", err)
		}
		rates[i] = shape.FLOPs() / time.Since(t).Seconds()
	}
	want, scale := expectFirst(a, shape)
	if got := out.GetData()[0]; math.Abs(float64(got-want)) > tol*float64(scale) {
		return res, fmt.Errorf("gemm probe: C[0,0] = %v, want %v (graph miscomputed)", got, want)
	}
	sort.Float64s(rates)
	res.Best = rates[len(rates)-1]
	res.Median = rates[len(rates)/2]
	return res, nil
}

// expectFirst is C[0,0] computed in Go, in the same float32 order up to
// rounding (the values are exact multiples of 1/2048 so any order agrees),
// and the sum of its terms' magnitudes.
func expectFirst(a []float32, s GEMMShape) (sum, abs float32) {
	for k := 0; k < s.K; k++ {
		t := a[k] * (float32((k*s.N)%17-8) / 64)
		sum += t
		abs += float32(math.Abs(float64(t)))
	}
	return sum, abs
}
