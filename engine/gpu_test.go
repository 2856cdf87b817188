package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// The CUDA path, where a GPU exists. ORT loads one library per process, so
// each test runs again in a child process with the CUDA build of the library
// (AUTOUI_CUDA_ORT_LIB); without a GPU they skip.

const cudaChildEnv = "AUTOUI_CUDA_CHILD"

// inCUDAChild reports whether this process is the child a CUDA test started.
func inCUDAChild() bool { return os.Getenv(cudaChildEnv) == "1" }

// runCUDAChild skips without a GPU, else reruns test name in a child process.
func runCUDAChild(t *testing.T, name string) {
	t.Helper()
	lib := os.Getenv("AUTOUI_CUDA_ORT_LIB")
	if _, err := os.Stat("/dev/nvidia0"); err != nil || lib == "" {
		t.Skip("no GPU here (or AUTOUI_CUDA_ORT_LIB unset): the CUDA path runs only where a GPU is present; see docs/cuda.md")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), cudaChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cuda child: %v\n%s", err, out)
	}
	t.Logf("cuda child:\n%s", out)
}

// cudaPredictor opens the tiny bundle with the cuda provider (child only).
func cudaPredictor(t *testing.T) *Predictor {
	t.Helper()
	return cudaPredictorWith(t, Options{})
}

// cudaPredictorWith opens the tiny bundle with the cuda provider and opts.
func cudaPredictorWith(t *testing.T, opts Options) *Predictor {
	t.Helper()
	b, err := models.Load(tinyDir(), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Truncation, opts.LibraryPath = TruncateRight, os.Getenv("AUTOUI_CUDA_ORT_LIB")
	opts.Session.Provider = ProviderCUDA
	p, err := NewPredictor(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The golden cases' tokens through Predict with --provider cuda, TF32 off
// (the default) and on.
func TestCUDAGoldenTokens(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAGoldenTokens")
		return
	}
	for _, tf32 := range []bool{false, true} {
		p := cudaPredictorWith(t, Options{Session: SessionOptions{TF32: tf32}})
		for _, c := range loadGolden(t) {
			res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
				t.Errorf("tf32 %v %s: cuda ids differ from golden", tf32, c.ID)
			}
		}
	}
}

// The device-resident decoder state on the GPU: cross K/V and every call's
// presents stay in CUDA memory as ORT-owned values, rejected drafts and
// finished rows are cut there. Greedy tokens equal the golden ones on every
// case at batches of 1, 3 and 8, speculative and greedy, with the argmax
// output and without it; drafts with truncation give the logits of the
// host-resident state on the same GPU; constrained decoding (the logits
// path) gives what it gives on the host cache; prompts encoded in groups
// and in one give the same.
func TestCUDADeviceDecodeGolden(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDADeviceDecodeGolden")
		return
	}
	host := cudaPredictor(t)
	host.cachePlace = placeHost
	cases := loadGolden(t)
	for _, argmax := range []bool{true, false} {
		for _, dec := range []Decoding{DecodeSpeculative, DecodeGreedy} {
			dev := cudaPredictorWith(t, Options{Decoding: dec})
			if dev.cachePlace != placeDevice {
				t.Fatal("the cuda provider does not keep the cache on the device")
			}
			if !argmax {
				withoutArgmax(t, dev)
			}
			for _, B := range []int{1, 3, 8} {
				goldenBatches(t, dev, cases, B, fmt.Sprintf("cuda device decoding, argmax=%v %s B=%d", argmax, dec, B))
			}
		}
	}
	// prompts in as many groups as can be (their fused states merged on
	// the device) and all in one
	for _, cost := range []int{0, 1 << 30} {
		dev := cudaPredictor(t)
		dev.groupCost = cost
		goldenBatches(t, dev, cases, 8, fmt.Sprintf("cuda device decoding, prompt group cost %d", cost))
	}
	dev := cudaPredictor(t)
	for _, c := range []goldenCase{cases[0], cases[10], cases[11]} {
		compareCaches(t, host, dev, c, 1e-4)
	}
	// constrained: the device cache fetches logits and gives the host cache's tokens
	hostCons, devCons := cudaPredictorWith(t, Options{Constrained: true}), cudaPredictorWith(t, Options{Constrained: true})
	hostCons.cachePlace = placeHost
	sameConstrained(t, hostCons, devCons, cases[:6])
}

