package aitw

import (
	"bytes"
	"os"
	"testing"
)

// FuzzRecordReader feeds arbitrary bytes (plain or gzip) through the record
// reader and the Example decoder: they must return errors, never panic or
// loop.
func FuzzRecordReader(f *testing.F) {
	for _, p := range []string{
		"testdata/corrupt/truncated.tfrecord.gz",
		"testdata/records/single/single-00000-of-00001.tfrecord.gz",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	rec := AppendRecord(nil, []byte("\x0a\x0b\x0a\x09\x0a\x01k\x12\x04\x1a\x02\x08\x01"))
	f.Add(rec)
	f.Add(rec[:len(rec)-2])
	f.Add(AppendRecord(rec, nil))
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rr, err := NewRecordReader(bytes.NewReader(data), "fuzz", 1<<16)
		if err != nil {
			return
		}
		defer rr.Close()
		for i := 0; i < 1000; i++ {
			p, _, err := rr.Next()
			if err != nil {
				re, ok := err.(*RecordError)
				if ok && re.Resumable {
					continue
				}
				return
			}
			if ex, err := DecodeExample(p); err == nil {
				StepFromExample(ex)
			}
		}
	})
}

// FuzzDecodeExample checks the protobuf decoder alone on arbitrary bytes.
func FuzzDecodeExample(f *testing.F) {
	rr := openRecordsF(f, "testdata/records/single/single-00000-of-00001.tfrecord.gz")
	p, _, err := rr.Next()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), p[:2000]...))
	f.Add([]byte("\x0a\x0b\x0a\x09\x0a\x01k\x12\x04\x1a\x02\x08\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if ex, err := DecodeExample(data); err == nil {
			StepFromExample(ex)
		}
	})
}

func openRecordsF(f *testing.F, path string) *RecordReader {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	rr, err := NewRecordReader(bytes.NewReader(b), path, 0)
	if err != nil {
		f.Fatal(err)
	}
	return rr
}
