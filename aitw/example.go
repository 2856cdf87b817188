package aitw

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// A hand-written decoder for tf.train.Example (tensorflow/core/example/
// example.proto and feature.proto) on protowire, so no generated code or
// protoc is needed. Field numbers:
//
//	Example   { Features features = 1; }
//	Features  { map<string, Feature> feature = 1; }   // entries: key = 1, value = 2
//	Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//	BytesList { repeated bytes value = 1; }
//	FloatList { repeated float value = 1 [packed = true]; }
//	Int64List { repeated int64 value = 1 [packed = true]; }
//
// Packed and unpacked encodings of the repeated scalars are both accepted,
// unknown fields are skipped, and for repeated map keys the last entry wins,
// as protobuf parsers do. Bytes values alias the input buffer.

// FeatureKind says which list a Feature holds.
type FeatureKind int

// Feature kinds, numbered as the oneof fields.
const (
	KindNone FeatureKind = iota
	KindBytes
	KindFloat
	KindInt64
)

func (k FeatureKind) String() string {
	return [...]string{"none", "bytes_list", "float_list", "int64_list"}[k]
}

// Feature is one tf.train.Feature.
type Feature struct {
	Kind   FeatureKind
	Bytes  [][]byte
	Floats []float32
	Ints   []int64
}

// Example is a decoded tf.train.Example: feature name -> value.
type Example map[string]Feature

var errProto = errors.New("malformed protobuf")

// DecodeExample parses a serialized tf.train.Example.
func DecodeExample(b []byte) (Example, error) {
	ex := Example{}
	err := forFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return forFields(v, func(num protowire.Number, typ protowire.Type, entry []byte) error {
			if num != 1 || typ != protowire.BytesType {
				return nil
			}
			return decodeEntry(entry, ex)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("decode tf.train.Example: %w", err)
	}
	return ex, nil
}

func decodeEntry(b []byte, ex Example) error {
	var key string
	var f Feature
	err := forFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key = string(v)
		case num == 2 && typ == protowire.BytesType:
			f = Feature{}
			return forFields(v, func(num protowire.Number, typ protowire.Type, list []byte) error {
				if typ != protowire.BytesType || num < 1 || num > 3 {
					return nil
				}
				// A oneof: the last member set wins.
				f = Feature{Kind: FeatureKind(num)}
				return decodeList(list, &f)
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("feature %q: %w", key, err)
	}
	ex[key] = f
	return nil
}

func decodeList(b []byte, f *Feature) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		switch {
		case f.Kind == KindBytes && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			f.Bytes = append(f.Bytes, v)
			b = b[n:]
		case f.Kind == KindFloat && typ == protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			f.Floats = append(f.Floats, math.Float32frombits(v))
			b = b[n:]
		case f.Kind == KindFloat && typ == protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || len(v)%4 != 0 {
				return fmt.Errorf("%w: packed float list", errProto)
			}
			for i := 0; i < len(v); i += 4 {
				u := uint32(v[i]) | uint32(v[i+1])<<8 | uint32(v[i+2])<<16 | uint32(v[i+3])<<24
				f.Floats = append(f.Floats, math.Float32frombits(u))
			}
			b = b[n:]
		case f.Kind == KindInt64 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			f.Ints = append(f.Ints, int64(v))
			b = b[n:]
		case f.Kind == KindInt64 && typ == protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			for len(v) > 0 {
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return fmt.Errorf("%w: packed int64 list", errProto)
				}
				f.Ints = append(f.Ints, int64(x))
				v = v[m:]
			}
			b = b[n:]
		default:
			return fmt.Errorf("%w: %s value with wire type %d", errProto, f.Kind, typ)
		}
	}
	return nil
}

// forFields calls fn for each field of a message; fn gets the raw value bytes
// for length-delimited fields and nil otherwise.
func forFields(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// Accessors that check the kind and count AITW features are stored with.

func (ex Example) bytes1(name string) ([]byte, error) {
	f, ok := ex[name]
	if !ok {
		return nil, fmt.Errorf("missing feature %q", name)
	}
	if f.Kind != KindBytes || len(f.Bytes) != 1 {
		return nil, fmt.Errorf("feature %q: want one bytes value, have %s with %d", name, f.Kind, f.count())
	}
	return f.Bytes[0], nil
}

func (ex Example) int1(name string) (int64, error) {
	f, ok := ex[name]
	if !ok {
		return 0, fmt.Errorf("missing feature %q", name)
	}
	if f.Kind != KindInt64 || len(f.Ints) != 1 {
		return 0, fmt.Errorf("feature %q: want one int64 value, have %s with %d", name, f.Kind, f.count())
	}
	return f.Ints[0], nil
}

func (ex Example) floats(name string, n int) ([]float32, error) {
	f, ok := ex[name]
	if !ok {
		return nil, fmt.Errorf("missing feature %q", name)
	}
	if f.Kind == KindNone && n < 0 { // an empty list is stored without a kind
		return nil, nil
	}
	if f.Kind != KindFloat || (n >= 0 && len(f.Floats) != n) {
		return nil, fmt.Errorf("feature %q: want %d float values, have %s with %d", name, n, f.Kind, f.count())
	}
	return f.Floats, nil
}

func (ex Example) strings(name string) ([]string, error) {
	f, ok := ex[name]
	if !ok || f.Kind == KindNone {
		return nil, nil
	}
	if f.Kind != KindBytes {
		return nil, fmt.Errorf("feature %q: want bytes values, have %s", name, f.Kind)
	}
	out := make([]string, len(f.Bytes))
	for i, b := range f.Bytes {
		out[i] = string(b)
	}
	return out, nil
}

func (f Feature) count() int { return len(f.Bytes) + len(f.Floats) + len(f.Ints) }