// sameConstrained requires the same constrained tokens (90 at most) of a and
// b on each case.
func sameConstrained(t *testing.T, a, b *Predictor, cases []goldenCase) {
	t.Helper()
	for _, c := range cases {
		r := predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: 90}
		ra, err := a.Predict(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.Predict(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ra.TokenIDs, rb.TokenIDs) {
			t.Errorf("%s constrained: %v, against %v", c.ID, rb.TokenIDs, ra.TokenIDs)
		}
	}
}

// CUDA graphs (Options.CUDAGraph): the static decoder's calls captured once
// per shape and replayed give the golden tokens at batches of 1, 3 and 8
// (and a batch of 16, past captureRows, on the device-resident path),
// speculative and greedy, twice over (the second pass replays the graphs
// the first captured, on the same buffers), and from screens (the vision
// tower captured too), and in batches of 9 screens three at once (each
// batch's screens and prompts beside the capture thread while another
// decodes; decoded past captureRows, and on captured buffers of 16 rows,
// the decoder's stream of the default priority and of the highest);
// constrained decoding gives the device-resident decode's tokens.
func TestCUDAGraphGolden(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAGraphGolden")
		return
	}
	cases := loadGolden(t)
	for _, dec := range []Decoding{DecodeSpeculative, DecodeGreedy} {
		p := cudaPredictorWith(t, Options{Decoding: dec, CUDAGraph: true})
		if p.cachePlace != placeStatic || !p.statics.capture {
			t.Fatal("--cuda-graph under cuda does not capture")
		}
		for pass := range 2 {
			for _, B := range []int{1, 3, 8} {
				goldenBatches(t, p, cases, B, fmt.Sprintf("cuda graph, %s B=%d pass %d", dec, B, pass))
			}
		}
		p.groupCost = 0 // prompts in as many groups as can be, merged to the bucketed length
		goldenBatches(t, p, cases, 8, fmt.Sprintf("cuda graph, %s B=8, prompts in groups", dec))
		p.groupCost = groupCostCUDA
		// past captureRows: the device-resident path beside the captured one
		goldenBatches(t, p, cases, 16, fmt.Sprintf("cuda graph, %s B=16 (uncaptured)", dec))
		// screens: the vision tower's captured runs too
		for pass := range 2 {
			for _, c := range cases {
				res, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("cuda graph, %s, screens pass %d, %s: ids differ from golden", dec, pass, c.ID)
				}
			}
		}
		// batches of screens past the tower's fixed buffers, three at once:
		// each prefills beside the capture thread while another decodes
		screenBatchesAtOnce(t, p, cases, captureRows+1, 3, fmt.Sprintf("cuda graph, %s, screens beside", dec))
		t.Logf("%s: %d decoder and %d vision CUDA graphs captured", dec, p.statics.graphs, p.visionFixed.graphs)
	}
	// the same decoded on captured buffers (--capture-rows 16), twice (the
	// second replays what the first captured), and with the decoder on a
	// stream of the highest priority (DecodePriority)
	for _, prio := range []bool{false, true} {
		wide := cudaPredictorWith(t, Options{CUDAGraph: true, CaptureRows: 2 * captureRows, DecodePriority: prio})
		for pass := range 2 {
			screenBatchesAtOnce(t, wide, cases, captureRows+1, 3, fmt.Sprintf("cuda graph at 16 rows, priority %v, screens beside, pass %d", prio, pass))
		}
		goldenBatches(t, wide, cases, 8, fmt.Sprintf("cuda graph at 16 rows, priority %v, B=8", prio))
	}
	dev, graph := cudaPredictorWith(t, Options{Constrained: true}), cudaPredictorWith(t, Options{Constrained: true, CUDAGraph: true})
	sameConstrained(t, dev, graph, cases[:6])
}

