package npy

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"
)

// npyBytes builds a v1.0 .npy file with the given header dict and data.
func npyBytes(header string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	b.Write([]byte{1, 0})
	h := header + "\n"
	var n [2]byte
	binary.LittleEndian.PutUint16(n[:], uint16(len(h)))
	b.Write(n[:])
	b.WriteString(h)
	b.Write(data)
	return b.Bytes()
}

func f32bytes(v ...float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func TestNpyRoundTrip(t *testing.T) {
	for _, v := range [][]float32{{1}, {0.5, -2, 3.25}, make([]float32, 1408)} {
		var b bytes.Buffer
		if err := Write(&b, v); err != nil {
			t.Fatal(err)
		}
		if (b.Len()-4*len(v))%64 != 0 {
			t.Errorf("header not padded to 64 bytes: %d", b.Len()-4*len(v))
		}
		got, err := readFlat(&b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(v) {
			t.Fatalf("%d values back, want %d", len(got), len(v))
		}
		for i := range v {
			if got[i] != v[i] {
				t.Fatalf("[%d] = %v, want %v", i, got[i], v[i])
			}
		}
	}
	// numpy's own header for np.zeros((1, 2), '<f4'), and a v2.0 file.
	two := npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", f32bytes(1, 2))
	if got, err := readFlat(bytes.NewReader(two)); err != nil || len(got) != 2 || got[1] != 2 {
		t.Fatalf("(1, 2): %v %v", got, err)
	}
	v2 := append([]byte(magic), 2, 0, 0, 0, 0, 0)
	h := "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n"
	binary.LittleEndian.PutUint32(v2[8:], uint32(len(h)))
	v2 = append(append(v2, h...), f32bytes(7)...)
	if got, err := readFlat(bytes.NewReader(v2)); err != nil || len(got) != 1 || got[0] != 7 {
		t.Fatalf("v2.0: %v %v", got, err)
	}
}

func TestNpyRejects(t *testing.T) {
	const hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }"
	shape := func(s string) string { return strings.Replace(hdr, "%s", s, 1) }
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty file":     {nil, "too short"},
		"not npy":        {[]byte("PK\x03\x04 zip file"), "magic"},
		"bad version":    {append([]byte(magic), 9, 0, 0, 0), "version 9.0"},
		"short header":   {append([]byte(magic), 1, 0, 200, 0, '{'), "header truncated"},
		"empty array":    {npyBytes(shape("0,"), nil), "empty"},
		"empty 2-D":      {npyBytes(shape("1, 0"), nil), "empty"},
		"truncated":      {npyBytes(shape("3,"), f32bytes(1, 2)), "truncated"},
		"trailing":       {npyBytes(shape("1,"), f32bytes(1, 2)), "after"},
		"float64":        {npyBytes(strings.Replace(shape("1,"), "<f4", "<f8", 1), make([]byte, 8)), "float32"},
		"big-endian":     {npyBytes(strings.Replace(shape("1,"), "<f4", ">f4", 1), f32bytes(1)), "float32"},
		"no shape":       {npyBytes("{'descr': '<f4', 'fortran_order': False}", f32bytes(1)), "no shape"},
		"bad shape":      {npyBytes(shape("a,"), f32bytes(1)), "not a tuple"},
		"negative shape": {npyBytes(shape("-1,"), f32bytes(1)), "not a tuple"},
		"huge shape":     {npyBytes(shape("100000, 100000"), f32bytes(1)), "too large"},
		"not a dict":     {npyBytes("hello", f32bytes(1)), "not a dict"},
		"fortran 2-D":    {npyBytes(strings.Replace(shape("2, 2"), "False", "True", 1), f32bytes(1, 2, 3, 4)), "Fortran"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readFlat(bytes.NewReader(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
		})
	}
}

// The reader never panics, never returns an empty array, and
// what it accepts writes back to the same values.
func FuzzReadNpy(f *testing.F) {
	const hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }"
	for _, c := range []struct {
		shape string
		data  []byte
	}{{"2,", f32bytes(1, 2)}, {"0,", nil}, {"1, 2", f32bytes(3, 4)}, {"3,", f32bytes(1)}, {"", f32bytes(5)},
		{"1,", f32bytes(float32(math.NaN()))}, {"2147483647,", nil}} {
		f.Add(npyBytes(strings.Replace(hdr, "%s", c.shape, 1), c.data))
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Add(append([]byte(magic), 3, 0, 255, 255, 255, 255))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := readFlat(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(v) == 0 {
			t.Fatal("accepted an empty array")
		}
		var b bytes.Buffer
		if err := Write(&b, v); err != nil {
			t.Fatal(err)
		}
		back, err := readFlat(&b)
		if err != nil || len(back) != len(v) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range v {
			if math.Float32bits(back[i]) != math.Float32bits(v[i]) {
				t.Fatalf("[%d] %v != %v", i, back[i], v[i])
			}
		}
	})
}

// readFlat is Read without the shape.
func readFlat(r io.Reader) ([]float32, error) {
	v, _, err := Read(r)
	return v, err
}

func TestReadShape(t *testing.T) {
	data := npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 3), }", f32bytes(1, 2, 3, 4, 5, 6))
	v, shape, err := Read(bytes.NewReader(data))
	if err != nil || len(v) != 6 || len(shape) != 3 || shape[0] != 2 || shape[1] != 1 || shape[2] != 3 {
		t.Fatalf("got %v %v %v", v, shape, err)
	}
}
