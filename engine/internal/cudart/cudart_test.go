package cudart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Without a CUDA runtime (CI) NewPriorityStream fails with an error that
// names what it looked for; with one (a GPU machine) it makes a stream,
// which closes once, then as a no-op.
func TestNewPriorityStream(t *testing.T) {
	s, err := NewPriorityStream(0)
	if err != nil {
		if !strings.Contains(err.Error(), "libcudart") && !strings.Contains(err.Error(), "CUDA") {
			t.Fatalf("error does not say what is missing: %v", err)
		}
		t.Logf("no stream here: %v", err)
		return
	}
	if s.Handle() == 0 {
		t.Fatal("a stream with a nil handle")
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var none *Stream
	if err := none.Close(); err != nil {
		t.Fatal(err)
	}
}

// fakeRuntime is a stand-in for libcudart with the five entry points: GPUs
// 0 and 1; a priority range of [0, -5]; its one stream's handle says the
// device, flags and priority it was made with; a second stream fails (out
// of memory), and so does destroying a stream twice.
const fakeRuntime = `
static int made, device = -1;
static void *destroyed;
int cudaSetDevice(int d) { if (d > 1) return 101; device = d; return 0; }
int cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -5; return 0; }
int cudaStreamCreateWithPriority(void **s, unsigned int flags, int priority) {
	if (made++) return 2;
	*s = (void *)(long)(0x100000 * (device + 1) + flags * 0x100 + (priority + 16));
	return 0;
}
int cudaStreamDestroy(void *s) { if (s == destroyed) return 400; destroyed = s; return 0; }
const char *cudaGetErrorString(int err) { return err == 2 ? "out of memory" : err == 101 ? "invalid device ordinal" : "invalid resource handle"; }
`

// The shim calls the runtime's entry points as CUDA declares them: a fake
// libcudart, built here with the C compiler, is asked for a non-blocking
// stream at the highest priority on the GPU asked for (a GPU it refuses
// fails with its message), destroyed once however often it is
// closed; a failure's code comes back with its message; a library without
// the entry points is refused by name.
func TestShimCallsTheRuntime(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libfakecudart.so")
	if err := os.WriteFile(src, []byte(fakeRuntime), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("build the fake runtime: %v\n%s", err, out)
	}
	rt, err := open([]string{filepath.Join(dir, "missing.so"), lib})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.priorityStream(2); err == nil || !strings.Contains(err.Error(), "device 2: invalid device ordinal (CUDA error 101)") {
		t.Errorf("a device the runtime refuses: %v", err)
	}
	s, err := rt.priorityStream(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := uintptr(0x100000*2 + streamNonBlocking*0x100 + (-5 + 16)); s.Handle() != want {
		t.Errorf("stream %#x, want %#x: device 1, flags %d, priority -5", s.Handle(), want, streamNonBlocking)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.priorityStream(0); err == nil || !strings.Contains(err.Error(), "out of memory (CUDA error 2)") {
		t.Errorf("a failing create: %v", err)
	}
	if _, err := open([]string{"libc.so.6"}); err == nil || !strings.Contains(err.Error(), "has no cudaSetDevice") {
		t.Errorf("a library that is not the runtime: %v", err)
	}
}