// Continuous batching under capture: requests joining a captured decode
// of up to 8 rows (cross K/V scattered into the captured buffers, busy rows
// moved to longer buffers and to more and fewer rows), from screens and from
// features, give the golden tokens, speculative and greedy, twice over (the
// second pass replays what the first captured).
func TestCUDAStreamGolden(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAStreamGolden")
		return
	}
	cases := loadGolden(t)
	var reqs []predict.Request
	for _, c := range cases {
		reqs = append(reqs, c.featureRequest(t),
			predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
	}
	for _, tc := range []struct {
		dec     Decoding
		overlap bool
	}{{DecodeSpeculative, false}, {DecodeGreedy, false}, {DecodeSpeculative, true}} {
		dec := tc.dec
		// OverlapJoins: the joins into a busy decode prefill on another
		// thread beside captured calls, and the calls that capture wait
		// for them
		p := cudaPredictorWith(t, Options{Decoding: dec, CUDAGraph: true, OverlapJoins: tc.overlap})
		var moves streamMoves
		p.adoptHook = moves.record
		for pass := range 2 {
			f := newStreamFeed(reqs, 2, 0, 1, 3)
			if err := p.Stream(context.Background(), 8, f.ask); err != nil {
				t.Fatal(err)
			}
			for i, res := range f.res {
				c := cases[i/2]
				if f.errs[i] != nil {
					t.Fatalf("%s pass %d %s: %v", dec, pass, c.ID, f.errs[i])
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("stream under capture, %s (overlap %v) pass %d, %s (screen %v): ids differ from golden", dec, tc.overlap, pass, c.ID, i%2 == 1)
				}
			}
		}
		longer := moves.count(func(from, to staticKey) bool { return to.enc > from.enc })
		up := moves.count(func(from, to staticKey) bool { return to.rows > from.rows })
		down := moves.count(func(from, to staticKey) bool { return to.rows < from.rows })
		if longer == 0 || up == 0 || down == 0 {
			t.Errorf("%s: busy rows moved to longer buffers %d times, to more rows %d, to fewer %d", dec, longer, up, down)
		}
		st := p.StreamStats()
		if tc.overlap != (st.Beside > 0) {
			t.Errorf("%s, overlap %v: %d joins prefilled beside the calls", dec, tc.overlap, st.Beside)
		}
		t.Logf("%s (overlap %v): %d decoder graphs captured; busy rows moved %d times, %d to longer buffers; %d joins beside the calls",
			dec, tc.overlap, p.statics.graphs, len(moves), longer, st.Beside)
	}
}

// The fixed-buffer paths under cuda beyond what capture replays: a static
// decode past the graph budget (its calls run plainly on the capturing
// session) gives the golden tokens, and the vision tower's features from
// its fixed buffers, over its regular, capturing and replayed runs, and
// from a plain run of a batch past captureRows, are the device path's. Both failed once: the host inputs' copies were bound once,
// and ORT copies a host input to the device when it is bound.
func TestCUDAFixedBuffers(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAFixedBuffers")
		return
	}
	cases := loadGolden(t)
	p := cudaPredictorWith(t, Options{CUDAGraph: true})
	p.statics.graphs = maxCapturedGraphs // no graph ids left: every set runs uncaptured
	for _, B := range []int{1, 3} {
		goldenBatches(t, p, cases, B, fmt.Sprintf("static decoder uncaptured, B=%d", B))
	}
	if d, _ := p.CapturedGraphs(); d != maxCapturedGraphs {
		t.Errorf("%d graph ids handed out, want the %d set by the test", d, maxCapturedGraphs)
	}
	dev, graph := cudaPredictor(t), cudaPredictorWith(t, Options{CUDAGraph: true})
	for pass := range 5 {
		img := screen(t, cases[pass%len(cases)].Screen)
		a, err := dev.ImageFeatures(context.Background(), img)
		if err != nil {
			t.Fatal(err)
		}
		b, err := graph.ImageFeatures(context.Background(), img)
		if err != nil {
			t.Fatal(err)
		}
		if worst := maxAbsDiff(t, "vision features", b, a); worst > 1e-5 {
			t.Errorf("vision pass %d (%s): captured-path features differ from the device path's by %.3g", pass, cases[pass%len(cases)].Screen, worst)
		}
	}
	if _, v := graph.CapturedGraphs(); v != 1 {
		t.Errorf("%d vision graphs captured, want 1", v)
	}
	// past captureRows the tower runs plainly on its capturing session
	var reqs []predict.Request
	for i := range captureRows + 2 {
		c := cases[i%len(cases)]
		reqs = append(reqs, predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
	}
	want, err := dev.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := graph.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		worst := maxAbsDiff(t, "vision features", got[i].Features, want[i].Features)
		if worst > 1e-5 || !slices.Equal(got[i].TokenIDs, want[i].TokenIDs) {
			t.Errorf("batch of %d screens, item %d: features off by %.3g, tokens equal %v", len(reqs), i, worst, slices.Equal(got[i].TokenIDs, want[i].TokenIDs))
		}
	}
	if _, v := graph.CapturedGraphs(); v != 1 {
		t.Errorf("%d vision graphs captured after a batch of %d, want still 1", v, len(reqs))
	}
}

