package runner

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cacheFiles lists the cache's entries (temporary files included).
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// An entry overwritten with other features of the same size, and a valid
// entry copied over another, fail their checksums: both are recomputed with
// one warning each and replaced, and the predictions use the right features.
func TestFeatureCacheDamagedEntryRecomputed(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	opts.Limit = 5
	fp := &fakePredictor{}
	if _, err := Run(context.Background(), fp, opts); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(fp.lastFeature)
	files := cacheFiles(t, opts.CacheDir)
	if len(files) != 5 {
		t.Fatalf("%d cache files, want 5", len(files))
	}
	// Same size, other floats: flip a byte in every feature.
	for _, f := range files[:1] {
		b, _ := os.ReadFile(f)
		for i := cacheHeader; i < len(b); i += 4 {
			b[i] ^= 0x40
		}
		os.WriteFile(f, b, 0o644)
	}
	b, _ := os.ReadFile(files[1])
	os.WriteFile(files[2], b, 0o644)

	rerun := func() (Summary, *fakePredictor, string) {
		var log bytes.Buffer
		o := opts
		o.OutDir, o.Progress, o.ProgressEvery = t.TempDir(), &log, 1<<62
		fp := &fakePredictor{}
		sum, err := Run(context.Background(), fp, o)
		if err != nil {
			t.Fatal(err)
		}
		return sum, fp, log.String()
	}
	sum, fp2, log := rerun()
	if sum.CacheDamaged != 2 || sum.CacheHits != 3 || fp2.vision != 2 {
		t.Fatalf("damaged %d, hits %d, vision %d; want 2, 3, 2", sum.CacheDamaged, sum.CacheHits, fp2.vision)
	}
	if n := strings.Count(log, "recomputing it"); n != 2 || !strings.Contains(log, "checksum mismatch") {
		t.Errorf("%d warnings, want 2:\n%s", n, log)
	}
	if fmt.Sprint(fp2.lastFeature) != want {
		t.Errorf("features %v, want %v", fp2.lastFeature, want)
	}
	// The recomputed entries replaced the damaged ones.
	if sum, fp3, log := rerun(); sum.CacheHits != 5 || fp3.vision != 0 || strings.Contains(log, "recomputing") {
		t.Errorf("third run: hits %d, vision %d, log %q", sum.CacheHits, fp3.vision, log)
	}
	// A truncated entry and one of an older autoui (no header) are damaged too.
	for _, b := range [][]byte{b[:len(b)-4], b[cacheHeader:]} {
		os.WriteFile(files[0], b, 0o644)
		if _, err := readFeatures(files[0]); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%d-byte entry: %v", len(b), err)
		}
	}
}

// A cache that cannot be written (a full disk, a cache directory that is
// not one) does not stop the run: one warning, every step predicted, no
// temporary file left.
func TestFeatureCacheWriteFailureGoesOn(t *testing.T) {
	defer func(w func(*os.File, []byte) (int, error)) { writeTemp = w }(writeTemp)
	writeTemp = func(*os.File, []byte) (int, error) { return 0, syscall.ENOSPC }
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	for _, c := range []struct{ name, cache, want string }{
		{"full disk", "", "no space left on device"},
		{"not a directory", filepath.Join(blocker, "cache"), "not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			opts := testOptions(t, out)
			if c.cache != "" {
				opts.CacheDir = c.cache
			}
			var log bytes.Buffer
			opts.Progress, opts.ProgressEvery, opts.Batch = &log, 1<<62, 4
			sum, err := Run(context.Background(), &fakePredictor{}, opts)
			if err != nil {
				t.Fatalf("run stopped: %v", err)
			}
			if sum.Predicted != 55 || !sum.CacheWriteFailed {
				t.Errorf("%d predicted, write failed %v", sum.Predicted, sum.CacheWriteFailed)
			}
			if n := strings.Count(log.String(), "without caching"); n != 1 || !strings.Contains(log.String(), c.want) {
				t.Errorf("%d warnings, want 1 naming %q:\n%s", n, c.want, log.String())
			}
			if c.cache == "" {
				if files := cacheFiles(t, opts.CacheDir); len(files) != 0 {
					t.Errorf("left %v", files)
				}
			}
		})
	}
}
