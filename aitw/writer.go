package aitw

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// EncodeExample serializes ex as a tf.train.Example (the field numbers the
// decoder in example.go documents). Features are written in sorted key
// order and scalar lists packed, so equal examples give equal bytes.
func EncodeExample(ex Example) []byte {
	keys := make([]string, 0, len(ex))
	for k := range ex {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var features []byte
	for _, k := range keys {
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, encodeFeature(ex[k]))
		features = protowire.AppendTag(features, 1, protowire.BytesType)
		features = protowire.AppendBytes(features, entry)
	}
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, features)
}

// encodeFeature writes one Feature; KindNone gives an empty Feature, as TF
// writes a feature with no list set.
func encodeFeature(f Feature) []byte {
	var list []byte
	switch f.Kind {
	case KindNone:
		return nil
	case KindBytes:
		for _, b := range f.Bytes {
			list = protowire.AppendTag(list, 1, protowire.BytesType)
			list = protowire.AppendBytes(list, b)
		}
	case KindFloat:
		if len(f.Floats) > 0 {
			packed := make([]byte, 0, 4*len(f.Floats))
			for _, v := range f.Floats {
				packed = protowire.AppendFixed32(packed, math.Float32bits(v))
			}
			list = protowire.AppendTag(list, 1, protowire.BytesType)
			list = protowire.AppendBytes(list, packed)
		}
	case KindInt64:
		if len(f.Ints) > 0 {
			var packed []byte
			for _, v := range f.Ints {
				packed = protowire.AppendVarint(packed, uint64(v))
			}
			list = protowire.AppendTag(list, 1, protowire.BytesType)
			list = protowire.AppendBytes(list, packed)
		}
	}
	var out []byte
	out = protowire.AppendTag(out, protowire.Number(f.Kind), protowire.BytesType)
	return protowire.AppendBytes(out, list)
}

// Feature constructors for building examples.

// BytesFeature holds byte strings.
func BytesFeature(vs ...[]byte) Feature { return Feature{Kind: KindBytes, Bytes: vs} }

// StringFeature holds strings as bytes.
func StringFeature(vs ...string) Feature {
	b := make([][]byte, len(vs))
	for i, v := range vs {
		b[i] = []byte(v)
	}
	return Feature{Kind: KindBytes, Bytes: b}
}

// FloatFeature holds float32 values.
func FloatFeature(vs ...float32) Feature { return Feature{Kind: KindFloat, Floats: vs} }

// Int64Feature holds int64 values.
func Int64Feature(vs ...int64) Feature { return Feature{Kind: KindInt64, Ints: vs} }

// StepExample is the inverse of StepFromExample: the AITW features of one
// step (the device metadata only when set). Pixels must be the raw
// Height x Width x Channels screenshot.
func StepExample(s Step) Example {
	pos := make([]float32, 0, 4*len(s.Boxes))
	for _, b := range s.Boxes {
		pos = append(pos, b.Y, b.X, b.H, b.W)
	}
	ex := Example{
		"episode_id":                     StringFeature(s.EpisodeID),
		"goal_info":                      StringFeature(s.Goal),
		"step_id":                        Int64Feature(int64(s.StepID)),
		"episode_length":                 Int64Feature(int64(s.EpisodeLength)),
		"image/height":                   Int64Feature(int64(s.Height)),
		"image/width":                    Int64Feature(int64(s.Width)),
		"image/channels":                 Int64Feature(int64(s.Channels)),
		"image/encoded":                  BytesFeature(s.Pixels),
		"image/ui_annotations_positions": FloatFeature(pos...),
		"image/ui_annotations_text":      StringFeature(s.UIText...),
		"image/ui_annotations_ui_types":  StringFeature(s.UITypes...),
		"results/action_type":            Int64Feature(int64(s.Action.Type)),
		"results/yx_touch":               FloatFeature(float32(s.Action.Touch.Y), float32(s.Action.Touch.X)),
		"results/yx_lift":                FloatFeature(float32(s.Action.Lift.Y), float32(s.Action.Lift.X)),
		"results/type_action":            StringFeature(s.Action.Text),
	}
	if s.DeviceType != "" {
		ex["device_type"] = StringFeature(s.DeviceType)
	}
	if s.AndroidAPILevel != 0 {
		ex["android_api_level"] = Int64Feature(int64(s.AndroidAPILevel))
	}
	if s.CurrentActivity != "" {
		ex["current_activity"] = StringFeature(s.CurrentActivity)
	}
	return ex
}

// RecordWriter writes gzip-compressed TFRecord files, as AITW ships them.
// The gzip header carries no name or time, so equal records give equal
// files.
type RecordWriter struct {
	zw   *gzip.Writer
	name string
	n    int
	buf  []byte
}

// NewRecordWriter writes records to w; name is used in errors.
func NewRecordWriter(w io.Writer, name string) *RecordWriter {
	zw, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression) // the level is valid
	return &RecordWriter{zw: zw, name: name}
}

// Write appends one record holding payload.
func (rw *RecordWriter) Write(payload []byte) error {
	rw.buf = AppendRecord(rw.buf[:0], payload)
	if _, err := rw.zw.Write(rw.buf); err != nil {
		return fmt.Errorf("write record %d to %s: %w", rw.n, rw.name, err)
	}
	rw.n++
	return nil
}

// WriteExample appends one tf.train.Example.
func (rw *RecordWriter) WriteExample(ex Example) error { return rw.Write(EncodeExample(ex)) }

// Records is the number of records written.
func (rw *RecordWriter) Records() int { return rw.n }

// Close flushes the gzip stream (not the underlying writer).
func (rw *RecordWriter) Close() error {
	if err := rw.zw.Close(); err != nil {
		return fmt.Errorf("close %s: %w", rw.name, err)
	}
	return nil
}