// fp16 under cuda (AUTOUI_FP16_BUNDLE: the tiny bundle in fp16 everywhere,
// scripts/gpu_extra.sh fp16): the device path and CUDA graphs against the
// CPU provider's run of the same bundle in the same process. fp16 kernels
// differ between the two, so tokens may too: the test requires most to
// agree, every output to parse where the CPU's does, and finite features
// close to the CPU's, and logs how many agree.
func TestCUDAFP16(t *testing.T) {
	dir := os.Getenv("AUTOUI_FP16_BUNDLE")
	if dir == "" {
		t.Skip("AUTOUI_FP16_BUNDLE unset: scripts/gpu_extra.sh fp16 makes the bundle and scripts/gpu_check.sh sets it")
	}
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAFP16")
		return
	}
	open := func(provider Provider, graph bool) *Predictor {
		b, err := models.Load(dir, models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Manifest.Precision != "fp16" {
			t.Fatalf("%s: precision %q, want an fp16 bundle", dir, b.Manifest.Precision)
		}
		opts := Options{Truncation: TruncateRight, LibraryPath: os.Getenv("AUTOUI_CUDA_ORT_LIB"), CUDAGraph: graph}
		opts.Session.Provider = provider
		p, err := NewPredictor(b, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	cpu := open(ProviderCPU, false)
	cases := loadGolden(t)
	want := make([]*predict.Result, len(cases))
	for i, c := range cases {
		var err error
		if want[i], err = cpu.Predict(context.Background(), c.featureRequest(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, graph := range []bool{false, true} {
		p := open(ProviderCUDA, graph)
		same := 0
		for i, c := range cases {
			res, err := p.Predict(context.Background(), c.featureRequest(t))
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(res.TokenIDs, want[i].TokenIDs) {
				same++
			}
			if res.ParseErr != nil && want[i].ParseErr == nil {
				t.Errorf("cuda graph %v, %s: %v (the CPU's parses)", graph, c.ID, res.ParseErr)
			}
		}
		t.Logf("cuda graph %v: %d of %d outputs identical to the CPU's fp16 run", graph, same, len(cases))
		if same*4 < len(cases)*3 {
			t.Errorf("cuda graph %v: only %d of %d outputs identical to the CPU's fp16 run", graph, same, len(cases))
		}
		// in batches of 3: without graphs rows leave as they finish (the
		// cache's gather, in the bundle's cache type); with them the static
		// path pads the batch to 4 rows
		same = 0
		for lo := 0; lo < len(cases); lo += 3 {
			var reqs []predict.Request
			for _, c := range cases[lo:min(lo+3, len(cases))] {
				reqs = append(reqs, c.featureRequest(t))
			}
			got, err := p.PredictBatch(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			for j, res := range got {
				if slices.Equal(res.TokenIDs, want[lo+j].TokenIDs) {
					same++
				}
			}
		}
		t.Logf("cuda graph %v, batches of 3: %d of %d outputs identical to the CPU's fp16 run", graph, same, len(cases))
		if same*4 < len(cases)*3 {
			t.Errorf("cuda graph %v, batches of 3: only %d of %d outputs identical to the CPU's fp16 run", graph, same, len(cases))
		}
		img := screen(t, cases[0].Screen)
		a, err := cpu.ImageFeatures(context.Background(), img)
		if err != nil {
			t.Fatal(err)
		}
		for pass := range 4 { // regular, capturing and replayed runs
			b, err := p.ImageFeatures(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			scale := 0.0
			for _, v := range a {
				scale = max(scale, math.Abs(float64(v)))
			}
			if d := maxAbsDiff(t, "fp16 vision features", b, a); d > 0.02*scale || math.IsInf(d, 1) {
				t.Errorf("cuda graph %v, pass %d: fp16 vision features off by %.3g of %.3g", graph, pass, d, scale)
			}
		}
	}
}
