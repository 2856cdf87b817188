package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autoui/autoui/outlock"
)

// While another process writes --out, `autoui dataset` is refused, naming
// it, and deletes nothing, --overwrite or not.
func TestDatasetRefusesAHeldOut(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ds")
	args := []string{"--out", out, "--episodes", "2", "--seed", "6", "--size", "90x200", "--families", "open_app"}
	if _, err := captureStdout(t, func() error { return runDataset(context.Background(), args) }); err != nil {
		t.Fatal(err)
	}
	lock, err := outlock.Acquire(out, "autoui dataset")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	host, _ := os.Hostname()
	want := fmt.Sprintf("%s is in use by pid %d on %s (another autoui dataset); wait for it to finish or use another --out", out, os.Getpid(), host)
	for _, a := range [][]string{args, append(args, "--overwrite"), {"--out", out, "--episodes", "3", "--overwrite"}} {
		_, err := captureStdout(t, func() error { return runDataset(context.Background(), a) })
		if !errors.Is(err, outlock.ErrLocked) || !strings.Contains(err.Error(), want) {
			t.Fatalf("dataset %v on a held --out: %v\nwant: %s", a, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "dataset.json")); err != nil {
		t.Fatalf("a refused --overwrite removed the dataset: %v", err)
	}
}

// A dataset killed before its dataset.json is named as one on the rerun.
func TestDatasetAfterKilledRun(t *testing.T) {
	out := t.TempDir()
	os.MkdirAll(filepath.Join(out, "train"), 0o755)
	os.WriteFile(filepath.Join(out, "train", ".open_app.tfrecord.gz.tmp-42"), []byte("torn"), 0o644)
	args := []string{"--out", out, "--episodes", "2", "--seed", "6", "--size", "90x200", "--families", "open_app"}
	_, err := captureStdout(t, func() error { return runDataset(context.Background(), args) })
	if err == nil || !strings.Contains(err.Error(), "looks like an interrupted dataset") || !strings.Contains(err.Error(), "--overwrite to start over") {
		t.Fatalf("rerun after a killed dataset: %v", err)
	}
	if _, err := captureStdout(t, func() error { return runDataset(context.Background(), append(args, "--overwrite")) }); err != nil {
		t.Fatal(err)
	}
}
