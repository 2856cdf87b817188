// Package aitw reads Android in the Wild (AITW) data: gzip TFRecord files of
// tf.train.Example steps, assembled into episodes; AITW's and Auto-UI's split
// files; Auto-UI's released feature pickles; and the predictions JSONL that
// `autoui eval` writes and scores.
package aitw

import (
	"bufio"
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
// invalid. ErrTruncated marks a file that ends inside a record.
var (
	ErrCorrupt   = errors.New("corrupt record")
	ErrTruncated = errors.New("truncated record")
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
	err     error // sticky
	closer  io.Closer
}

// NewRecordReader reads records from r; name is used in errors.
// maxSize <= 0 means DefaultMaxRecordSize.
func NewRecordReader(r io.Reader, name string, maxSize int) (*RecordReader, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	br := bufio.NewReaderSize(r, 1<<16)
	rr := &RecordReader{name: name, maxSize: maxSize}
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("open gzip %s: %w", name, err)
		}
		rr.closer = zr
		rr.r = bufio.NewReaderSize(zr, 1<<16)
	} else {
		rr.r = br
	}
	return rr, nil
}

// Offset is the uncompressed byte offset of the next record.
func (rr *RecordReader) Offset() int64 { return rr.off }

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

// fail records a read error inside a record: a short read is a truncation.
func (rr *RecordReader) fail(start int64, part string, got int, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		rr.err = &RecordError{File: rr.name, Offset: start, Err: ErrTruncated,
			Reason: fmt.Sprintf("file ends inside the record %s (%d bytes of the record read)", part, got)}
	} else {
		rr.err = &RecordError{File: rr.name, Offset: start, Err: err, Reason: err.Error()}
	}
	return rr.err
}

// Close releases the gzip reader, if any (not the underlying reader).
func (rr *RecordReader) Close() error {
	if rr.closer != nil {
		return rr.closer.Close()
	}
	return nil
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
