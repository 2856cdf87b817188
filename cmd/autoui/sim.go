package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autoui/autoui/device/fakephone"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
)

func init() {
	register(command{name: "sim", summary: "run the simulated phone as a device `adb connect` can reach", run: runSim})
}

// simConfig is what `autoui sim` was asked to serve.
type simConfig struct {
	port        int
	seed        int64
	width       int
	height      int
	family      string
	android     int
	adbKeyboard bool
	animate     bool
}

// simIMESwitchDelay is how long the sim's `ime set` takes to hand over to the
// new IME, as on a phone where ADBKeyboard starts (and registers its
// receiver) a moment after the switch: text broadcast earlier is lost.
const simIMESwitchDelay = 300 * time.Millisecond

// simScreencapDelay is what a capture costs the animated sim: a phone
// encodes its 1080x2400 screenshot in a few hundred ms, which is what lets
// a spinner move between the captures of a pixel settle (the sim's own
// capture takes a few ms).
const simScreencapDelay = 200 * time.Millisecond

// simServer is a running simulated phone.
type simServer struct {
	dev   *fakephone.Device
	phone *sim.Phone
	task  *tasks.Task
	addr  string // what `adb connect` takes
	stop  func()
}

func runSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	var cfg simConfig
	fs.IntVar(&cfg.port, "port", 5555, "listen on 127.0.0.1:`PORT` for adb connect 127.0.0.1:PORT (0: any free port)")
	fs.Int64Var(&cfg.seed, "seed", 0, "`seed` of the generated phone (apps, layout, contacts, settings...)")
	size := fs.String("size", "1080x2400", "screen size `WxH` in pixels")
	fs.StringVar(&cfg.family, "task", "", "start in the start state of a task of this `family` ("+strings.Join(tasks.Families, ", ")+") generated from --seed, print its goal, and report success on exit")
	fs.IntVar(&cfg.android, "android", fakephone.DefaultAndroid, fmt.Sprintf("Android `version` (%d-%d) whose getprop and dumpsys output the phone prints; the default is the API level the dataset records", fakephone.MinAndroid, fakephone.MaxAndroid))
	fs.BoolVar(&cfg.adbKeyboard, "adbkeyboard", false, "install the ADBKeyboard IME, so its ADB_INPUT_B64 broadcast types any text (without it, input text refuses non-ASCII like a phone)")
	fs.BoolVar(&cfg.animate, "animate", false, "animate like a phone: pages slide in, a focused field's cursor blinks, list apps and web pages show a spinner, and a screenshot takes 200 ms as a phone's does (for trying autoui run's --settle modes; screens then differ from the dataset's)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui sim [--port P] [--seed S] [--size WxH] [--task FAMILY] [--android N] [--adbkeyboard] [--animate]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return usageErrorf("--port %d: want 0-65535", cfg.port)
	}
	var err error
	if cfg.width, cfg.height, err = parseSize(*size, simSizes); err != nil {
		return err
	}
	s, err := startSim(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Fprintf(os.Stderr, "simulated phone (seed %d, %dx%d, Android %d) listening; connect with: adb connect %s\n", cfg.seed, cfg.width, cfg.height, cfg.android, s.addr)
	if s.task != nil {
		fmt.Fprintf(os.Stderr, "task %s/%d (%s split): %s\n", s.task.Family, s.task.Seed, s.task.Split, s.task.Goal)
	}
	fmt.Fprintln(os.Stderr, "press Ctrl-C to stop")
	<-ctx.Done()
	if s.task != nil {
		fmt.Printf("task %s/%d success: %v\n", s.task.Family, s.task.Seed, s.task.Success(s.phone))
	}
	return nil
}

// startSim builds the phone and serves it as a device on cfg.port.
func startSim(ctx context.Context, cfg simConfig) (*simServer, error) {
	if cfg.android < fakephone.MinAndroid || cfg.android > fakephone.MaxAndroid {
		return nil, usageErrorf("--android %d: want %d-%d", cfg.android, fakephone.MinAndroid, fakephone.MaxAndroid)
	}
	s := &simServer{}
	if cfg.family != "" {
		if !tasks.KnownFamily(cfg.family) {
			return nil, usageErrorf("--task %q: unknown task family (have %s)", cfg.family, strings.Join(tasks.Families, ", "))
		}
		t := tasks.Generate(cfg.family, cfg.seed)
		s.task = &t
		phone, err := t.NewPhone(tasks.Options{Width: cfg.width, Height: cfg.height, Animate: cfg.animate})
		if err != nil {
			return nil, err
		}
		s.phone = phone
	} else {
		s.phone = sim.New(sim.Options{Width: cfg.width, Height: cfg.height, Seed: cfg.seed, Animate: cfg.animate})
	}
	fo := fakephone.Options{Phone: s.phone, Product: "autoui_sim", Model: "AutoUI_Sim", DeviceName: "sim",
		Manufacturer: "AutoUI", Android: cfg.android, ADBKeyboard: cfg.adbKeyboard, IMESwitchDelay: simIMESwitchDelay, ShellV2: true}
	if cfg.animate {
		fo.ScreencapDelay = simScreencapDelay
	}
	dev, err := fakephone.Start(fo)
	if err != nil {
		return nil, fmt.Errorf("start simulated device: %w", err)
	}
	s.dev, s.addr, s.stop = dev, dev.Addr(), dev.Close
	if cfg.port != 0 {
		// The fake device listens on a port of its own choosing; forward the
		// requested port to it so `adb connect 127.0.0.1:PORT` works.
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.port)))
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("listen on port %d: %w", cfg.port, err)
		}
		fwdCtx, cancel := context.WithCancel(ctx)
		go forward(fwdCtx, ln, dev.Addr())
		s.addr = ln.Addr().String()
		s.stop = func() { cancel(); ln.Close(); dev.Close() }
	}
	return s, nil
}

// forward proxies each connection on ln to target until ctx ends.
func forward(ctx context.Context, ln net.Listener, target string) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			d, err := net.Dial("tcp", target)
			if err != nil {
				fmt.Fprintf(os.Stderr, "sim: connect to device: %v\n", err)
				return
			}
			defer d.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(dst, src) // an error just ends the session; adb reconnects
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}
			go pipe(d, c)
			go pipe(c, d)
			wg.Wait()
		}()
	}
}
