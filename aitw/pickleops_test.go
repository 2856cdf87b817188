package aitw

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPickleOpcodes walks pickles Python wrote under protocols 0 to 5
// (scripts/aitw_fixtures.py opcode_pickles): each ends where the next
// starts, and the last at the end of the file.
func TestCheckPickleOpcodes(t *testing.T) {
	b, err := os.ReadFile("testdata/autoui/opcodes.pickles")
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(b)
	var n int
	for off := int64(0); off < r.Size(); n++ {
		end, err := checkPickle(r, off, r.Size())
		if err != nil {
			t.Fatalf("pickle %d at %d: %v", n, off, err)
		}
		if end <= off {
			t.Fatalf("pickle %d: %d to %d", n, off, end)
		}
		off = end
	}
	if n != 6 {
		t.Errorf("%d pickles, want 6", n)
	}
	for _, f := range []string{"testdata/autoui/general_blip_test.obj", "testdata/autoui/general_blip_torch_test.obj"} {
		b, _ := os.ReadFile(f)
		if end, err := checkPickle(bytes.NewReader(b), 0, int64(len(b))); err != nil || end != int64(len(b)) {
			t.Errorf("%s: end %d of %d, %v", f, end, len(b), err)
		}
	}
}

// pk builds a pickle: protocol 2, then the opcodes.
type pk struct{ bytes.Buffer }

func newPK() *pk { p := &pk{}; p.WriteString("\x80\x02"); return p }

func (p *pk) op(s string) *pk { p.WriteString(s); return p }

func (p *pk) str(s string) *pk {
	p.WriteByte('X')
	_ = binary.Write(p, binary.LittleEndian, uint32(len(s)))
	p.WriteString(s)
	return p
}

// TestMalformedPickles: what a few hostile bytes made of the reader (a
// panic of the unpickler, terabytes asked for, a list that holds itself)
// is one error naming the file.
func TestMalformedPickles(t *testing.T) {
	frame := func(n uint64) string {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], n)
		return "\x95" + string(b[:])
	}
	selfList := newPK().op("](").op("}(").str("episode_id").str("e").str("data").op("](").
		op("}(").str("goal").str("g").str("step_id").op("K\x00").str("image").op("]q\x00h\x00a").
		op("ue").op("ue.")
	for name, c := range map[string]struct{ data, want string }{
		"set items off the stack": {"\x80\x02}(K\x01u.", "malformed pickle"},
		"frame of a terabyte":     {"\x80\x04" + frame(1<<40) + "]q\x00.", "declares 1099511627776 bytes"},
		"bytes of 16 GB":          {"\x80\x04\x8e" + frame(1 << 34)[1:] + "ab.", "declares 17179869184 bytes"},
		"negative length":         {"\x80\x02T\xff\xff\xff\xff.", "negative length"},
		"unknown opcode":          {"\x80\x02\xff.", "unknown opcode"},
		"no stop":                 {"\x80\x02]", "no STOP"},
		"cut line":                {"\x80\x02I12", "runs past the end"},
		"memo index":              {"\x80\x02h\x07.", "top level is <nil>"},
		"list holding itself":     {selfList.String(), "nested over 8 deep"},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "general_x.obj")
			if err := os.WriteFile(f, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadAutoUIPickle(f, "general")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), f) {
				t.Errorf("got %v, want an error naming the file with %q", err, c.want)
			}
		})
	}
}

// TestMutatedPicklesFailCleanly reads a few thousand random mutations of
// the fixture pickles: each reads or fails, none panics.
func TestMutatedPicklesFailCleanly(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	n := 1500
	if testing.Short() {
		n = 200
	}
	for _, src := range []string{"testdata/autoui/general_blip_test.obj", "testdata/autoui/general_blip_torch_test.obj"} {
		orig, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			b := append([]byte(nil), orig...)
			switch i % 3 {
			case 0: // a few bytes changed
				for range 1 + rng.Intn(4) {
					b[rng.Intn(len(b))] = byte(rng.Intn(256))
				}
			case 1: // cut short
				b = b[:rng.Intn(len(b))]
			default: // a run of 0xff bytes: huge lengths
				at := rng.Intn(len(b))
				for k := at; k < min(len(b), at+1+rng.Intn(8)); k++ {
					b[k] = 0xff
				}
			}
			f := filepath.Join(dir, "general_m.obj")
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s mutation %d: panic %v", src, i, p)
					}
				}()
				_, _ = ReadAutoUIPickle(f, "general")
			}()
		}
	}
}

// A few KB of shared references can nest one list K times over 8 levels:
// K^8 numbers. One value's numbers are bounded, so the file is an error,
// not gigabytes.
func TestPickleSharedReferenceBomb(t *testing.T) {
	// image: L7 where L0 = [0.5]*20, Li = [Li-1]*20 (memo gets: a few KB)
	p := newPK().op("](").op("}(").str("episode_id").str("e").str("data").op("](").
		op("}(").str("goal").str("g").str("step_id").op("K\x00").str("image")
	p.op("]q\x00(")
	for range 20 {
		p.op("G\x3f\xe0\x00\x00\x00\x00\x00\x00") // 0.5
	}
	p.op("e")
	for lvl := 1; lvl <= 7; lvl++ {
		p.op("0](") // the level below is in the memo: off the stack
		for range 20 {
			p.op("h" + string(rune(lvl-1)))
		}
		p.op("eq" + string(rune(lvl)))
	}
	p.op("ue").op("ue.")
	f := filepath.Join(t.TempDir(), "general_bomb.obj")
	if err := os.WriteFile(f, p.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(p.Bytes()) > 8<<10 {
		t.Fatalf("the bomb is %d bytes", len(p.Bytes()))
	}
	_, err := ReadAutoUIPickle(f, "general")
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 numbers") {
		t.Fatalf("got %v", err)
	}
}
