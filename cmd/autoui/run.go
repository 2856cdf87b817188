package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/autoui/autoui/agent"
	"github.com/autoui/autoui/device"
	"github.com/autoui/autoui/outlock"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/screendiff"
)

func init() {
	register(command{name: "run", summary: "act on an Android device over ADB until the goal is done", run: runCmd})
}

// runFlags are the device and episode flags of `autoui run`.
type runFlags struct {
	serial         string
	goal           string
	maxSteps       int
	dryRun         bool
	confirm        bool
	out            string
	overwrite      bool
	adbHost        string
	adbPort        int
	size           string
	swipeMs        int
	settle         string
	settleMin      time.Duration
	settleTimeout  time.Duration
	settleInterval time.Duration
	settleFrames   int
	onNoEffect     string
	repeatLimit    int
	noAnnotate     bool
	nonASCII       string
	adbTimeout     time.Duration
}

func addRunFlags(fs *flag.FlagSet) *runFlags {
	r := &runFlags{}
	fs.StringVar(&r.serial, "serial", "", "device serial as 'adb devices' lists it (default: the only device attached)")
	fs.StringVar(&r.goal, "goal", "", "the task in natural language, e.g. \"Open the settings app\"; required")
	fs.IntVar(&r.maxSteps, "max-steps", 30, "step budget: stop after this many predictions")
	fs.BoolVar(&r.dryRun, "dry-run", false, "predict and print the device commands without sending them")
	fs.BoolVar(&r.confirm, "confirm", false, "ask on the terminal before each action: y sends it, n skips it, q stops")
	fs.StringVar(&r.out, "out", "", "write the trajectory here: steps.jsonl, screenshots, annotated PNGs, summary.json, android_world.jsonl (a directory that holds files is refused unless --overwrite)")
	fs.BoolVar(&r.overwrite, "overwrite", false, "replace an earlier trajectory in --out (never a directory with other files)")
	fs.StringVar(&r.adbHost, "adb-host", "", "adb server host (default localhost)")
	fs.IntVar(&r.adbPort, "adb-port", 0, "adb server port (default $ANDROID_ADB_SERVER_PORT or 5037)")
	fs.StringVar(&r.size, "size", "", "screen size WxH for mapping coordinates (default: 'wm size', override honoured, turned by the orientation)")
	fs.IntVar(&r.swipeMs, "swipe-ms", 300, "duration of 'input swipe' in milliseconds")
	fs.StringVar(&r.settle, "settle", agent.SettlePixels, "after an action, wait until this stops changing: pixels (screenshots) or ui (the UI hierarchy from uiautomator dump, as AndroidWorld: animations, a blinking cursor or a spinner do not hold it up; its defaults: --settle-min 0, --settle-interval 500ms, --settle-timeout 6s)")
	fs.DurationVar(&r.settleMin, "settle-min", time.Second, "after an action, wait this long before checking whether the screen settled (0: none)")
	fs.IntVar(&r.settleFrames, "settle-frames", 3, "the screen has settled when this many consecutive screenshots match (status bar masked, small differences tolerated); with --settle ui, this many consecutive checks equal the hierarchy before them")
	fs.DurationVar(&r.settleTimeout, "settle-timeout", 5*time.Second, "after an action, wait at most this long in all for the screen to settle (0: do not wait; effects are then unknown)")
	fs.DurationVar(&r.settleInterval, "settle-interval", 0, "pause between the settle screenshots (or hierarchy checks)")
	fs.StringVar(&r.onNoEffect, "on-no-effect", "continue", "when an action leaves the screen unchanged: continue, retry (send it once more) or stop")
	fs.IntVar(&r.repeatLimit, "repeat-limit", 3, "stop when the model predicts the same action this many times in a row")
	fs.BoolVar(&r.noAnnotate, "no-annotate", false, "do not write annotated PNGs to --out")
	fs.StringVar(&r.nonASCII, "non-ascii", device.TextAuto, "typing text outside ASCII ("+strings.Join(device.NonASCIIModes, ", ")+"): auto uses the ADBKeyboard IME when installed, else folds to ASCII with a warning; refuse stops instead")
	fs.DurationVar(&r.adbTimeout, "adb-timeout", 30*time.Second, "deadline for each device command (one shell line, one screenshot)")
	return r
}

