package runner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/autoui/autoui/aitw"
)

// A cache entry is a 12-byte header, then the features as little-endian
// float32: the magic, the number of floats and a CRC32-C of the entry's
// name (its key hash) and the floats. The name in the checksum catches an
// entry copied over another of the same size, the CRC any changed byte.
const (
	cacheMagic  = "AUF1"
	cacheHeader = 12
	cacheExt    = ".feat" // not the unchecked .f32 files of older versions
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// featureCache holds the vision features of screens, one file per screen.
// It is an optimisation: a damaged entry is recomputed, and when an entry
// cannot be written (a full disk, a read-only directory) the run goes on
// without writing more; both say so once through warn.
type featureCache struct {
	dir, key  string
	warn      func(string)
	sum       *Summary
	writeFail error // the first failed write; nothing is written after it
}

// lookup is what the cache holds for one screen.
type lookup struct {
	features []float32 // nil: not cached
	path     string    // where computed features go ("" on a hit)
	damaged  error     // the entry at path failed its checksum
}

// find looks s up: its cached features, or the path computed ones should
// be stored at. It changes nothing, so the read-ahead runs it for many
// steps at once, away from the run's goroutine; count records the outcome.
func (c *featureCache) find(s aitw.Step) lookup {
	path := cachePath(c.dir, c.key, s)
	f, err := readFeatures(path)
	switch {
	case err == nil:
		return lookup{features: f}
	case errors.Is(err, errDamaged):
		return lookup{path: path, damaged: err}
	}
	return lookup{path: path}
}

// count adds a lookup to the summary (on the run's goroutine).
func (c *featureCache) count(l lookup) {
	switch {
	case l.features != nil:
		c.sum.CacheHits++
	case l.damaged != nil:
		c.sum.CacheDamaged++
		c.warn(fmt.Sprintf("feature cache: %v; recomputing it", l.damaged))
	}
}

// store writes an entry, unless an earlier write failed.
func (c *featureCache) store(path string, f []float32) {
	if c.writeFail != nil {
		return
	}
	if err := writeFeatures(path, f); err != nil {
		c.writeFail = err
		c.sum.CacheWriteFailed = true
		c.warn(fmt.Sprintf("%v; going on without caching new features", err))
	}
}

// cachePath is DIR/ab/abcdef....feat, the hash covering the cache key, the
// image shape and the pixels.
func cachePath(dir, key string, s aitw.Step) string {
	h := sha256.New()
	var hdr [12]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(s.Height))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(s.Width))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(s.Channels))
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(hdr[:])
	h.Write(s.Pixels)
	name := hex.EncodeToString(h.Sum(nil))
	return filepath.Join(dir, name[:2], name+cacheExt)
}

// errDamaged marks an entry whose content is not what was written.
var errDamaged = errors.New("damaged")

func entryChecksum(path string, payload []byte) uint32 {
	name := strings.TrimSuffix(filepath.Base(path), cacheExt)
	return crc32.Update(crc32.Checksum([]byte(name), castagnoli), castagnoli, payload)
}

func readFeatures(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(why string) error { return fmt.Errorf("%s is %w (%s)", path, errDamaged, why) }
	if len(b) < cacheHeader || string(b[:4]) != cacheMagic {
		return nil, bad("no header")
	}
	n := binary.LittleEndian.Uint32(b[4:])
	payload := b[cacheHeader:]
	if n == 0 || uint64(len(payload)) != 4*uint64(n) {
		return nil, bad(fmt.Sprintf("%d bytes for %d features", len(payload), n))
	}
	if binary.LittleEndian.Uint32(b[8:]) != entryChecksum(path, payload) {
		return nil, bad("checksum mismatch")
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(payload[4*i:]))
	}
	return f, nil
}

// writeTemp writes an entry's bytes; tests replace it to fail as a full
// disk does.
var writeTemp = func(f *os.File, b []byte) (int, error) { return f.Write(b) }

// writeFeatures writes atomically (temp file + rename), so a killed run never
// leaves a partial entry. Unlike atomicfile it does not fsync: an entry
// lost or torn in a power cut fails its checksum and is recomputed, and a
// sync per screen would cost more than the cache saves on small models.
func writeFeatures(path string, f []float32) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("feature cache: cannot write %s: %w", dir, unwrapPath(err))
	}
	b := make([]byte, cacheHeader+4*len(f))
	payload := b[cacheHeader:]
	for i, v := range f {
		binary.LittleEndian.PutUint32(payload[4*i:], math.Float32bits(v))
	}
	copy(b, cacheMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(f)))
	binary.LittleEndian.PutUint32(b[8:], entryChecksum(path, payload))
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("feature cache: cannot write %s: %w", dir, unwrapPath(err))
	}
	_, err = writeTemp(tmp, b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("feature cache: cannot write %s: %w", dir, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops a *PathError's repetition of the path the message
// already names ("no space left on device", not "write /x/.tmp-1: ...").
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
