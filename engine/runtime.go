// Package engine runs Auto-UI bundles with ONNX Runtime: the runtime
// environment and sessions, the predictor pipeline (vision, encoder, fusion,
// decoder loop) and decoding.
package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// RequiredORTVersion is the ONNX Runtime release whose C API (version 29)
// onnxruntime_go v1.36.0 is built against.
const RequiredORTVersion = "1.29"

// LibraryEnv names the environment variable that points at libonnxruntime.so.
const LibraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// installedLibrary is where `make setup` puts the pinned library, relative to
// the project root.
var installedLibrary = filepath.Join("third_party", "onnxruntime", "lib", "libonnxruntime.so.1.29.0")

var (
	runtimeMu   sync.Mutex
	runtimePath string // the library the process environment was created with
)

// ErrRuntime wraps every failure to bring up ONNX Runtime.
var ErrRuntime = errors.New("onnx runtime")

// InitRuntime loads the ONNX Runtime shared library and creates the process
// environment, once per process. libPath may be empty: then $ONNXRUNTIME_SHARED_LIBRARY_PATH,
// then the project's own install (third_party/onnxruntime, searched upwards
// from the working directory and the executable) are tried. Calling it again
// with the same or an empty path is a no-op; with another path it is an error,
// because ONNX Runtime cannot be loaded twice into one process.
func InitRuntime(libPath string) error {
	runtimeMu.Lock()
	defer runtimeMu.Unlock()
	if runtimePath != "" {
		if libPath != "" && libPath != runtimePath {
			return fmt.Errorf("%w: already initialised with %s, cannot switch to %s in one process", ErrRuntime, runtimePath, libPath)
		}
		return nil
	}
	path, err := findLibrary(libPath)
	if err != nil {
		return err
	}
	// ORT 1.29 writes a telemetry store under ~/.cache unless told not to.
	if os.Getenv("ORT_DISABLE_TELEMETRY") == "" {
		os.Setenv("ORT_DISABLE_TELEMETRY", "1")
	}
	level, err := ortLogLevel(os.Getenv("AUTOUI_ORT_LOG"))
	if err != nil {
		return err
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(level); err != nil {
		return fmt.Errorf("%w: load %s: %v\n%s", ErrRuntime, path, err, installHint())
	}
	if err := checkVersion(ort.GetVersion()); err != nil {
		ort.DestroyEnvironment()
		return fmt.Errorf("%w: %s: %v\n%s", ErrRuntime, path, err, installHint())
	}
	if err := ort.DisableTelemetry(); err != nil {
		ort.DestroyEnvironment()
		return fmt.Errorf("%w: disable telemetry: %v", ErrRuntime, err)
	}
	runtimePath = path
	return nil
}

// ortLogLevel is ONNX Runtime's own log level, from $AUTOUI_ORT_LOG:
// fatal by default, since every error ORT logs it also returns, and autoui
// reports that in one line (ORT's log line, coloured, came on top of it);
// verbose, info, warning or error show ORT's log on stderr, to diagnose it.
func ortLogLevel(name string) (ort.EnvironmentOption, error) {
	switch strings.ToLower(name) {
	case "", "fatal":
		return ort.WithLogLevelFatal(), nil
	case "error":
		return ort.WithLogLevelError(), nil
	case "warning":
		return ort.WithLogLevelWarning(), nil
	case "info":
		return ort.WithLogLevelInfo(), nil
	case "verbose":
		return ort.WithLogLevelVerbose(), nil
	}
	return nil, fmt.Errorf("%w: AUTOUI_ORT_LOG=%q: want verbose, info, warning, error or fatal", ErrRuntime, name)
}

// RuntimeVersion returns the loaded ONNX Runtime version ("" before InitRuntime).
func RuntimeVersion() string {
	runtimeMu.Lock()
	defer runtimeMu.Unlock()
	if runtimePath == "" {
		return ""
	}
	return ort.GetVersion()
}

func installHint() string {
	return "autoui needs ONNX Runtime " + RequiredORTVersion + ".x (C API 29, for onnxruntime_go v1.36.0): run `make setup-ort`, " +
		"or set " + LibraryEnv + " / --ort-lib to a libonnxruntime.so " + RequiredORTVersion + ".x " +
		"(npm onnxruntime-node@1.29.0 bin/napi-v6/linux/x64/libonnxruntime.so.1, or the onnxruntime==1.29.0 wheel's onnxruntime/capi/libonnxruntime.so.1.29.0)"
}

// checkVersion accepts 1.29.x only: other releases either lack API 29 or
// have not been validated against our parity tests.
func checkVersion(v string) error {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return fmt.Errorf("unrecognised ONNX Runtime version %q", v)
	}
	if _, err := strconv.Atoi(parts[1]); err != nil {
		return fmt.Errorf("unrecognised ONNX Runtime version %q", v)
	}
	if parts[0]+"."+parts[1] != RequiredORTVersion {
		return fmt.Errorf("found ONNX Runtime %s, need %s.x", v, RequiredORTVersion)
	}
	return nil
}

