package outlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestExcludesAndNamesHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "autoui dataset")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	b, _ := os.ReadFile(filepath.Join(dir, File))
	if want := fmt.Sprintf("pid %d on %s\nautoui dataset\n", os.Getpid(), host); string(b) != want {
		t.Errorf("lock file holds %q, want %q", b, want)
	}
	_, err = Acquire(dir, "autoui run")
	want := fmt.Sprintf("%s is in use by pid %d on %s (another autoui dataset); wait for it to finish or use another --out", dir, os.Getpid(), host)
	if !errors.Is(err, ErrLocked) || err.Error() != want {
		t.Fatalf("second Acquire: %v\nwant: %s", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, File)); err != nil {
		t.Errorf("Release removed the lock file: %v", err)
	}
	l2, err := Acquire(dir, "autoui run")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
	l2.Release() // idempotent
	var nilLock *Lock
	nilLock.Release()
}

// An older autoui's lock file holds only the pid; the caller names the
// command.
func TestOldLockFile(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	os.WriteFile(filepath.Join(dir, File), []byte("4321\n"), 0o644)
	_, err = Acquire(dir, "autoui eval run")
	if err == nil || !strings.Contains(err.Error(), "in use by pid 4321 (another autoui eval run)") {
		t.Fatalf("%v", err)
	}
}

// Another process holding the lock is refused with its pid; killed, it
// leaves no stale lock.
func TestOtherProcess(t *testing.T) {
	if dir := os.Getenv("OUTLOCK_HOLD"); dir != "" {
		if _, err := Acquire(dir, "holder test"); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOtherProcess$")
	cmd.Env = append(os.Environ(), "OUTLOCK_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("holder: %q", line)
	}
	_, err = Acquire(dir, "autoui run")
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d on ", cmd.Process.Pid)) || !strings.Contains(err.Error(), "(another holder test)") {
		t.Fatalf("Acquire while another process holds it: %v", err)
	}
	cmd.Process.Kill() // SIGKILL: no chance to release
	cmd.Wait()
	l, err := Acquire(dir, "autoui run")
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}
