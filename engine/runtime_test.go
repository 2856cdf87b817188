package engine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"1.29.0": true, "1.29.3": true, "1.28.1": false, "1.30.0": false, "2.29.0": false, "garbage": false, "": false} {
		if err := checkVersion(v); (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v", v, err)
		}
	}
}

func TestFindLibraryErrors(t *testing.T) {
	if _, err := findLibrary("/nonexistent/libonnxruntime.so"); err == nil || !strings.Contains(err.Error(), "make setup-ort") {
		t.Fatalf("missing explicit library: %v", err)
	}
	if _, err := findLibrary(t.TempDir()); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory as library: %v", err)
	}
}

func TestParseOptions(t *testing.T) {
	if _, err := ParseProvider("tpu"); err == nil {
		t.Error("unknown provider accepted")
	}
	if p, _ := ParseProvider("CUDA"); p != ProviderCUDA {
		t.Error("cuda not parsed")
	}
	if _, err := ParseTruncation("left"); err == nil {
		t.Error("unknown truncation accepted")
	}
	if PhysicalCores() < 1 {
		t.Error("no cores")
	}
}

// A wrong shared library must fail with a message that says what to install.
// ORT loads once per process, so the failing load runs in a child process.
func TestWrongLibraryInChild(t *testing.T) {
	if lib := os.Getenv("AUTOUI_TEST_ORT_LIB"); lib != "" {
		err := InitRuntime(lib)
		if err == nil {
			os.Exit(3)
		}
		os.Stderr.WriteString(err.Error())
		os.Exit(0)
	}
	libc, _ := filepath.Glob("/lib/x86_64-linux-gnu/libc.so.6")
	bad := filepath.Join(t.TempDir(), "libonnxruntime.so")
	os.WriteFile(bad, []byte("not an ELF file"), 0o644)
	for _, lib := range append(libc, bad) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWrongLibraryInChild$")
		cmd.Env = append(os.Environ(), "AUTOUI_TEST_ORT_LIB="+lib)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: child failed (%v): %s", lib, err, out)
		}
		if !strings.Contains(string(out), "make setup-ort") || !strings.Contains(string(out), lib) {
			t.Errorf("%s: error does not name the library and the fix: %s", lib, out)
		}
	}
}

// On the CPU build, the cuda provider's error says what to install, not
// where in ORT's sources it failed (issue 22).
func TestCUDAOnCPUBuildSaysWhatToInstall(t *testing.T) {
	if err := InitRuntime(""); err != nil {
		t.Skip(err)
	}
	if os.Getenv("AUTOUI_CUDA_ORT_LIB") != "" {
		t.Skip("a CUDA build is configured")
	}
	so, err := SessionOptions{Provider: ProviderCUDA}.build()
	if err == nil {
		so.Destroy()
		t.Skip("this ONNX Runtime library has a CUDA provider")
	}
	msg := err.Error()
	if !strings.Contains(msg, "make setup-cuda") || !strings.Contains(msg, "docs/cuda.md") || strings.Contains(msg, ".cc:") || strings.Contains(msg, "onnxruntime_src") {
		t.Errorf("cuda on the CPU build: %q", msg)
	}
}

// Under cuda the cache ops' sessions keep the provider and its settings but
// run on one thread that never spins.
func TestOpsSessionOptions(t *testing.T) {
	o := SessionOptions{Provider: ProviderCUDA, CUDADevice: 1, TF32: true, IntraOpThreads: 16, Spin: SpinOn, Profile: "p"}
	got := opsSessionOptions(o)
	want := o
	want.IntraOpThreads, want.Spin = 1, SpinOff
	if got != want {
		t.Errorf("ops session options %+v, want %+v", got, want)
	}
}

// ORT's own log is off unless $AUTOUI_ORT_LOG asks for it; a value that is
// no level is an error naming the variable.
func TestORTLogLevel(t *testing.T) {
	for _, name := range []string{"", "fatal", "error", "warning", "info", "verbose", "WARNING"} {
		if opt, err := ortLogLevel(name); err != nil || opt == nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := ortLogLevel("loud"); !errors.Is(err, ErrRuntime) || !strings.Contains(err.Error(), `AUTOUI_ORT_LOG="loud"`) {
		t.Errorf("loud: %v", err)
	}
}
