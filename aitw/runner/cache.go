package runner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/autoui/autoui/aitw"
)

// cachePath is DIR/ab/abcdef...f32, the hash covering the cache key, the
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
	return filepath.Join(dir, name[:2], name+".f32")
}

func readFeatures(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b)%4 != 0 {
		return nil, fmt.Errorf("feature cache %s: bad size %d", path, len(b))
	}
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f, nil
}

// writeFeatures writes atomically (temp file + rename), so a killed run never
// leaves a partial entry. Unlike atomicfile it does not fsync: a cache entry
// lost in a power cut is recomputed, and a sync per screen would cost more
// than the cache saves on small models.
func writeFeatures(path string, f []float32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("feature cache: %w", err)
	}
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("feature cache: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("feature cache: %w", err)
	}
	return nil
}
