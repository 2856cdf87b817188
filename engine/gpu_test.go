package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/models"
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
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(b, Options{Truncation: TruncateRight, LibraryPath: os.Getenv("AUTOUI_CUDA_ORT_LIB"),
		Session: SessionOptions{Provider: ProviderCUDA}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The golden cases' tokens through Predict with --provider cuda.
func TestCUDAGoldenTokens(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDAGoldenTokens")
		return
	}
	p := cudaPredictor(t)
	for _, c := range loadGolden(t) {
		res, err := p.Predict(context.Background(), Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
		if err != nil {
			t.Fatal(err)
		}
		if !equalIDs(res.TokenIDs, c.GeneratedIDs) {
			t.Errorf("%s: cuda ids differ from golden", c.ID)
		}
	}
}

// The device-resident decoder state on the GPU: the encoder states, mask and
// cross-attention K/V uploaded once per request as adapters in CUDA memory.
// Greedy tokens equal the golden ones on every case, and drafts with
// truncation give the logits of the host-resident state on the same GPU.
func TestCUDADeviceDecodeGolden(t *testing.T) {
	if !inCUDAChild() {
		runCUDAChild(t, "TestCUDADeviceDecodeGolden")
		return
	}
	p := cudaPredictor(t)
	cases := loadGolden(t)
	for _, c := range cases {
		ids, _ := deviceGreedy(t, p, c)
		if !equalIDs(ids, c.GeneratedIDs) {
			t.Errorf("%s: cuda device decoding differs from golden\n got %v\nwant %v", c.ID, ids, c.GeneratedIDs)
		}
	}
	for _, c := range []goldenCase{cases[0], cases[10], cases[11]} {
		compareWithHostRun(t, p, c, 1e-4)
	}
}