func (r *runFlags) deviceOptions() (device.Options, error) {
	o := device.Options{Host: r.adbHost, Port: r.adbPort, Serial: r.serial, SwipeDuration: time.Duration(r.swipeMs) * time.Millisecond,
		NonASCII: r.nonASCII, CommandTimeout: r.adbTimeout}
	if r.swipeMs <= 0 {
		return o, usageErrorf("--swipe-ms %d: must be > 0", r.swipeMs)
	}
	if err := device.ValidateNonASCII(r.nonASCII); err != nil {
		return o, usageErrorf("--non-ascii: %v", err)
	}
	if r.adbPort < 0 || r.adbPort > 65535 {
		return o, usageErrorf("--adb-port %d: want 1-65535 (0: the default)", r.adbPort)
	}
	if r.adbTimeout <= 0 {
		return o, usageErrorf("--adb-timeout %s: must be > 0", r.adbTimeout)
	}
	if r.size != "" {
		w, h, err := parseSize(r.size, anySize)
		if err != nil {
			return o, err
		}
		o.Width, o.Height = w, h
	}
	return o, nil
}

func (r *runFlags) agentOptions(stdin io.Reader, prompt io.Writer, log io.Writer) agent.Options {
	o := agent.Options{
		Goal: r.goal, MaxSteps: r.maxSteps, DryRun: r.dryRun, OutDir: r.out, Overwrite: r.overwrite,
		Settle: r.settle, SettleMin: noneIfZero(r.settleMin), SettleTimeout: noneIfZero(r.settleTimeout), SettleInterval: r.settleInterval,
		StableFrames: r.settleFrames, OnNoEffect: r.onNoEffect, RepeatLimit: r.repeatLimit,
		NoAnnotate: r.noAnnotate, Log: log,
	}
	if r.confirm {
		o.Confirm = terminalConfirm(bufio.NewReader(stdin), prompt)
	}
	return o
}

