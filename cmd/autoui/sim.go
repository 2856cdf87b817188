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

	"github.com/autoui/autoui/device/adbtest"
	"github.com/autoui/autoui/sim"
	"github.com/autoui/autoui/sim/tasks"
)

func init() {
	register(command{name: "sim", summary: "run the simulated phone as a device `adb connect` can reach", run: runSim})
}

func runSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	port := fs.Int("port", 5555, "TCP port on 127.0.0.1 for `adb connect 127.0.0.1:PORT` (0: any free port)")
	seed := fs.Int64("seed", 0, "seed of the generated phone (apps, layout, contacts, settings...)")
	size := fs.String("size", "1080x2400", "screen size WIDTHxHEIGHT in pixels")
	family := fs.String("task", "", "start in the start state of a task of this family ("+strings.Join(tasks.Families, ", ")+") generated from --seed, print its goal, and report success on exit")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: autoui sim [--port P] [--seed S] [--size WxH] [--task FAMILY]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	w, h, err := parseSize(*size)
	if err != nil {
		return err
	}
	var phone *sim.Phone
	var task *tasks.Task
	if *family != "" {
		if !tasks.KnownFamily(*family) {
			return fmt.Errorf("unknown task family %q (have %s)", *family, strings.Join(tasks.Families, ", "))
		}
		t := tasks.Generate(*family, *seed)
		task = &t
		if phone, err = t.NewPhone(tasks.Options{Width: w, Height: h}); err != nil {
			return err
		}
	} else {
		phone = sim.New(sim.Options{Width: w, Height: h, Seed: *seed})
	}

	dev, err := adbtest.Start(adbtest.Options{Phone: phone, Product: "autoui_sim", Model: "AutoUI_Sim", DeviceName: "sim"})
	if err != nil {
		return fmt.Errorf("start simulated device: %w", err)
	}
	defer dev.Close()
	addr := dev.Addr()
	if *port != 0 {
		// The fake device listens on a port of its own choosing; forward the
		// requested port to it so `adb connect 127.0.0.1:PORT` works.
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
		if err != nil {
			return fmt.Errorf("listen on port %d: %w", *port, err)
		}
		defer ln.Close()
		go forward(ctx, ln, dev.Addr())
		addr = ln.Addr().String()
	}
	fmt.Fprintf(os.Stderr, "simulated phone (seed %d, %dx%d) listening; connect with: adb connect %s\n", *seed, w, h, addr)
	if task != nil {
		fmt.Fprintf(os.Stderr, "task %s/%d (%s split): %s\n", task.Family, task.Seed, task.Split, task.Goal)
	}
	fmt.Fprintln(os.Stderr, "press Ctrl-C to stop")
	<-ctx.Done()
	if task != nil {
		fmt.Printf("task %s/%d success: %v\n", task.Family, task.Seed, task.Success(phone))
	}
	return nil
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

// parseSize reads "WIDTHxHEIGHT".
func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w < 90 || h < 160 || w > 4096 || h > 8192 {
		return 0, 0, fmt.Errorf("bad --size %q: want WIDTHxHEIGHT, e.g. 1080x2400", s)
	}
	return w, h, nil
}
