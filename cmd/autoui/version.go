package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/autoui/autoui/engine"
)

func init() {
	register(command{name: "version", summary: "print the version (also --version)", run: runVersion})
}

func runVersion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: autoui version") }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "autoui %s (%s, %s/%s; ONNX Runtime %s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, engine.RequiredORTVersion)
	return nil
}

// version is the module version when installed by `go install`, else the
// commit it was built from (make build records it), "-dirty" when the tree
// had changes.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
