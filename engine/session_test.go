package engine

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

func ioInfos(in []ort.InputOutputInfo) []models.IOInfo {
	out := make([]models.IOInfo, len(in))
	for i, x := range in {
		out[i] = models.IOInfo{Name: x.Name, DType: dtypeName(x.DataType), Dims: []int64(x.Dimensions)}
	}
	return out
}

func dtypeName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "float32"
	case ort.TensorElementDataTypeFloat16:
		return "float16"
	case ort.TensorElementDataTypeDouble:
		return "float64"
	case ort.TensorElementDataTypeInt64:
		return "int64"
	case ort.TensorElementDataTypeInt32:
		return "int32"
	case ort.TensorElementDataTypeInt8:
		return "int8"
	case ort.TensorElementDataTypeUint8:
		return "uint8"
	case ort.TensorElementDataTypeBool:
		return "bool"
	}
	return t.String()
}

// models.ReadGraphIO (which reads the file) must report exactly what ONNX
// Runtime reports for every graph.
func TestReadGraphIOMatchesRuntime(t *testing.T) {
	tiny(t) // initialises the runtime
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{Verify: models.VerifySizes})
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range models.GraphRoles {
		path := b.Path(role)
		in, out, err := models.ReadGraphIO(path)
		if err != nil {
			t.Fatal(err)
		}
		oin, oout, err := ort.GetInputOutputInfo(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, ioInfos(oin)) || !reflect.DeepEqual(out, ioInfos(oout)) {
			t.Errorf("%s: file says\n%v\n%v\nORT says\n%v\n%v", role, in, out, ioInfos(oin), ioInfos(oout))
		}
	}
	if _, _, err := models.ReadGraphIO("session.go"); err == nil {
		t.Error("a Go file read as ONNX")
	}
}

// Session.Profile writes one ORT profile per graph, named by its role, when
// the predictor closes.
func TestSessionProfile(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "p")
	p := tinyWith(t, Options{Truncation: TruncateRight, Session: SessionOptions{Profile: prefix}})
	c := loadGolden(t)[0]
	if _, err := p.Predict(context.Background(), predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, MaxNewTokens: 4}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	for _, role := range []models.Role{models.RoleVision, models.RoleEncoder, models.RoleFusion, models.RoleDecoderCross, models.RoleDecoder} {
		if m, _ := filepath.Glob(prefix + "-" + string(role) + "_[0-9]*.json"); len(m) != 1 {
			t.Errorf("%s: %d profiles, want 1", role, len(m))
		}
	}
}

// A graph that lacks a name the engine binds by name is refused at load:
// the missing name would have been slot 0's (a renamed attention_mask fed
// the ids, or a nil value crashed the binding).
func TestGraphHasWhatTheEngineBinds(t *testing.T) {
	enc := func(ins ...string) *graph {
		return &graph{role: models.RoleEncoder, path: "encoder_model.onnx", in: slots(ins), out: slots([]string{"last_hidden_state"})}
	}
	if err := enc("input_ids", "attention_mask").hasNamed(); err != nil {
		t.Fatal(err)
	}
	err := enc("input_ids", "attn").hasNamed()
	if err == nil || !strings.Contains(err.Error(), `no input "attention_mask"`) || !strings.Contains(err.Error(), "encoder_model.onnx") {
		t.Errorf("renamed mask: %v", err)
	}
	fus := &graph{role: models.RoleFusion, path: "fusion.onnx", in: slots([]string{"encoder_hidden_states", "attention_mask", "image_features"}), out: slots([]string{"out"})}
	if err := fus.hasNamed(); err == nil || !strings.Contains(err.Error(), `no output "fused_hidden_states"`) {
		t.Errorf("renamed fusion output: %v", err)
	}
}