func findLibrary(explicit string) (string, error) {
	if explicit != "" {
		return existing(explicit, "--ort-lib")
	}
	if env := os.Getenv(LibraryEnv); env != "" {
		return existing(env, "$"+LibraryEnv)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			cand := filepath.Join(dir, installedLibrary)
			if st, err := os.Stat(cand); err == nil && !st.IsDir() {
				return cand, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: libonnxruntime not found (looked at --ort-lib, $%s, and %s above %s)\n%s",
		ErrRuntime, LibraryEnv, installedLibrary, strings.Join(starts, ", "), installHint())
}

func existing(path, from string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s: %v\n%s", ErrRuntime, from, path, err, installHint())
	}
	if st.IsDir() {
		return "", fmt.Errorf("%w: %s %s is a directory, want the libonnxruntime.so file\n%s", ErrRuntime, from, path, installHint())
	}
	return path, nil
}

// Provider is an ONNX Runtime execution provider.
type Provider string

// Supported execution providers.
const (
	ProviderCPU  Provider = "cpu"
	ProviderCUDA Provider = "cuda"
)

// ParseProvider reads a --provider flag value.
func ParseProvider(s string) (Provider, error) {
	switch p := Provider(strings.ToLower(s)); p {
	case "", ProviderCPU:
		return ProviderCPU, nil
	case ProviderCUDA:
		return p, nil
	}
	return "", fmt.Errorf("unknown execution provider %q (want cpu or cuda)", s)
}

// GraphOptimization is ONNX Runtime's graph optimisation level.
type GraphOptimization string

// Graph optimisation levels, as ONNX Runtime names them.
const (
	OptimizeDisabled GraphOptimization = "disabled"
	OptimizeBasic    GraphOptimization = "basic"
	OptimizeExtended GraphOptimization = "extended"
	OptimizeAll      GraphOptimization = "all"
)

// Spin is whose ONNX Runtime worker threads spin-wait between operators
// instead of sleeping: the --spin flag's off, decoder or on.
type Spin int

const (
	// SpinOff: none (the default). On shared cores spinning made evaluation
	// 1.8-2.7x slower, and on a quiet machine it gained at most a few
	// percent (docs/eval.md).
	SpinOff Spin = iota
	// SpinDecoder: only the decoder session's, whose calls come back to
	// back, while every session spinning after its one run per action
	// steals the cores from the next (base, quiet machine: decoder calls 12%
	// faster, text path 5%; docs/decoding.md).
	SpinDecoder
	// SpinOn: every session's.
	SpinOn
)

// ParseSpin reads "off", "decoder" or "on".
func ParseSpin(s string) (Spin, error) {
	for sp := SpinOff; sp <= SpinOn; sp++ {
		if s == sp.String() {
			return sp, nil
		}
	}
	return 0, fmt.Errorf("unknown spin %q (want off, decoder or on)", s)
}

func (s Spin) String() string {
	switch s {
	case SpinDecoder:
		return "decoder"
	case SpinOn:
		return "on"
	}
	return "off"
}

// SessionOptions configure every session a predictor opens.
type SessionOptions struct {
	// IntraOpThreads is the thread count inside one operator; 0 means the
	// number of physical cores (hyperthreads do not help bandwidth-bound
	// decoding and hurt the compute-bound encoder).
	IntraOpThreads int
	// GraphOptimization defaults to OptimizeAll.
	GraphOptimization GraphOptimization
	// DisableMemArena turns off ORT's CPU arena allocator (lower peak RSS,
	// more allocation per run).
	DisableMemArena bool
	// Spin says whose worker threads spin-wait between operators (default
	// SpinOff).
	Spin Spin
	// DisableMemPattern turns off ORT's memory-pattern planning (one block
	// per run, planned per set of input shapes; the decoder's shapes change
	// on every call).
	DisableMemPattern bool
	// DisablePrepacking keeps every weight in its initializer's layout:
	// kernels otherwise repack some (MatMul's B) into a copy of their own.
	DisablePrepacking bool
	// Provider is cpu (default) or cuda.
	Provider Provider
	// CUDADevice is the GPU ordinal for the cuda provider.
	CUDADevice int
	// TF32 lets cuda run float32 matmuls and convolutions in TF32 (ORT's
	// own default): up to 4x faster in large batches, but outputs that
	// differ from the CPU's, and from one batch size to another, on a few
	// steps in a thousand. Off (the default here, as PyTorch's for matmuls)
	// the cuda outputs are the CPU's. The cpu provider has no TF32.
	TF32 bool
	// Profile, when set, has ORT profile every node of every model graph:
	// Profile-<role>_<time>.json, written when the predictor closes.
	Profile string
}

