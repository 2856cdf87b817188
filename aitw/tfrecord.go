// Package aitw reads Android in the Wild (AITW) data: gzip TFRecord files of
// tf.train.Example steps, assembled into episodes; AITW's and Auto-UI's split
// files; Auto-UI's released feature pickles; and the predictions JSONL that
// `autoui eval` writes and scores.
package aitw

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// DefaultMaxRecordSize bounds one record's payload. AITW records hold raw
// screenshots (a few MB); a larger length means a corrupt header.
const DefaultMaxRecordSize = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC32C.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// ErrCorrupt marks a record whose CRC does not match or whose framing is
// invalid. ErrTruncated marks a file that ends inside a record, or a gzip
// stream cut inside its compressed data. ErrEmptyFile marks a 0-byte file
// (a download that never started): not even a gzip header.
var (
	ErrCorrupt   = errors.New("corrupt record")
	ErrTruncated = errors.New("truncated record")
	ErrEmptyFile = errors.New("empty file (0 bytes)")
)

// RecordError says which record of which file is bad. Offset is the byte
// offset of the record's start in the uncompressed stream.
type RecordError struct {
	File   string
	Offset int64
	Reason string
	Err    error // ErrCorrupt, ErrTruncated or an I/O error
	// Resumable is true when the reader can continue after this record (the
	// header was valid, so the next record's position is known).
	Resumable bool
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("read record %s at byte %d: %s", e.File, e.Offset, e.Reason)
}

func (e *RecordError) Unwrap() error { return e.Err }

// RecordReader reads TFRecord framing: uint64 length, masked CRC32C of the
// length, payload, masked CRC32C of the payload (all little-endian). It
// detects gzip by its magic bytes, so compressed and plain files both work.
type RecordReader struct {
	r       *bufio.Reader
	name    string
	off     int64 // uncompressed offset of the next record
	maxSize int
	buf     []byte
	err     error   // sticky
	gz      *gunzip // nil for a plain file
}

// NewRecordReader reads records from r; name is used in errors.
// maxSize <= 0 means DefaultMaxRecordSize. Empty input is an error
// wrapping ErrEmptyFile.
func NewRecordReader(r io.Reader, name string, maxSize int) (*RecordReader, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	br := bufio.NewReaderSize(r, 1<<16)
	rr := &RecordReader{name: name, maxSize: maxSize}
	magic, err := br.Peek(2)
	if len(magic) == 0 && err == io.EOF {
		return nil, fmt.Errorf("%s: %w", name, ErrEmptyFile)
	}
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := newGunzip(br)
		if err != nil {
			return nil, fmt.Errorf("open gzip %s: %w", name, err)
		}
		rr.gz = gz
		rr.r = bufio.NewReaderSize(gz, 1<<16)
	} else {
		rr.r = br
	}
	return rr, nil
}

// TrailerMissing reports, once Next has returned io.EOF, whether the gzip
// stream ended without (all of) its 8-byte trailer: every record was read
// and checked by its own CRC, only the stream's CRC32 could not be checked.
// A download cut a few bytes short looks like this.
func (rr *RecordReader) TrailerMissing() bool { return rr.gz != nil && rr.gz.trailerMissing }

// Next returns the next record's payload, valid until the next call, and
// its offset. At the end of the stream it returns io.EOF. A bad record gives
// a *RecordError; if its Resumable field is set, Next can be called again to
// continue with the following record, otherwise the stream is done.
func (rr *RecordReader) Next() ([]byte, int64, error) {
	if rr.err != nil {
		return nil, rr.off, rr.err
	}
	start := rr.off
	var hdr [12]byte
	n, err := io.ReadFull(rr.r, hdr[:])
	if err != nil {
		if err == io.EOF && n == 0 {
			rr.err = io.EOF
			return nil, start, io.EOF
		}
		return nil, start, rr.fail(start, "header", n, err)
	}
	length := binary.LittleEndian.Uint64(hdr[:8])
	if got, want := maskedCRC(hdr[:8]), binary.LittleEndian.Uint32(hdr[8:]); got != want {
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrCorrupt,
			Reason: fmt.Sprintf("length CRC mismatch (stored %#08x, computed %#08x); the rest of the file is unreadable", want, got)}
		return nil, start, rr.err
	}
	if length > uint64(rr.maxSize) {
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrCorrupt,
			Reason: fmt.Sprintf("record length %d exceeds the %d-byte limit", length, rr.maxSize)}
		return nil, start, rr.err
	}
	need := int(length) + 4
	if cap(rr.buf) < need {
		rr.buf = make([]byte, need)
	}
	rr.buf = rr.buf[:need]
	if n, err := io.ReadFull(rr.r, rr.buf); err != nil {
		return nil, start, rr.fail(start, "payload", 12+n, err)
	}
	rr.off = start + 12 + int64(need)
	payload := rr.buf[:length]
	if got, want := maskedCRC(payload), binary.LittleEndian.Uint32(rr.buf[length:]); got != want {
		return nil, start, &RecordError{File: rr.name, Offset: start, Err: ErrCorrupt, Resumable: true,
			Reason: fmt.Sprintf("payload CRC mismatch (stored %#08x, computed %#08x, %d bytes)", want, got, length)}
	}
	return payload, start, nil
}

