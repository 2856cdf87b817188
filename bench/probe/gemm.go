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
	res := GEMMResult{Shape: shape, Threads: threads, Runs: max(runs, 1)}
	so, err := cpuOptions(threads)
	if err != nil {
		return res, err
	}
	defer so.Destroy()
	a := probeInput(shape.M * shape.K)
	times, c, err := timeRuns(model, so, ort.NewShape(int64(shape.M), int64(shape.K)), a, ort.NewShape(int64(shape.M), int64(shape.N)), runs)
	if err != nil {
		return res, fmt.Errorf("gemm probe: %w", err)
	}
	want, scale := expectFirst(a, shape)
	if got := c[0]; math.Abs(float64(got-want)) > tol*float64(scale) {
		return res, fmt.Errorf("gemm probe: C[0,0] = %v, want %v (graph miscomputed)", got, want)
	}
	res.Best, res.Median = rates(shape.FLOPs(), times, 0)
	return res, nil
}

// cpuOptions are the host probe's session options: threads intra-op, one
// inter-op.
func cpuOptions(threads int) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("probe session options: %w", err)
	}
	if threads > 0 {
		if err := so.SetIntraOpNumThreads(threads); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("probe threads: %w", err)
		}
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		so.Destroy()
		return nil, fmt.Errorf("probe threads: %w", err)
	}
	return so, nil
}

// probeInput is the probes' input A: small values of both signs, exact
// multiples of 1/32.
func probeInput(n int) []float32 {
	a := make([]float32, n)
	for i := range a {
		a[i] = float32(i%13-6) / 32
	}
	return a
}

// timeRuns opens model (input "A" of inShape, float output "C" of outShape)
// with so, runs it twice to warm up (prepacking, thread pools, a device's
// kernels), then runs times, and returns the run times sorted and the last C.
func timeRuns(model []byte, so *ort.SessionOptions, inShape ort.Shape, in []float32, outShape ort.Shape, runs int) ([]time.Duration, []float32, error) {
	inT, err := ort.NewTensor(inShape, in)
	if err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	defer inT.Destroy()
	out, err := ort.NewEmptyTensor[float32](outShape)
	if err != nil {
		return nil, nil, fmt.Errorf("output: %w", err)
	}
	defer out.Destroy()
	sess, err := ort.NewAdvancedSessionWithONNXData(model, []string{"A"}, []string{"C"}, []ort.Value{inT}, []ort.Value{out}, so)
	if err != nil {
		return nil, nil, fmt.Errorf("session: %w", err)
	}
	defer sess.Destroy()
	for i := 0; i < 2; i++ {
		if err := sess.Run(); err != nil {
			return nil, nil, fmt.Errorf("run: %w", err)
		}
	}
	times := make([]time.Duration, max(runs, 1))
	for i := range times {
		t := time.Now()
		if err := sess.Run(); err != nil {
			return nil, nil, fmt.Errorf("run: %w", err)
		}
		times[i] = time.Since(t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times, out.GetData(), nil
}

// rates turns sorted run times into the best and median rate of work units
// per second, each time less overhead where the fastest is over twice it
// (kept positive). One rule for both, so the median never beats the best:
// deciding per time, a fastest run under twice the overhead kept it and a
// slower one lost it.
func rates(work float64, sorted []time.Duration, overhead time.Duration) (best, median float64) {
	less := sorted[0] > 2*overhead
	rate := func(d time.Duration) float64 {
		if less {
			d -= overhead
		}
		return work / d.Seconds()
	}
	return rate(sorted[0]), rate(sorted[len(sorted)/2])
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
