package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/autoui/autoui/aitw/progress"
	"github.com/autoui/autoui/screendiff"
	"github.com/autoui/autoui/sim/dataset"
	"github.com/autoui/autoui/sim/tasks"
)

func init() {
	register(command{name: "dataset", summary: "record simulator expert demonstrations as an AITW-format dataset", run: runDataset})
	register(command{name: "simeval", summary: "online evaluation: play unseen simulator tasks with a model, report success per family", run: runSimEval})
}

func runDataset(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dataset", flag.ContinueOnError)
	out := fs.String("out", ".cache/simdata", "output directory (SPLIT/FAMILY.tfrecord.gz, splits.json, dataset.json)")
	episodes := fs.Int("episodes", 3600, "episodes in all splits together (families round-robin; about 80/10/10 train/validation/test by seed)")
	seed := fs.Int64("seed", 0, "seed of the first episode; episode i uses seed+i")
	size := fs.String("size", "360x800", "screen size WIDTHxHEIGHT in pixels")
	families := fs.String("families", "", "comma-separated task families (default: all: "+strings.Join(tasks.Families, ",")+")")
	overwrite := fs.Bool("overwrite", false, "replace a dataset already in --out (a non-empty --out is refused otherwise)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui dataset [--out DIR] [--overwrite] [--episodes N] [--seed S] [--size WxH] [--families F,...]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *episodes < 1 {
		return usageErrorf("--episodes %d: want 1 or more", *episodes)
	}
	w, h, fams, err := parseScreenAndFamilies(*size, *families)
	if err != nil {
		return err
	}
	t0 := time.Now()
	prog := progress.Options{W: os.Stderr, TTY: term.IsTerminal(int(os.Stderr.Fd()))}
	st, err := dataset.Write(ctx, dataset.Options{Dir: *out, Episodes: *episodes, Seed: *seed, Width: w, Height: h, Families: fams, Progress: prog, Overwrite: *overwrite})
	if st != nil && st.Interrupted {
		n := 0
		for _, sp := range dataset.Splits {
			n += st.Episodes[sp]
		}
		return interruptedError{fmt.Sprintf("the %d of %d episodes written to %s are whole and kept; run the same command again to finish", n, *episodes, *out)}
	}
	if err != nil {
		return err
	}
	for _, sp := range dataset.Splits {
		fmt.Printf("%-10s %5d episodes %6d steps\n", sp, st.Episodes[sp], st.Steps[sp])
	}
	fmt.Printf("wrote %s: %.1f MB in %s\n", *out, float64(st.Bytes)/1e6, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// maxSimEvalTasks bounds simeval's --tasks: a family has about 10% of the
// seeds in its test split, and each task plays for seconds.
const maxSimEvalTasks = 100000

func runSimEval(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("simeval", flag.ContinueOnError)
	mf := addModelFlags(fs)
	perFamily := fs.Int("tasks", 20, "tasks per family")
	split := fs.String("split", "test", "seed split the tasks come from (train, val, test); test seeds are never trained on")
	start := fs.Int64("seed-start", 0, "first seed to consider")
	size := fs.String("size", "360x800", "screen size WIDTHxHEIGHT in pixels")
	families := fs.String("families", "", "comma-separated task families (default: all)")
	out := fs.String("out", "", "write one JSON line per episode here (an existing file is refused without --overwrite)")
	overwrite := fs.Bool("overwrite", false, "replace the --out file if it exists")
	verbose := fs.Bool("v", false, "print every episode")
	onNoEffect := fs.String("on-no-effect", "continue", "when an action leaves the screen unchanged: continue, retry (send it once more) or stop (end the episode)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui simeval --model DIR [--tasks 20] [--split test] [--out FILE]\n\n"+
			"Plays each task in process: screenshot -> predict (own previous actions as history) -> the\n"+
			"same pixel gestures `autoui run` sends over ADB, until the model stops; success is read\n"+
			"from the simulator's state.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !screendiff.ValidOnNoEffect(*onNoEffect) {
		return usageErrorf("--on-no-effect %q: want continue, retry or stop", *onNoEffect)
	}
	if *perFamily < 1 || *perFamily > maxSimEvalTasks {
		return usageErrorf("--tasks %d: want 1 to %d", *perFamily, maxSimEvalTasks)
	}
	w, h, fams, err := parseScreenAndFamilies(*size, *families)
	if err != nil {
		return err
	}
	if fams == nil {
		fams = tasks.Families
	}
	seeds := tasks.Seeds(*split, *start, *perFamily)
	if seeds == nil {
		return usageErrorf("--split %q: want train, val or test", *split)
	}
	p, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer closeModel()
	var jl *json.Encoder
	if *out != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
		if *overwrite {
			flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		}
		f, err := os.OpenFile(*out, flags, 0o644)
		if errors.Is(err, os.ErrExist) {
			return usageErrorf("--out %s exists: --overwrite replaces it", *out)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		jl = json.NewEncoder(f)
	}
	t0 := time.Now()
	var eps []dataset.Episode
	for _, fam := range fams {
		for _, seed := range seeds {
			ep, err := dataset.RunOnline(ctx, p, tasks.Generate(fam, seed), dataset.OnlineOptions{Width: w, Height: h, OnNoEffect: *onNoEffect})
			if err != nil && ctx.Err() != nil {
				fmt.Printf("%d of %d tasks played before the interruption\n", len(eps), len(fams)*len(seeds))
				if werr := dataset.WriteTable(os.Stdout, dataset.Summarize(eps)); werr != nil {
					return werr
				}
				return interruptedError{"the tasks played so far are in the table above"}
			}
			if err != nil {
				return err
			}
			eps = append(eps, ep)
			if jl != nil {
				if err := jl.Encode(ep); err != nil {
					return err
				}
			}
			if *verbose {
				fmt.Fprintf(os.Stderr, "%s/%d %-5v %2d steps %-10s %d no effect  %s\n", fam, seed, ep.Success, ep.Steps, ep.Stop, ep.Effects.None, ep.Goal)
			}
		}
	}
	fmt.Printf("%d tasks in %s\n", len(eps), time.Since(t0).Round(100*time.Millisecond))
	return dataset.WriteTable(os.Stdout, dataset.Summarize(eps))
}

// parseScreenAndFamilies reads --size and --families; a bad value is a
// usage error.
func parseScreenAndFamilies(size, families string) (w, h int, fams []string, err error) {
	if w, h, err = parseSize(size, simSizes); err != nil {
		return 0, 0, nil, usageError{err}
	}
	if fams, err = parseFamilies(families); err != nil {
		return 0, 0, nil, usageError{err}
	}
	return w, h, fams, nil
}

// parseFamilies reads a comma-separated --families value; empty means all
// (nil). Unknown names are an error here rather than a panic in tasks.Generate.
func parseFamilies(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	fams := strings.Split(s, ",")
	seen := map[string]bool{}
	for _, f := range fams {
		if !tasks.KnownFamily(f) {
			return nil, fmt.Errorf("--families: unknown task family %q (have %s)", f, strings.Join(tasks.Families, ", "))
		}
		if seen[f] { // each family's file is written once
			return nil, fmt.Errorf("--families: %q given twice", f)
		}
		seen[f] = true
	}
	return fams, nil
}