func (o SessionOptions) threads() int {
	if o.IntraOpThreads > 0 {
		return o.IntraOpThreads
	}
	return PhysicalCores()
}

func (o SessionOptions) build() (*ort.SessionOptions, error) { return o.buildCapture(false, 0) }

// buildCapture is build, with the cuda provider's CUDA-graph capture on
// when capture is set (for the static decoder's session only: capture needs
// fixed shapes and bound buffers, which only that decode keeps), and its
// kernels on a stream of the caller's when stream is not 0 (a cudaStream_t:
// Options.DecodePriority).
func (o SessionOptions) buildCapture(capture bool, stream uintptr) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	fail := func(what string, err error) (*ort.SessionOptions, error) {
		so.Destroy()
		return nil, fmt.Errorf("session options: %s: %w", what, err)
	}
	if o.IntraOpThreads < 0 {
		return fail("intra-op threads", fmt.Errorf("%d: want 0 (one per physical core) or more", o.IntraOpThreads))
	}
	if err := so.SetIntraOpNumThreads(o.threads()); err != nil {
		return fail("intra-op threads", err)
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		return fail("inter-op threads", err)
	}
	level := ort.GraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll)
	switch o.GraphOptimization {
	case "", OptimizeAll:
	case OptimizeExtended:
		level = ort.GraphOptimizationLevelEnableExtended
	case OptimizeBasic:
		level = ort.GraphOptimizationLevelEnableBasic
	case OptimizeDisabled:
		level = ort.GraphOptimizationLevelDisableAll
	default:
		return fail("graph optimisation", fmt.Errorf("unknown level %q (disabled, basic, extended, all)", o.GraphOptimization))
	}
	if err := so.SetGraphOptimizationLevel(level); err != nil {
		return fail("graph optimisation", err)
	}
	if err := so.SetCpuMemArena(!o.DisableMemArena); err != nil {
		return fail("memory arena", err)
	}
	if err := so.SetMemPattern(!o.DisableMemPattern); err != nil {
		return fail("memory pattern", err)
	}
	if o.DisablePrepacking {
		if err := so.AddSessionConfigEntry("session.disable_prepacking", "1"); err != nil {
			return fail("prepacking", err)
		}
	}
	if o.Spin != SpinOn {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return fail("spinning", err)
		}
	}
	switch o.Provider {
	case "", ProviderCPU:
	case ProviderCUDA:
		cuda, err := ort.NewCUDAProviderOptions()
		if err != nil {
			return fail("cuda provider", cudaError(err))
		}
		defer cuda.Destroy()
		opts := map[string]string{"device_id": strconv.Itoa(o.CUDADevice)}
		if !o.TF32 {
			opts["use_tf32"] = "0"
		}
		if capture {
			opts["enable_cuda_graph"] = "1"
		}
		if stream != 0 {
			opts["has_user_compute_stream"] = "1"
			opts["user_compute_stream"] = strconv.FormatUint(uint64(stream), 10)
		}
		if err := cuda.Update(opts); err != nil {
			return fail("cuda provider", cudaError(err))
		}
		if err := so.AppendExecutionProviderCUDA(cuda); err != nil {
			return fail("cuda provider", cudaError(err))
		}
	default:
		return fail("provider", fmt.Errorf("unknown execution provider %q", o.Provider))
	}
	return so, nil
}

// PhysicalCores counts distinct (package, core) pairs in sysfs, falling back
// to the logical CPU count.
func PhysicalCores() int {
	cores := map[string]bool{}
	cpus, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology")
	for _, topo := range cpus {
		pkg, err1 := os.ReadFile(filepath.Join(topo, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(topo, "core_id"))
		if err1 != nil || err2 != nil {
			continue
		}
		cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	n := len(cores)
	if n == 0 || n > runtime.NumCPU() {
		n = runtime.NumCPU()
	}
	return n
}

// cudaError says why the CUDA provider could not start in the user's terms:
// ORT's own message starts with its source file and function.
func cudaError(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, " : "); i >= 0 {
		msg = msg[i+3:]
	}
	if strings.Contains(msg, "providers_shared") || strings.Contains(msg, "providers_cuda") {
		return errors.New("this ONNX Runtime library has no CUDA provider (it is the CPU build): install the CUDA build with `make setup-cuda`, see docs/cuda.md")
	}
	return fmt.Errorf("%s (is a GPU present, and are the CUDA 13 and cuDNN 9 libraries on the loader path? see docs/cuda.md)", msg)
}
