package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Memory is the process's memory after the measured runs.
type Memory struct {
	// PeakRSS is the resident-set high-water mark (VmHWM), in bytes.
	PeakRSS int64
	// RSS is the current resident set (VmRSS), in bytes.
	RSS int64
	// GoHeap is the live Go heap; GoSys all memory the Go runtime holds.
	GoHeap int64
	GoSys  int64
	// Native approximates memory outside the Go runtime — ONNX Runtime's
	// weights, arena and thread stacks: RSS minus what Go holds. onnxruntime_go
	// exposes no arena statistics, so this is the closest available figure.
	Native int64
}

// ReadMemory samples the process's memory. Peak RSS comes from
// /proc/self/status, falling back to getrusage.
func ReadMemory() Memory {
	var m Memory
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.GoHeap, m.GoSys = int64(ms.HeapAlloc), int64(ms.Sys)
	status, err := procStatus("/proc/self/status")
	if err == nil {
		m.PeakRSS, m.RSS = status["VmHWM"], status["VmRSS"]
	}
	if m.PeakRSS == 0 {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			m.PeakRSS = ru.Maxrss * 1024 // kilobytes on Linux
		}
	}
	if m.RSS > m.GoSys {
		m.Native = m.RSS - m.GoSys
	}
	return m
}

// procStatus reads the "Name:   123 kB" lines of a /proc status file, in bytes.
func procStatus(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if v, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = v * 1024
		}
	}
	return out, sc.Err()
}

// ResetPeakRSS restarts the resident-set high-water mark (VmHWM) at the
// current RSS, so a later ReadMemory gives the peak of what ran in between
// (Linux: writing 5 to /proc/self/clear_refs).
func ResetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}
