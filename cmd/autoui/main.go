// Command autoui predicts, evaluates, benchmarks and acts with Auto-UI models.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so subcommands are added without touching this file.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("autoui: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: autoui <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'autoui <command> -h' for its flags")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(exitUsage)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		os.Exit(exitOK)
	case "-version", "--version":
		os.Args[1] = "version"
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "autoui: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(exitUsage)
	}
	// Ctrl-C cancels the context: long commands stop between steps and keep
	// what they already wrote. A second Ctrl-C kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := c.run(ctx, os.Args[2:])
	code := exitCode(err)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, errorLine(c.name, err))
	}
	os.Exit(code)
}

// errorLine is a command's error as the one line it prints: ONNX Runtime's
// messages, a hint, a page a server answered may hold line breaks.
func errorLine(command string, err error) string {
	return "autoui " + command + ": " + strings.Join(strings.Fields(err.Error()), " ")
}

// Exit codes, the same for every command (docs/device.md, "Exit codes").
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2   // bad flags or arguments; -h
	exitInterrupted = 130 // Ctrl-C or SIGTERM, as shells report 128+SIGINT
)

// usageError is a mistake on the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// interruptedError says a command stopped because it was interrupted and
// kept what it had done (exit 130); detail says what the user can do next.
type interruptedError struct{ detail string }

func (e interruptedError) Error() string {
	if e.detail == "" {
		return "interrupted"
	}
	return "interrupted: " + e.detail
}

// exitCode maps a command's error to the process exit status.
func exitCode(err error) int {
	var usage usageError
	var intr interruptedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK // asked for
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &intr), errors.Is(err, context.Canceled):
		// The only cancel is the signal context: a command that returns its
		// error as is was interrupted too.
		return exitInterrupted
	}
	return exitError
}

// parseFlags parses a subcommand's flags; stray arguments are an error, so a
// mistyped flag value is not silently ignored. A bad flag is one line (main
// prints the error); only -h shows the usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Stdout.Write(usage.Bytes()) // asked for: stdout, as `| less` expects
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
