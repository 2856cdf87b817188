// Package cudart makes CUDA streams of the highest priority, through the
// CUDA runtime that ONNX Runtime's CUDA provider loads (libcudart), found at
// run time: autoui builds and runs without CUDA, and asks for a stream only
// under the cuda provider.
//
// A session given such a stream (ORT's user_compute_stream) has its kernels
// dispatched ahead of other streams' waiting work as SMs free up: a
// decoder's chain of small kernels then keeps its pace beside a vision
// tower's large ones instead of queueing behind each of them.
package cudart

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef int (*autoui_set_fn)(int device);
typedef int (*autoui_range_fn)(int *least, int *greatest);
typedef int (*autoui_create_fn)(void **stream, unsigned int flags, int priority);
typedef int (*autoui_destroy_fn)(void *stream);
typedef const char *(*autoui_errstr_fn)(int err);

// autoui_priority_stream makes a stream of the device's highest priority in
// one call, so on one thread: the device is the calling thread's. *step
// says which call failed (0 set device, 1 range, 2 create).
static int autoui_priority_stream(void *set, void *range, void *create, int device, unsigned int flags,
                                  void **stream, int *step) {
	int least, greatest, err;
	*step = 0;
	if ((err = ((autoui_set_fn)set)(device)) != 0) return err;
	*step = 1;
	if ((err = ((autoui_range_fn)range)(&least, &greatest)) != 0) return err;
	*step = 2;
	return ((autoui_create_fn)create)(stream, flags, greatest);
}
static int autoui_destroy(void *f, void *stream) { return ((autoui_destroy_fn)f)(stream); }
static const char *autoui_errstr(void *f, int err) { return ((autoui_errstr_fn)f)(err); }
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// libraries are the runtime's names, newest first (ORT 1.29's CUDA build
// links libcudart.so.13).
var libraries = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so"}

// runtime is the loaded library's entry points.
type runtime struct {
	setDevice, rangeFn, create, destroy, errstr unsafe.Pointer
}

var (
	loadOnce sync.Once
	loaded   *runtime
	loadErr  error
)

// load opens the runtime once.
func load() (*runtime, error) {
	loadOnce.Do(func() { loaded, loadErr = open(libraries) })
	return loaded, loadErr
}

// open opens the first of names that loads and finds its entry points.
func open(names []string) (*runtime, error) {
	var tried []string
	for _, name := range names {
		cname := C.CString(name)
		h := C.dlopen(cname, C.RTLD_NOW|C.RTLD_LOCAL)
		C.free(unsafe.Pointer(cname))
		if h == nil {
			tried = append(tried, C.GoString(C.dlerror()))
			continue
		}
		r := &runtime{}
		for _, s := range []struct {
			name string
			dst  *unsafe.Pointer
		}{{"cudaSetDevice", &r.setDevice}, {"cudaDeviceGetStreamPriorityRange", &r.rangeFn}, {"cudaStreamCreateWithPriority", &r.create},
			{"cudaStreamDestroy", &r.destroy}, {"cudaGetErrorString", &r.errstr}} {
			cs := C.CString(s.name)
			*s.dst = C.dlsym(h, cs)
			C.free(unsafe.Pointer(cs))
			if *s.dst == nil {
				return nil, fmt.Errorf("CUDA runtime %s has no %s", name, s.name)
			}
		}
		return r, nil
	}
	return nil, fmt.Errorf("no CUDA runtime library (%s)", strings.Join(tried, "; "))
}

func (r *runtime) check(what string, code C.int) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (CUDA error %d)", what, C.GoString(C.autoui_errstr(r.errstr, code)), int(code))
}

// Stream is a CUDA stream made by NewPriorityStream.
type Stream struct {
	rt     *runtime
	handle unsafe.Pointer
}

// cudaStreamNonBlocking: the stream does not wait for the legacy default
// stream (ORT's own streams are made so too).
const streamNonBlocking = 0x01

// NewPriorityStream makes a non-blocking stream of the highest priority on
// the given GPU. It fails with a clear error where no CUDA runtime can be
// loaded (a machine without CUDA).
func NewPriorityStream(device int) (*Stream, error) {
	rt, err := load()
	if err != nil {
		return nil, fmt.Errorf("priority stream: %w", err)
	}
	return rt.priorityStream(device)
}

func (rt *runtime) priorityStream(device int) (*Stream, error) {
	s := &Stream{rt: rt}
	var step C.int
	code := C.autoui_priority_stream(rt.setDevice, rt.rangeFn, rt.create, C.int(device), streamNonBlocking, &s.handle, &step)
	what := [...]string{fmt.Sprintf("priority stream: device %d", device), "priority stream: priority range", "priority stream"}[step]
	if err := rt.check(what, code); err != nil {
		return nil, err
	}
	return s, nil
}

// Handle is the stream's cudaStream_t as an integer: ORT's
// user_compute_stream option takes it in decimal.
func (s *Stream) Handle() uintptr { return uintptr(s.handle) }

// Close destroys the stream once the sessions using it are closed;
// closing twice, or a nil stream, is fine.
func (s *Stream) Close() error {
	if s == nil || s.handle == nil {
		return nil
	}
	err := s.rt.check("destroy priority stream", C.autoui_destroy(s.rt.destroy, s.handle))
	s.handle = nil
	return err
}
