// Package npy reads and writes NumPy .npy files of little-endian float32:
// the form image features and golden tensors travel in.
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The .npy format (numpy.lib.format): magic, version, header length, a
// Python dict literal padded with spaces to a multiple of 64 bytes and ended
// by '\n', then the raw array data.
const magic = "\x93NUMPY"

// maxHeader bounds the header a reader accepts (numpy writes ~118 bytes).
const maxHeader = 1 << 16

var (
	descrRe   = regexp.MustCompile(`['"]descr['"]\s*:\s*['"]([^'"]*)['"]`)
	fortranRe = regexp.MustCompile(`['"]fortran_order['"]\s*:\s*(True|False)`)
	shapeRe   = regexp.MustCompile(`['"]shape['"]\s*:\s*\(([^)]*)\)`)
)

// Read reads a little-endian float32 .npy array of any shape: its values
// flat, in C order, and its shape. Empty, truncated, oversized and malformed
// arrays are errors; a huge declared shape costs no memory up front.
func Read(r io.Reader) ([]float32, []int, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, nil, fmt.Errorf("not a .npy file: too short")
	}
	if string(pre[:6]) != magic {
		return nil, nil, fmt.Errorf("not a .npy file: no \\x93NUMPY magic")
	}
	var hlen int
	switch major := pre[6]; major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, nil, fmt.Errorf(".npy header truncated")
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, nil, fmt.Errorf(".npy header truncated")
		}
		v := binary.LittleEndian.Uint32(n[:])
		if v > maxHeader {
			return nil, nil, fmt.Errorf(".npy header of %d bytes is too long", v)
		}
		hlen = int(v)
	default:
		return nil, nil, fmt.Errorf(".npy format version %d.%d is not supported (1, 2 or 3)", major, pre[7])
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil, fmt.Errorf(".npy header truncated (want %d bytes)", hlen)
	}
	n, shape, err := parseHeader(string(hdr))
	if err != nil {
		return nil, nil, err
	}
	// Read at most n*4+1 bytes: a short read is a truncated array, an extra
	// byte is trailing data; a huge declared shape costs no memory up front.
	want := int64(n) * 4
	data, err := io.ReadAll(io.LimitReader(r, want+1))
	if err != nil {
		return nil, nil, fmt.Errorf(".npy data: %w", err)
	}
	if int64(len(data)) < want {
		return nil, nil, fmt.Errorf(".npy data truncated: %d bytes for %d float32 values (want %d)", len(data), n, want)
	}
	if int64(len(data)) > want {
		return nil, nil, fmt.Errorf(".npy has data after its %d float32 values", n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out, shape, nil
}

// parseHeader checks the header dict and returns the element count and
// the shape.
func parseHeader(h string) (int, []int, error) {
	h = strings.TrimRight(h, " \n\x00")
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(strings.TrimRight(h, ", "), "}") {
		return 0, nil, fmt.Errorf(".npy header %q is not a dict", clip(h))
	}
	m := descrRe.FindStringSubmatch(h)
	if m == nil {
		return 0, nil, fmt.Errorf(".npy header %q has no descr", clip(h))
	}
	switch m[1] {
	case "<f4":
	case "|f4", "=f4": // byte order irrelevant or native; the project runs little-endian only
	default:
		return 0, nil, fmt.Errorf(".npy dtype %q: want little-endian float32 ('<f4'); save with arr.astype('<f4')", m[1])
	}
	fo := fortranRe.FindStringSubmatch(h)
	if fo == nil {
		return 0, nil, fmt.Errorf(".npy header %q has no fortran_order", clip(h))
	}
	sm := shapeRe.FindStringSubmatch(h)
	if sm == nil {
		return 0, nil, fmt.Errorf(".npy header %q has no shape", clip(h))
	}
	n, big := 1, 0
	shape := []int{}
	for _, d := range strings.Split(sm[1], ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSuffix(d, "L"))
		if err != nil || v < 0 {
			return 0, nil, fmt.Errorf(".npy shape (%s) is not a tuple of sizes", sm[1])
		}
		if v == 0 {
			return 0, nil, fmt.Errorf(".npy array is empty (shape (%s))", sm[1])
		}
		if v > 1 {
			big++
		}
		if n > math.MaxInt32/v {
			return 0, nil, fmt.Errorf(".npy shape (%s) is too large", sm[1])
		}
		n *= v
		shape = append(shape, v)
	}
	if fo[1] == "True" && big > 1 {
		return 0, nil, fmt.Errorf(".npy array is in Fortran order; save a C-order array (np.ascontiguousarray)")
	}
	return n, shape, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Write writes v as a 1-D little-endian float32 .npy (version 1.0), as
// numpy.save would.
func Write(w io.Writer, v []float32) error {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", len(v))
	// magic(6) + version(2) + length(2) + header + '\n', padded to 64.
	total := 10 + len(header) + 1
	pad := (64 - total%64) % 64
	header += strings.Repeat(" ", pad) + "\n"
	var b bytes.Buffer
	b.Grow(10 + len(header) + 4*len(v))
	b.WriteString(magic)
	b.Write([]byte{1, 0})
	var hl [2]byte
	binary.LittleEndian.PutUint16(hl[:], uint16(len(header)))
	b.Write(hl[:])
	b.WriteString(header)
	var x [4]byte
	for _, f := range v {
		binary.LittleEndian.PutUint32(x[:], math.Float32bits(f))
		b.Write(x[:])
	}
	_, err := w.Write(b.Bytes())
	return err
}
