// Package atomicfile writes files so that a reader, or a later run after a
// crash or Ctrl-C, sees either the old content or the whole new content,
// never a torn file: the data goes to a temporary file in the same
// directory, is synced, and is renamed over the target.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is a file being written under a temporary name (a dot-file in the
// target's directory, which directory walkers skip); Commit puts it in place.
type File struct {
	*os.File
	path string
}

// Create starts writing path.
func Create(path string) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{File: tmp, path: path}, nil
}

// Commit syncs the file and renames it over the target. On error the target
// is untouched and the temporary file is gone.
func (f *File) Commit() error {
	err := f.Chmod(0o644)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// Abort drops the temporary file; the target is untouched. Safe after
// Commit (it then does nothing).
func (f *File) Abort() {
	if f.Close() == nil {
		os.Remove(f.Name())
	}
}

// Write creates or replaces path with what fill writes. On any error the
// target is left as it was and the temporary file is removed.
func Write(path string, fill func(w io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// WriteBytes is Write with a byte slice.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
