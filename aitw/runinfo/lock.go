package runinfo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the lock's name in an output directory.
const LockFile = ".lock"

// Lock is an exclusive hold on an output directory. It is an flock(2) on
// DIR/.lock: the kernel drops it when the process dies, so a killed run never
// leaves a stale lock, and the file holds the holder's pid for the message a
// second process prints.
type Lock struct{ f *os.File }

// ErrLocked is returned (wrapped) when another process holds the lock.
var ErrLocked = errors.New("in use")

// Acquire takes the lock on dir (which must exist) without waiting.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPid(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is %w by pid %s (another eval run); wait for it to finish or use another --out", dir, ErrLocked, holder)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// Record our pid for the next process's message; the lock, not the
	// content, is what excludes.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

func readPid(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if pid := strings.TrimSpace(string(b[:n])); pid != "" {
		return pid
	}
	return "?"
}

// Release drops the lock; later calls do nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}
