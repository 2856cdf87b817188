// Package atomicfile writes files so that a reader, or a later run after a
// crash or Ctrl-C, sees either the old content or the whole new content,
// never a torn file: the data goes to a temporary file in the same
// directory, is synced, and is renamed over the target.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a file being written under a temporary name (a dot-file in the
// target's directory, which directory walkers skip); Commit puts it in place.
type File struct {
	*os.File
	path string
}

// Create starts writing path. A path that is a symbolic link writes the
// file it points to, and the link stays; a path that is not a regular file
// (a directory, a FIFO, a device such as /dev/stdout's) is refused, since
// renaming over it would replace it rather than write to it.
func Create(path string) (*File, error) {
	path, err := target(path)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{File: tmp, path: path}, nil
}

// Check says, before any work, whether Create could write path: its
// directory exists, and it is nothing yet, a regular file or a link to one.
func Check(path string) error {
	if _, err := target(path); err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("write %s: no directory %s to write it in", path, filepath.Dir(path))
	}
	return nil
}

// target is the file a write to path replaces: path, or where its links
// lead.
func target(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, nil
	case err != nil:
		return "", fmt.Errorf("write %s: %w", path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		if fi, err = os.Stat(real); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("write %s: it leads to %s, which is not a regular file", path, real)
		}
		return real, nil
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("write %s: not a regular file (%s)", path, kind(fi.Mode()))
	}
	return path, nil
}

// kind names a file mode's type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
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
