// Package outlock is an exclusive hold on an output directory, so that two
// autoui processes never write the same --out at once.
//
// The hold is an flock(2) on DIR/.lock: the kernel drops it when the process
// dies, so a killed run never leaves a stale lock. The file records the
// holder ("pid N on HOST" and its command) for the message a second process
// prints; the lock, not the content, is what excludes. The file is never
// removed (removing it would let two processes lock two different files of
// the same name), so whoever reads or clears the directory must skip File.
package outlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// File is the lock's name in an output directory.
const File = ".lock"

// ErrLocked is returned (wrapped) when another process holds the lock.
var ErrLocked = errors.New("in use")

// Lock is a held lock; Release drops it.
type Lock struct{ f *os.File }

// Acquire creates dir if missing and takes the lock on it without waiting.
// command names the caller (e.g. "autoui dataset"); it is recorded with the
// pid and host, and a refusal reads e.g. "D is in use by pid 1234 on
// host-a (another autoui dataset); wait for it to finish or use another
// --out".
func Acquire(dir, command string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, File), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, holderCmd := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if holderCmd == "" {
				holderCmd = command
			}
			return nil, fmt.Errorf("%s is %w by %s (another %s); wait for it to finish or use another --out", dir, ErrLocked, holder, holderCmd)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	rec := Holder() + "\n" + strings.TrimSpace(command) + "\n"
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(rec), 0)
	}
	return &Lock{f: f}, nil
}

// Holder is how this process is recorded: "pid N on HOST". In a container
// the pid is often 1 and the host the container's name; on a shared file
// system the host says which machine to look on.
func Holder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "an unknown host"
	}
	return "pid " + strconv.Itoa(os.Getpid()) + " on " + host
}

// readHolder reads the holder and its command from a lock file. A file from
// an older autoui holds only a pid; an empty one (the holder has not written
// it yet) says so.
func readHolder(f *os.File) (holder, command string) {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	lines := strings.SplitN(strings.TrimSpace(string(b[:n])), "\n", 3)
	holder = strings.TrimSpace(lines[0])
	if len(lines) > 1 {
		command = strings.TrimSpace(lines[1])
	}
	switch {
	case holder == "":
		holder = "another process"
	case !strings.HasPrefix(holder, "pid "):
		holder = "pid " + holder
	}
	return holder, command
}

// Release drops the lock; later calls, and calls on a nil Lock, do nothing.
// The file stays.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// ReadDir is os.ReadDir of an output directory without the lock file: what
// it holds, for the checks that it is empty or whose it is.
func ReadDir(dir string) ([]fs.DirEntry, error) {
	ents, err := os.ReadDir(dir)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return e.Name() == File }), err
}
