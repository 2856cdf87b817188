package device

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/autoui/autoui/action"
)

// maxTextChunk bounds the raw text of one `input text` command. Quoting can
// grow it 4x; the result stays far below the 4 KiB service-name limit of the
// oldest adbd.
const maxTextChunk = 200

// ShellQuote quotes s for the device's POSIX shell (mksh): inside single
// quotes nothing is special, and a single quote itself is written '\”.
// NUL bytes cannot travel in a shell command line and are dropped.
func ShellQuote(s string) string {
	s = strings.ReplaceAll(s, "\x00", "")
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TextCommands returns the `input text` command lines that type text
// literally, whatever it holds.
//
// Two layers decode the argument on the device. The shell: every chunk is
// single-quoted (ShellQuote), so `;&|$<>()`, backticks, quotes, newlines and
// globs reach `input` as plain characters and nothing else runs. Then
// Android's `input text` itself, which turns each "%s" into a space (and
// nothing else): spaces are sent as "%s" (older Androids mistype raw spaces),
// and a literal "%" followed by "s" — which no escaping can express — is split
// across two commands so that the "%" ends one argument and the "s" starts the
// next. Long text is split into several commands as well; empty text gives
// none. Characters outside the virtual keyboard map (non-ASCII) are passed
// through, but stock Android cannot type them with `input text` and Run
// refuses such lines: PlanText folds them or uses ADBKeyboard instead.
func TextCommands(text string) []string {
	text = strings.ReplaceAll(text, "\x00", "")
	var cmds []string
	for _, chunk := range splitText(text) {
		arg := strings.ReplaceAll(chunk, " ", "%s")
		cmds = append(cmds, "input text "+ShellQuote(arg))
	}
	return cmds
}

// splitText cuts text between every "%" and a following "s", and into
// pieces of at most maxTextChunk bytes on rune boundaries.
func splitText(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); {
		_, size := utf8.DecodeRuneInString(text[i:])
		if i > start && (i-start+size > maxTextChunk || text[i] == 's' && text[i-1] == '%') {
			out = append(out, text[start:i])
			start = i
		}
		i += size
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// Commands returns the shell command lines that perform g; nil for
// GestureStop and GestureNone.
func Commands(g action.Gesture, swipeMs int) []string {
	switch g.Kind {
	case action.GestureTap:
		return []string{fmt.Sprintf("input tap %d %d", g.X1, g.Y1)}
	case action.GestureSwipe:
		return []string{fmt.Sprintf("input swipe %d %d %d %d %d", g.X1, g.Y1, g.X2, g.Y2, swipeMs)}
	case action.GestureText:
		return TextCommands(g.Text)
	case action.GestureKey:
		return []string{fmt.Sprintf("input keyevent %d", g.KeyCode)}
	}
	return nil
}

// Plan is what a gesture turns into on this device.
type Plan struct {
	Gesture  action.Gesture
	Commands []string
	Width    int
	Height   int
	// TextWarning, for a text gesture, says why the typed text differs from
	// the model's (folded to ASCII); record it with the step.
	TextWarning string
	// Refused, when set, is why the action cannot be performed (non-ASCII
	// text under TextRefuse); Run refuses its commands with the same reason.
	Refused error
}

// PlanAction maps a into pixels for a width x height screen and returns the
// commands that perform it. Text is typed as the device's non-ASCII mode
// says (PlanText).
func (d *Device) PlanAction(a action.Action, width, height int) Plan {
	g := a.Gesture(width, height)
	p := Plan{Gesture: g, Commands: Commands(g, d.SwipeMs()), Width: width, Height: height}
	if g.Kind == action.GestureText {
		tp := d.PlanText(g.Text)
		p.Commands, p.TextWarning, p.Refused = tp.Commands, tp.Warning, tp.Refused
		if tp.Refused == nil {
			p.Gesture.Text = tp.Typed // what the device types: folded, say
		}
	}
	return p
}

// SwipeMs is the `input swipe` duration in milliseconds.
func (d *Device) SwipeMs() int { return int(d.opts.SwipeDuration.Milliseconds()) }

// Dispatch performs a plan: Run of its commands.
func (d *Device) Dispatch(ctx context.Context, p Plan) error { return d.Run(ctx, p.Commands) }

// rcMarker is echoed after each command with its exit status: the legacy
// shell service does not report it.
const (
	rcMarker   = "__autoui_rc="
	statusEcho = "; echo " + rcMarker + "$?" // fakephone.StatusMarker
)

// Run sends command lines to the device in order, each with its own
// deadline. A command fails when its exit status is not 0 or it printed a
// Java exception or an error; the error names the command and gives the
// cause (and its fix, when known) in one line. An `input text` line with
// characters outside ASCII is refused before it is sent: stock Android
// cannot type them. Commands are never retried (they are not idempotent).
// Lines that switch to ADBKeyboard wait until it is the input method, and
// the previous IME is selected again even when typing failed (typing.go).
func (d *Device) Run(ctx context.Context, cmds []string) error {
	for i, c := range cmds {
		if strings.HasPrefix(c, "input text ") && !isASCII(c) {
			return fmt.Errorf("device %s: %q not sent: `input text` cannot type %q (install the ADBKeyboard IME, or let autoui fold text to ASCII)", d.serial, c, nonASCIIRunes(c))
		}
		out, err := d.runOne(ctx, c)
		if err == nil {
			err = d.afterCommand(ctx, c, out)
		}
		if err != nil {
			return d.restoreIME(ctx, cmds[:i+1], cmds[i+1:], err)
		}
	}
	return nil
}

// runOne sends one command line and returns what it printed, or why it
// failed.
func (d *Device) runOne(ctx context.Context, c string) (string, error) {
	out, rc, err := d.execShell(ctx, c)
	switch o := strings.TrimSpace(out); {
	case errors.Is(err, errTruncated):
		return o, fmt.Errorf("device %s: %q: no exit status came back (the link dropped?)", d.serial, c)
	case err != nil:
		return "", d.wrap(fmt.Sprintf("%q", c), err)
	case rc != 0:
		return o, fmt.Errorf("device %s: %q failed (exit status %d): %s", d.serial, c, rc, commandFailure(o))
	case reJavaException.MatchString(o) || strings.HasPrefix(o, "Error") || strings.Contains(o, "not found"):
		// Old `input` builds print an exception and still exit 0.
		return o, fmt.Errorf("device %s: %q failed: %s", d.serial, c, commandFailure(o))
	}
	return out, nil
}

// splitExitStatus removes the rcMarker line from out and returns the
// status it carries; ok is false when it is missing.
func splitExitStatus(out string) (string, int, bool) {
	i := strings.LastIndex(out, rcMarker)
	if i < 0 {
		return out, 0, false
	}
	rest := strings.TrimSpace(out[i+len(rcMarker):])
	rc, err := strconv.Atoi(rest)
	if err != nil {
		return out, 0, false
	}
	return out[:i], rc, true
}
