package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
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
	dev := cudaPredictor(t)
	host := cudaPredictor(t)
	host.cachePlace = placeHost
	if dev.cachePlace != placeDevice {
		t.Fatal("the cuda provider does not keep the cache on the device")
	}
	cases := loadGolden(t)
	for _, B := range []int{1, 3} {
		for lo := 0; lo+B <= len(cases); lo += B {
			var reqs []Request
			for _, c := range cases[lo : lo+B] {
				reqs = append(reqs, Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			}
			got, err := dev.PredictBatch(context.Background(), reqs)
			if err != nil {
				t.Fatal(err)
			}
			for j, res := range got {
				if c := cases[lo+j]; !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("B=%d %s: cuda device decoding differs from golden\n got %v\nwant %v", B, c.ID, res.TokenIDs, c.GeneratedIDs)
				}
			}
		}
	}
	for _, c := range []goldenCase{cases[0], cases[10], cases[11]} {
		compareCaches(t, host, dev, c, 1e-4)
	}
}
