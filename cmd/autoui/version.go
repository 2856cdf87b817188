package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/engine"
)

func init() {
	register(command{name: "version", summary: "print the version (also --version)", run: runVersion})
}

// runVersion prints the build's version: the same string eval run records
// in run.json.
func runVersion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: autoui version") }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "autoui %s (%s, %s/%s; ONNX Runtime %s)\n", runinfo.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, engine.RequiredORTVersion)
	return nil
}