// Keep hands the payload last returned by Next to the caller for good: the
// next call reads into a new buffer instead of over it. Keeping a screen
// this way spares a copy of megabytes per record.
func (rr *RecordReader) Keep() { rr.buf = nil }

// fail records a read error inside a record: a short read is a truncation.
func (rr *RecordReader) fail(start int64, part string, got int, err error) error {
	switch {
	case errors.Is(err, errGzipCut) && got == 0:
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrTruncated,
			Reason: "gzip stream cut short at a record boundary (any records after this point are lost; every one before it was read and checked)"}
	case errors.Is(err, errGzipCut):
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrTruncated,
			Reason: fmt.Sprintf("gzip stream cut short inside the record %s (%d bytes of the record read)", part, got)}
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrTruncated,
			Reason: fmt.Sprintf("file ends inside the record %s (%d bytes of the record read)", part, got)}
	default:
		rr.err = &RecordError{File: rr.name, Offset: start, Err: err, Reason: err.Error()}
	}
	return rr.err
}

// Close releases the gzip reader, if any (not the underlying reader).
func (rr *RecordReader) Close() error {
	if rr.gz != nil {
		return rr.gz.Close()
	}
	return nil
}

// errGzipCut marks compressed data that ends before its deflate stream
// does: whatever followed the cut is lost.
var errGzipCut = fmt.Errorf("gzip stream cut short: %w", io.ErrUnexpectedEOF)

// gunzip inflates a gzip file, member after member as gzip.Reader does. It
// exists because gzip.Reader reports a file cut inside its compressed data
// and one lacking only its 8-byte trailer (every byte of data present) the
// same way, as io.ErrUnexpectedEOF; here the first is errGzipCut and the
// second a clean end with trailerMissing set.
type gunzip struct {
	src            *bufio.Reader // an io.ByteReader, so flate reads no byte past its stream
	header         gzip.Reader   // parses member headers only
	inflate        io.ReadCloser
	crc, size      uint32 // of the current member's data so far, for its trailer
	trailerMissing bool
	err            error // sticky
}

func newGunzip(src *bufio.Reader) (*gunzip, error) {
	g := &gunzip{src: src}
	if err := g.openMember(); err != nil {
		return nil, err
	}
	return g, nil
}

// openMember reads a member header and starts inflating the member's data.
// gzip.Reader parses the header: given a ByteReader it reads exactly the
// header, and its own decompressor reads nothing until used.
func (g *gunzip) openMember() error {
	if err := g.header.Reset(g.src); err != nil {
		if err == io.ErrUnexpectedEOF {
			return errGzipCut
		}
		return err
	}
	if g.inflate == nil {
		g.inflate = flate.NewReader(g.src)
	} else if err := g.inflate.(flate.Resetter).Reset(g.src, nil); err != nil {
		return err
	}
	g.crc, g.size = 0, 0
	return nil
}

func (g *gunzip) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for g.err == nil {
		n, err := g.inflate.Read(p)
		g.crc = crc32.Update(g.crc, crc32.IEEETable, p[:n])
		g.size += uint32(n)
		switch {
		case err == io.EOF:
			g.err = g.endMember()
		case err == io.ErrUnexpectedEOF:
			g.err = errGzipCut
		case err != nil:
			g.err = err
		}
		if n > 0 {
			return n, nil // the error, if any, comes with the next call
		}
	}
	return 0, g.err
}

// endMember checks a member's trailer (CRC32 and size of its data) and opens
// the next member, if any. A missing or partial trailer at the end of the
// file is not an error: all the data is there, only unchecked.
func (g *gunzip) endMember() error {
	var trailer [8]byte
	if _, err := io.ReadFull(g.src, trailer[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			g.trailerMissing = true
			return io.EOF
		}
		return err
	}
	if binary.LittleEndian.Uint32(trailer[:4]) != g.crc || binary.LittleEndian.Uint32(trailer[4:]) != g.size {
		return gzip.ErrChecksum
	}
	if _, err := g.src.Peek(1); err == io.EOF {
		return io.EOF
	}
	return g.openMember()
}

// Close releases the decompressors (not the underlying reader).
func (g *gunzip) Close() error {
	g.header.Close()
	return g.inflate.Close()
}

// AppendRecord appends one framed record holding payload to dst (for tests
// and tools that write TFRecord files).
func AppendRecord(dst, payload []byte) []byte {
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(payload)))
	dst = append(dst, hdr[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(hdr[:]))
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(payload))
}
