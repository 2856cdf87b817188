package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/bench/probe"
	"github.com/autoui/autoui/engine"
)

func init() {
	register(command{name: "bench", summary: "measure latency and memory per pipeline stage, beside this machine's limits", run: runBench})
}

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	mf := addModelFlags(fs)
	runs := fs.Int("runs", 3, "measured passes over the fixed cases (3 cases per pass)")
	warmup := fs.Int("warmup", 1, "discarded passes before measuring")
	tokens := fs.Int("tokens", 80, "generated tokens per action: </s> is suppressed until then, so every runner decodes the same length")
	screens := fs.String("screens", "models/testdata/screens", "directory of PNG/JPEG screenshots for the cases (a synthetic screen if none)")
	name := fs.String("name", "", "model label in reports (default: the manifest's size)")
	jsonOut := fs.String("json", "", "write the report as JSON to this file")
	benchstatOut := fs.String("benchstat", "", "write benchstat-compatible lines to this file (- for stdout)")
	peerInputs := fs.String("peer-inputs", "", "write the cases and prompts for scripts/peers to this JSON file")
	doProbe := fs.Bool("probe", true, "measure memory bandwidth and matmul throughput and print measured/bound per stage")
	probeMB := fs.Int("probe-mb", 512, "buffer size of the bandwidth probe, in MiB (far above the last-level cache)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui bench --model DIR [--runs N] [--warmup N] [--threads N] [--provider cpu|cuda] [--tokens 80] [--json FILE]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cases, err := bench.DefaultCases(*screens)
	if err != nil {
		return err
	}
	p, closeFn, err := mf.open()
	if err != nil {
		return err
	}
	defer closeFn()
	threads := mf.threads
	if threads == 0 {
		threads = engine.PhysicalCores()
	}
	label := *name
	if label == "" {
		label = p.Bundle().Manifest.Model.Size
	}
	opts := bench.Options{Runs: *runs, Warmup: *warmup, Tokens: *tokens}
	fmt.Fprintf(os.Stderr, "bench: %s, %d cases x (%d warm-up + %d runs), %d tokens each...\n", label, len(cases), *warmup, *runs, *tokens)
	actions, err := bench.Run(ctx, p, cases, opts)
	if err != nil {
		return err
	}
	rep := bench.NewReport("autoui-go", label, threads, mf.provider, opts, cases, actions)
	rep.Bundle = mf.model
	rep.Runtime = engine.RuntimeVersion()
	rep.Decoding = mf.decoding
	if rep.Decoding == "" {
		rep.Decoding = engine.DecodeSpeculative.String()
	}
	rep.Memory = bench.ReadMemory() // before the probe's buffer inflates RSS
	if *doProbe {
		fmt.Fprintln(os.Stderr, "bench: probing memory bandwidth and matmul throughput...")
		t := time.Now()
		bw := probe.MeasureBandwidth(int64(*probeMB)<<20, threads, 5)
		bwTime := time.Since(t)
		gemm, err := probe.MeasureGEMM(probe.DefaultGEMM, threads, 10)
		if err != nil {
			return err
		}
		rep.AddLimits(probe.ShapesOf(p.Bundle()), probe.Machine{Bandwidth: bw.Best, GEMM: gemm.Best},
			&bench.MachineInfo{CPU: probe.CPUName(), Threads: threads, Bandwidth: bw, GEMM: gemm, BandwidthTime: bwTime})
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if *benchstatOut != "" {
		if err := writeBenchOutput(*benchstatOut, rep.WriteBenchstat); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		b, err := rep.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonOut, err)
		}
	}
	if *peerInputs != "" {
		if err := bench.WritePeerInputs(*peerInputs, cases, actions, *tokens); err != nil {
			return err
		}
	}
	return nil
}

// writeBenchOutput writes with fn to path, or to stdout for "-".
func writeBenchOutput(path string, fn func(io.Writer) error) error {
	if path == "-" {
		return fn(os.Stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
