package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/models"
)

// The CUDA path, where a GPU exists: the golden cases' tokens with
// --provider cuda. ORT loads one library per process, so it runs in a child
// process with the CUDA build of the library.
func TestCUDAGoldenTokens(t *testing.T) {
	if os.Getenv("AUTOUI_CUDA_CHILD") == "1" {
		b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPredictor(b, Options{Truncation: TruncateRight, LibraryPath: os.Getenv("AUTOUI_CUDA_ORT_LIB"),
			Session: SessionOptions{Provider: ProviderCUDA}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for _, c := range loadGolden(t) {
			res, err := p.Predict(context.Background(), Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(res.TokenIDs, c.GeneratedIDs) {
				t.Errorf("%s: cuda ids differ from golden", c.ID)
			}
		}
		return
	}
	lib := os.Getenv("AUTOUI_CUDA_ORT_LIB")
	if _, err := os.Stat("/dev/nvidia0"); err != nil || lib == "" {
		t.Skip("no GPU here (or AUTOUI_CUDA_ORT_LIB unset): the CUDA path runs only where a GPU is present; see docs/cuda.md")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCUDAGoldenTokens$", "-test.v")
	cmd.Env = append(os.Environ(), "AUTOUI_CUDA_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cuda child: %v\n%s", err, out)
	}
}
