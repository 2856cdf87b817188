package models

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// ReadGraphIO reads a graph's declared inputs and outputs from an ONNX file
// without loading it: it walks the ModelProto and seeks past everything else
// (initializers are most of the file). Dynamic dimensions are -1.
//
// Asking ONNX Runtime instead would build a whole session, weights and all,
// just to throw it away: slower loads and a higher memory peak.
func ReadGraphIO(path string) (inputs, outputs []IOInfo, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	r := &pbReader{f: f, br: bufio.NewReaderSize(f, 64<<10)}
	// ModelProto field 7 is the GraphProto.
	found := false
	err = r.fields(st.Size(), func(num protowire.Number, typ protowire.Type, n int64) (bool, error) {
		if num != 7 || typ != protowire.BytesType {
			return false, nil
		}
		found = true
		// GraphProto: 11 input, 12 output (ValueInfoProto).
		return true, r.fields(n, func(num protowire.Number, typ protowire.Type, n int64) (bool, error) {
			if (num != 11 && num != 12) || typ != protowire.BytesType {
				return false, nil
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(r.br, buf); err != nil {
				return true, err
			}
			r.pos += n
			info, err := parseValueInfo(buf)
			if err != nil {
				return true, err
			}
			if num == 11 {
				inputs = append(inputs, info)
			} else {
				outputs = append(outputs, info)
			}
			return true, nil
		})
	})
	if err == nil && !found {
		err = errors.New("no graph in the model")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read ONNX graph inputs/outputs of %s: %w", path, err)
	}
	return inputs, outputs, nil
}

// pbReader walks protobuf fields of a file, skipping unread payloads.
type pbReader struct {
	f   *os.File
	br  *bufio.Reader
	pos int64
}

func (r *pbReader) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := r.br.ReadByte()
		if err != nil {
			return 0, err
		}
		r.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("malformed varint")
}

// skip moves n bytes forward, seeking past large spans.
func (r *pbReader) skip(n int64) error {
	if n <= int64(r.br.Buffered()) {
		_, err := r.br.Discard(int(n))
		r.pos += n
		return err
	}
	r.pos += n
	if _, err := r.f.Seek(r.pos, io.SeekStart); err != nil {
		return err
	}
	r.br.Reset(r.f)
	return nil
}

// fields calls visit for each field in the next size bytes. visit reports
// whether it consumed the payload of a length-delimited field; if not, it is skipped.
func (r *pbReader) fields(size int64, visit func(protowire.Number, protowire.Type, int64) (bool, error)) error {
	end := r.pos + size
	for r.pos < end {
		tag, err := r.varint()
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		var n int64
		switch typ {
		case protowire.VarintType:
			_, err = r.varint()
		case protowire.Fixed32Type:
			err = r.skip(4)
		case protowire.Fixed64Type:
			err = r.skip(8)
		case protowire.BytesType:
			var l uint64
			if l, err = r.varint(); err == nil {
				n = int64(l)
				if r.pos+n > end {
					return fmt.Errorf("field %d overruns its message at byte %d", num, r.pos)
				}
				var used bool
				before := r.pos
				if used, err = visit(num, typ, n); err == nil && !used {
					err = r.skip(n)
				} else if err == nil && r.pos != before+n {
					err = fmt.Errorf("field %d: read %d of %d bytes", num, r.pos-before, n)
				}
			}
		default:
			return fmt.Errorf("unsupported wire type %d at byte %d (not an ONNX file?)", typ, r.pos)
		}
		if err != nil {
			return err
		}
	}
	if r.pos != end {
		return fmt.Errorf("message overruns at byte %d", r.pos)
	}
	return nil
}

// parseValueInfo reads ValueInfoProto{1 name, 2 TypeProto{1 Tensor{1 elem_type, 2 TensorShapeProto{1 Dim{1 dim_value, 2 dim_param}}}}}.
func parseValueInfo(b []byte) (IOInfo, error) {
	var info IOInfo
	err := eachField(b, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			info.Name = string(v)
		case 2:
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				if num != 1 { // only tensor types
					return nil
				}
				return eachField(v, func(num protowire.Number, v []byte, x uint64) error {
					switch num {
					case 1:
						info.DType = onnxElemType(x)
					case 2:
						info.Dims = []int64{}
						return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
							if num != 1 {
								return nil
							}
							d := int64(-1)
							err := eachField(v, func(num protowire.Number, _ []byte, x uint64) error {
								if num == 1 {
									d = int64(x)
								}
								return nil
							})
							info.Dims = append(info.Dims, d)
							return err
						})
					}
					return nil
				})
			})
		}
		return nil
	})
	return info, err
}

// eachField calls f with each field's number and its bytes (length-delimited)
// or value (varint).
func eachField(b []byte, f func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, v, x); err != nil {
			return err
		}
	}
	return nil
}

func onnxElemType(t uint64) string {
	switch t {
	case 1:
		return "float32"
	case 2:
		return "uint8"
	case 3:
		return "int8"
	case 6:
		return "int32"
	case 7:
		return "int64"
	case 9:
		return "bool"
	case 10:
		return "float16"
	case 11:
		return "float64"
	}
	return fmt.Sprintf("onnx_type_%d", t)
}
