package aitw

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/nlpodyssey/gopickle/pickle"
)

// gopickle allocates what an opcode declares before reading it, and indexes
// its stack as the opcodes say: a few hostile bytes ask for terabytes or
// panic. So a pickle's opcodes are walked first, every declared length
// checked against the bytes that remain (checkPickle), and the load itself
// turns a panic into an error (loadPickle). A well-formed pickle costs one
// extra read.

// pickleArg is how an opcode's argument is laid out.
type pickleArg struct {
	kind byte // 0: unknown opcode
	n    int  // argFixed: bytes; argLines: lines; argCounted: the length's bytes
}

const (
	argNone = iota + 1
	argFixed
	argLines
	argCounted       // a little-endian unsigned length, then that many bytes
	argCountedSigned // the same with a signed 4-byte length
	argFrame         // an 8-byte length of the opcodes that follow
)

// pickleArgs is the argument layout of every opcode of protocols 0 to 5
// (Python's pickletools).
var pickleArgs = func() (t [256]pickleArg) {
	set := func(ops string, a pickleArg) {
		for _, op := range []byte(ops) {
			t[op] = a
		}
	}
	set("(.0123NQRabd}el]ost)u\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98", pickleArg{argNone, 0})
	set("Khq\x80\x82", pickleArg{argFixed, 1})
	set("M\x83", pickleArg{argFixed, 2})
	set("Jjr\x84", pickleArg{argFixed, 4})
	set("G", pickleArg{argFixed, 8})
	set("ILFSVPgp", pickleArg{argLines, 1})
	set("ci", pickleArg{argLines, 2})
	set("UC\x8c\x8a", pickleArg{argCounted, 1})
	set("BX", pickleArg{argCounted, 4})
	set("T\x8b", pickleArg{argCountedSigned, 4})
	set("\x8d\x8e\x96", pickleArg{argCounted, 8})
	set("\x95", pickleArg{argFrame, 8})
	return t
}()

// checkPickle walks the opcodes of the pickle at off in r, which ends at
// size, through its STOP, and returns where it ends. It fails on an unknown
// opcode, a pickle cut short, or a length larger than what remains.
func checkPickle(r io.ReaderAt, off, size int64) (int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, off, size-off), 64<<10)
	pos := off
	short := func(what string, at int64) error {
		return fmt.Errorf("malformed pickle: %s at byte %d runs past the end (byte %d)", what, at, size)
	}
	for {
		op, err := br.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("malformed pickle: no STOP opcode before the end (byte %d)", size)
		}
		at := pos
		pos++
		a := pickleArgs[op]
		name := fmt.Sprintf("opcode %q", op)
		var skip int64
		switch a.kind {
		case 0:
			return 0, fmt.Errorf("malformed pickle: unknown %s at byte %d", name, at)
		case argFixed:
			skip = int64(a.n)
		case argLines:
			for range a.n {
				for {
					line, err := br.ReadSlice('\n')
					pos += int64(len(line))
					if err == nil {
						break
					}
					if !errors.Is(err, bufio.ErrBufferFull) {
						return 0, short(name, at)
					}
				}
			}
		case argCounted, argCountedSigned, argFrame:
			var b [8]byte
			if _, err := io.ReadFull(br, b[:a.n]); err != nil {
				return 0, short(name, at)
			}
			pos += int64(a.n)
			length := binary.LittleEndian.Uint64(b[:])
			if a.kind == argCountedSigned && int32(length) < 0 {
				return 0, fmt.Errorf("malformed pickle: %s at byte %d declares a negative length", name, at)
			}
			if left := uint64(size - pos); length > left {
				return 0, fmt.Errorf("malformed pickle: %s at byte %d declares %d bytes, %d remain", name, at, length, left)
			}
			if a.kind != argFrame { // a frame's bytes are opcodes, walked next
				skip = int64(length)
			}
		}
		n, err := br.Discard(int(skip))
		pos += int64(n)
		if err != nil {
			return 0, short(name, at)
		}
		if op == '.' {
			return pos, nil
		}
	}
}

// loadPickle loads the pickle at r's position once checkPickle passes it,
// with a panic of the unpickler (a stack or memo index out of range that
// hostile opcodes reach) returned as an error.
func loadPickle(u *pickle.Unpickler, r io.ReaderAt, off, size int64) (obj any, err error) {
	if _, err := checkPickle(r, off, size); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			obj, err = nil, fmt.Errorf("malformed pickle: %v", p)
		}
	}()
	return u.Load()
}

// loadPickleBytes is loadPickle for a pickle at r's position in memory.
func loadPickleBytes(u *pickle.Unpickler, r *bytes.Reader) (any, error) {
	return loadPickle(u, r, r.Size()-int64(r.Len()), r.Size())
}