// noneIfZero turns a flag's 0 ("none") into the agent's negative "none"
// (its 0 means the default).
func noneIfZero(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// settleDefaults gives the settle flags the user left alone the --settle
// ui mode's defaults (AndroidWorld's).
func (r *runFlags) settleDefaults(fs *flag.FlagSet) {
	if r.settle != agent.SettleUI {
		return
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["settle-min"] {
		r.settleMin = 0
	}
	if !set["settle-timeout"] {
		r.settleTimeout = agent.DefaultUISettleTimeout
	}
	if !set["settle-interval"] {
		r.settleInterval = agent.DefaultUISettleInterval
	}
}

func (r *runFlags) validate() error {
	if err := agent.ValidateSettle(r.settle); err != nil {
		return usageErrorf("--settle %v", err)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"settle-min", r.settleMin}, {"settle-timeout", r.settleTimeout}, {"settle-interval", r.settleInterval}} {
		if f.d < 0 {
			return usageErrorf("--%s %s: must be >= 0", f.name, f.d)
		}
	}
	switch {
	case strings.TrimSpace(r.goal) == "":
		return usageErrorf("--goal is required (what the agent should do, e.g. --goal \"Open the settings app\")")
	case r.maxSteps <= 0:
		return usageErrorf("--max-steps %d: must be > 0", r.maxSteps)
	case r.repeatLimit < 2:
		return usageErrorf("--repeat-limit %d: must be >= 2", r.repeatLimit)
	case r.settleFrames < 1:
		return usageErrorf("--settle-frames %d: must be >= 1", r.settleFrames)
	case !screendiff.ValidOnNoEffect(r.onNoEffect):
		return usageErrorf("--on-no-effect %q: want continue, retry or stop", r.onNoEffect)
	case r.overwrite && r.out == "":
		return usageErrorf("--overwrite needs --out")
	}
	return nil
}

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	mf := addModelFlags(fs)
	rf := addRunFlags(fs)
	sf := addServerFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui run (--model DIR | --server URL) --goal TEXT [--serial S] [--max-steps 30] [--dry-run] [--confirm] [--out DIR] [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rf.settleDefaults(fs)
	if err := rf.validate(); err != nil {
		return err
	}
	if err := sf.validate(fs, mf); err != nil {
		return err
	}
	devOpts, err := rf.deviceOptions()
	if err != nil {
		return err
	}
	dopts, err := mf.decodeOptions()
	if err != nil {
		return err
	}
	devOpts.MaxPixels = dopts.MaxPixels
	// Refuse a used --out, and make sure one can be written, before
	// anything slow happens.
	lock, err := prepareOutDir(rf.out, rf.overwrite)
	if err != nil {
		return err
	}
	defer lock.Release() // held until the episode is done
	return withOwnADBServer(devOpts, os.Stderr, func() error {
		// Reach the device before loading the model: a missing phone is the
		// more common mistake and the faster one to report.
		dev, err := device.Connect(ctx, devOpts)
		if err != nil {
			return err
		}
		pred, closePred, err := sf.open(mf)
		if err != nil {
			return err
		}
		defer closePred()
		return runEpisode(ctx, dev, pred, rf, os.Stdin, os.Stderr, os.Stdout)
	})
}

// prepareOutDir creates --out, locks it (so that no other process writes
// or clears it until the returned lock is released), refuses a used one and
// checks that a file can be written in it, so that a bad --out (e.g. under
// /proc) fails before the device is reached, not after. With no --out the
// lock is nil (Release does nothing).
func prepareOutDir(dir string, overwrite bool) (*outlock.Lock, error) {
	if dir == "" {
		return nil, nil
	}
	lock, err := outlock.Acquire(dir, "autoui run")
	if errors.Is(err, outlock.ErrLocked) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	if err := agent.CheckOutDir(dir, overwrite); err != nil {
		lock.Release()
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".autoui-write-check-*")
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("--out: %w", err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		lock.Release()
		return nil, fmt.Errorf("--out: %w", err)
	}
	return lock, nil
}

// runEpisode plays the episode and prints the summary. Split from runCmd so
// tests drive it with a fake predictor. A dry run ends without error on its
// budget, on a repeat or on a stop status: it only shows what would be sent.
func runEpisode(ctx context.Context, dev *device.Device, pred predict.Predictor, rf *runFlags, stdin io.Reader, prompt, out io.Writer) error {
	mode := ""
	if rf.dryRun {
		mode = " (dry run: nothing is sent)"
	}
	fmt.Fprintf(out, "device %s %s%s\ngoal: %s\n", dev.Serial(), dev.Model(), mode, rf.goal)
	opts := rf.agentOptions(stdin, prompt, out)
	opts.Source = predictorSource(pred)
	sum, err := agent.New(dev, pred, opts).Run(ctx)
	// A trajectory whose summary.json could not be written (nor perhaps
	// anything else) is not announced as written.
	written := false
	if rf.out != "" {
		_, serr := os.Stat(filepath.Join(rf.out, "summary.json"))
		written = serr == nil
	}
	switch {
	case written && rf.dryRun:
		fmt.Fprintf(out, "trajectory: %s (steps.jsonl, summary.json; no android_world.jsonl: nothing was performed)\n", rf.out)
	case written:
		fmt.Fprintf(out, "trajectory: %s (steps.jsonl, summary.json, android_world.jsonl)\n", rf.out)
	}
	if err != nil {
		return err
	}
	switch sum.StopReason {
	case agent.StopUnparsable, agent.StopRepeated, agent.StopNoEffect:
		return errors.New(sum.Error)
	case agent.StopInterrupted:
		detail := "nothing was written (no --out)"
		switch {
		case written:
			detail = "the trajectory so far is kept in " + rf.out
		case rf.out != "":
			detail = "no trajectory was written to " + rf.out
		}
		return interruptedError{detail}
	}
	return nil
}

// terminalConfirm asks before each action: y sends it, n skips it, q ends
// the episode. End of input counts as q.
func terminalConfirm(in *bufio.Reader, prompt io.Writer) func(context.Context, *agent.Step) (agent.Decision, error) {
	return func(ctx context.Context, s *agent.Step) (agent.Decision, error) {
		for {
			fmt.Fprintf(prompt, "step %d: %s\n  commands: %s\nsend it? [y]es / [n]o, skip / [q]uit: ", s.Step, s.Action, strings.Join(s.Commands, "; "))
			type answer struct {
				line string
				err  error
			}
			ch := make(chan answer, 1)
			go func() {
				l, err := in.ReadString('\n')
				ch <- answer{l, err}
			}()
			var a answer
			select {
			case <-ctx.Done():
				return agent.Quit, ctx.Err()
			case a = <-ch:
			}
			switch strings.ToLower(strings.TrimSpace(a.line)) {
			case "y", "yes":
				return agent.Proceed, nil
			case "n", "no", "s", "skip":
				return agent.Skip, nil
			case "q", "quit":
				return agent.Quit, nil
			}
			if a.err != nil {
				fmt.Fprintln(prompt)
				return agent.Quit, nil
			}
		}
	}
}
