package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/engine/preprocess"
)

// hostileScreen writes a small PNG whose header claims w x h RGBA pixels
// (the decompression-bomb header that used to kill predict with "fatal
// error: runtime: out of memory").
func hostileScreen(t *testing.T, w, h uint32) string {
	t.Helper()
	chunk := func(typ string, data []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		b = append(b, typ...)
		b = append(b, data...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	data := []byte("\x89PNG\r\n\x1a\n")
	data = append(data, chunk("IHDR", ihdr)...)
	data = append(data, chunk("IDAT", z.Bytes())...)
	data = append(data, chunk("IEND", nil)...)
	path := filepath.Join(t.TempDir(), "hostile.png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// childEnv makes the test binary run autoui's main with the arguments it
// holds (a JSON array) instead of the tests.
const childEnv = "AUTOUI_PREDICT_IMAGE_CHILD"

func TestPredictImageChild(t *testing.T) {
	args := os.Getenv(childEnv)
	if args == "" {
		t.Skip("runs only as the child of TestPredictHostileScreenExits")
	}
	var list []string
	if err := json.Unmarshal([]byte(args), &list); err != nil {
		t.Fatal(err)
	}
	os.Args = append([]string{"autoui"}, list...)
	main() // exits
}

// The whole CLI path, as a user runs it: a hostile header ends predict with
// exit status 1 and a one-line error, not a runtime crash and stack dump.
func TestPredictHostileScreenExits(t *testing.T) {
	screen := hostileScreen(t, 200000, 200000)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestPredictImageChild$")
	args, _ := json.Marshal([]string{"predict", "--model", tinyBundle, "--screen", screen, "--goal", "open settings"})
	cmd.Env = append(os.Environ(), childEnv+"="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\nstderr: %s", err, stderr.String())
	}
	msg := strings.TrimRight(stderr.String(), "\n")
	if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") || strings.Contains(msg, "fatal error") {
		t.Errorf("want a one-line error, got:\n%s", msg)
	}
	for _, want := range []string{"autoui predict: screen: ", screen, "200000x200000", "limit of 40000000", "--max-pixels"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout: %s", stdout.String())
	}
}

func TestPredictMaxPixelsFlag(t *testing.T) {
	screen := hostileScreen(t, 1000, 1000)
	run := func(extra ...string) error {
		args := append([]string{"--model", tinyBundle, "--screen", screen, "--goal", "x"}, extra...)
		_, err := captureStdout(t, func() error { return runPredict(context.Background(), args) })
		return err
	}
	// 1 Mpx is under the default cap: the decode runs and fails on the
	// missing pixel data.
	if err := run(); err == nil || errors.Is(err, preprocess.ErrTooLarge) {
		t.Errorf("default cap: %v, want a decode error", err)
	}
	if err := run("--max-pixels", "999999"); !errors.Is(err, preprocess.ErrTooLarge) || !strings.Contains(err.Error(), "limit of 999999") {
		t.Errorf("--max-pixels 999999: %v", err)
	}
	if err := run("--max-pixels", "1000000"); err == nil || errors.Is(err, preprocess.ErrTooLarge) {
		t.Errorf("--max-pixels 1000000: %v, want a decode error", err)
	}
	if err := run("--max-pixels", "-1"); exitCode(err) != exitUsage {
		t.Errorf("--max-pixels -1: %v (exit %d), want a usage error", err, exitCode(err))
	}
}
