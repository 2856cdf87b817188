package engine

import (
	"path/filepath"
	"reflect"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/models"
)

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
