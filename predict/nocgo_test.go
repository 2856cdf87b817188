package predict_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// cgoFree are the packages that run next to a phone or speak the wire
// format: they must build without cgo, that is without ONNX Runtime.
var cgoFree = []string{"./predict/...", "./api", "./serve/client", "./device", "./agent/..."}

// TestBuildsWithoutCgo builds the client side with CGO_ENABLED=0: a package
// there that reaches engine (or anything else needing cgo) fails it.
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds packages")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skipf("no go tool: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"build"}, cgoFree...)...)
	cmd.Dir = ".."
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "CGO_ENABLED=") || strings.HasPrefix(kv, "GOFLAGS=")
	}), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build %s: %v\n%s", strings.Join(cgoFree, " "), err, out)
	}
}
