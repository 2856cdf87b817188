package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("new content")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new content" {
		t.Errorf("content %q", b)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	assertOnly(t, dir, "f.txt")
}

// A writer that fails half-way leaves the old file and no temporary file.
func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("content %q", b)
	}
	assertOnly(t, dir, "f.txt")
}

func TestWriteMissingDir(t *testing.T) {
	if err := WriteBytes(filepath.Join(t.TempDir(), "no", "f"), nil); err == nil {
		t.Error("wrote into a missing directory")
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(names) {
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		t.Errorf("dir holds %v, want %v", got, names)
	}
}

// A link is written through and stays a link; what is not a regular file
// (a directory, a FIFO, a device) is refused and left as it was.
func TestWriteThroughLinksRefuseOthers(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.txt")
	link := filepath.Join(dir, "link.txt")
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a %v", fi.Mode())
	}
	if b, _ := os.ReadFile(real); string(b) != "new" {
		t.Errorf("through the link: %q", b)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	toDev := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", toDev); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("nowhere/x", dangling); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{dir: "a directory", fifo: "a FIFO", toDev: "not a regular file", dangling: "nowhere"} {
		before, _ := os.Lstat(path)
		err := WriteBytes(path, []byte("x"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", path, err, want)
		}
		if after, _ := os.Lstat(path); after.Mode() != before.Mode() {
			t.Errorf("%s: %v became %v", path, before.Mode(), after.Mode())
		}
	}
	assertOnly(t, dir, "real.txt", "link.txt", "fifo", "null", "dangling")
	// Check says the same before any work, and refuses a missing directory
	for _, ok := range []string{real, link, filepath.Join(dir, "new.txt")} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%s): %v", ok, err)
		}
	}
	for _, bad := range []string{dir, fifo, toDev, filepath.Join(dir, "no", "x.txt")} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%s) passed", bad)
		}
	}
}
