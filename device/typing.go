package device

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// How text outside ASCII is typed (Options.NonASCII). Stock Android's
// `input text` types only what the virtual keyboard map holds (ASCII) and
// throws on anything else.
const (
	// TextAuto types ASCII with `input text`; other text through the
	// ADBKeyboard IME when it is installed, else folded to ASCII with a
	// warning. The default.
	TextAuto = "auto"
	// TextFold always folds to ASCII (as AndroidWorld does), with a warning
	// when that changed the text.
	TextFold = "fold"
	// TextRefuse refuses text outside ASCII: the step fails with an error
	// instead of typing something else.
	TextRefuse = "refuse"
	// TextADBKeyboard types all text through the ADBKeyboard IME's base64
	// broadcast; Connect fails when the IME is not installed.
	TextADBKeyboard = "adbkeyboard"
)

// NonASCIIModes lists the accepted Options.NonASCII values, for flag help.
var NonASCIIModes = []string{TextAuto, TextFold, TextRefuse, TextADBKeyboard}

// ADBKeyboardIME is the IME id of ADBKeyboard (github.com/senzhk/ADBKeyBoard).
const ADBKeyboardIME = "com.android.adbkeyboard/.AdbIME"

// maxBroadcastChunk bounds the UTF-8 bytes of one ADB_INPUT_B64 broadcast;
// base64 grows it by 4/3, well within a shell command line.
const maxBroadcastChunk = 600

// ValidateNonASCII checks an Options.NonASCII value ("" is TextAuto).
func ValidateNonASCII(mode string) error {
	if mode == "" {
		return nil
	}
	for _, m := range NonASCIIModes {
		if mode == m {
			return nil
		}
	}
	return fmt.Errorf("unknown non-ASCII typing mode %q (want %s)", mode, strings.Join(NonASCIIModes, ", "))
}

// imeState is what Connect learnt about the device's input methods.
type imeState struct {
	adbKeyboard bool   // ADBKeyboard is installed
	current     string // the IME selected before we switch; restored after typing
}

// detectIME asks the device whether ADBKeyboard is installed, and which IME
// is selected, when the typing mode may use it.
func (d *Device) detectIME(ctx context.Context) error {
	mode := d.opts.NonASCII
	if mode == TextFold || mode == TextRefuse {
		return nil
	}
	out, err := d.readShellText(ctx, "ime list -a -s")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == ADBKeyboardIME {
			d.ime.adbKeyboard = true
		}
	}
	if !d.ime.adbKeyboard {
		if mode == TextADBKeyboard {
			return fmt.Errorf("device %s: the ADBKeyboard IME (%s) is not installed: install ADBKeyboard.apk (github.com/senzhk/ADBKeyBoard) with `adb install`, or choose another non-ASCII typing mode", d.serial, ADBKeyboardIME)
		}
		return nil
	}
	cur, err := d.readShellText(ctx, "settings get secure default_input_method")
	if err != nil {
		return err
	}
	if cur = strings.TrimSpace(cur); cur != "null" && !strings.ContainsAny(cur, " \t'\"") {
		d.ime.current = cur
	}
	return nil
}

// HasADBKeyboard reports whether the device has the ADBKeyboard IME.
func (d *Device) HasADBKeyboard() bool { return d.ime.adbKeyboard }

// TextPlan is how one text is typed on this device.
type TextPlan struct {
	Commands []string
	// Typed is the text the device will type (the folded text when folded).
	Typed string
	// Warning, when set, says why Typed differs from the text asked for.
	Warning string
	// Refused, when set, is why the text is not typed (TextRefuse); the
	// Commands then are plain `input text` lines that Run refuses too.
	Refused error
}

// PlanText chooses how to type text under the device's non-ASCII mode.
func (d *Device) PlanText(text string) TextPlan {
	text = strings.ReplaceAll(text, "\x00", "")
	ascii := isASCII(text)
	switch mode := d.opts.NonASCII; {
	case mode == TextADBKeyboard || (!ascii && d.ime.adbKeyboard && mode != TextFold && mode != TextRefuse):
		return TextPlan{Commands: d.broadcastCommands(text), Typed: text}
	case ascii:
		return TextPlan{Commands: TextCommands(text), Typed: text}
	case mode == TextRefuse:
		return TextPlan{Commands: TextCommands(text), Refused: nonASCIIError(text)}
	}
	folded, lost := FoldASCII(text)
	p := TextPlan{Commands: TextCommands(folded), Typed: folded}
	p.Warning = fmt.Sprintf("typed %q for %q: `input text` types ASCII only", folded, text)
	if len(lost) > 0 {
		p.Warning += fmt.Sprintf("; dropped %q (no ASCII form)", string(lost))
	}
	p.Warning += "; install the ADBKeyboard IME to type it exactly"
	return p
}

func nonASCIIError(text string) error {
	return fmt.Errorf("text %q has characters `input text` cannot type (%q): install the ADBKeyboard IME, or let autoui fold them to ASCII", text, nonASCIIRunes(text))
}

// nonASCIIRunes lists the first few characters of s outside ASCII.
func nonASCIIRunes(s string) string {
	var odd []rune
	for _, r := range s {
		if r >= utf8.RuneSelf && len(odd) < 8 {
			odd = append(odd, r)
		}
	}
	return string(odd)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// broadcastCommands types text through ADBKeyboard: select the IME (when
// another one is selected), one base64 broadcast per chunk (base64 keeps any
// text shell-safe and intact), then select the previous IME again.
func (d *Device) broadcastCommands(text string) []string {
	if text == "" {
		return nil
	}
	var cmds []string
	switchIME := d.ime.current != ADBKeyboardIME
	if switchIME {
		cmds = append(cmds, "ime enable "+ADBKeyboardIME, selectADBKeyboard)
	}
	for _, chunk := range chunkRunes(text, maxBroadcastChunk) {
		cmds = append(cmds, broadcastPrefix+"--es msg "+ShellQuote(base64.StdEncoding.EncodeToString([]byte(chunk))))
	}
	if switchIME && d.ime.current != "" {
		cmds = append(cmds, imeSetPrefix+ShellQuote(d.ime.current))
	}
	return cmds
}

// Lines broadcastCommands writes, which Run treats specially.
const (
	selectADBKeyboard = "ime set " + ADBKeyboardIME
	broadcastPrefix   = "am broadcast -a ADB_INPUT_B64 "
	imeSetPrefix      = "ime set "
)

// Waiting for ADBKeyboard to take over after `ime set`: a real switch takes
// well under a second; the wait is bounded by the command timeout too.
const (
	imeSwitchLimit = 5 * time.Second
	imeSwitchPoll  = 100 * time.Millisecond
)

// afterCommand checks what a typing line did. `ime set` returns before the
// new IME runs, and ADBKeyboard registers its broadcast receiver only when
// it starts, so a broadcast sent too early reaches no one yet exits 0: wait
// until the device names ADBKeyboard as its input method. A broadcast that
// did not complete is an error.
func (d *Device) afterCommand(ctx context.Context, line, out string) error {
	switch {
	case line == selectADBKeyboard:
		return d.waitIME(ctx, ADBKeyboardIME)
	case strings.HasPrefix(line, broadcastPrefix) && !strings.Contains(out, "Broadcast completed"):
		return fmt.Errorf("device %s: ADBKeyboard broadcast did not complete: %s", d.serial, commandFailure(out))
	}
	return nil
}

// waitIME polls `settings get secure default_input_method` until it names
// id, bounded.
func (d *Device) waitIME(ctx context.Context, id string) error {
	limit := min(imeSwitchLimit, d.opts.CommandTimeout)
	deadline := time.Now().Add(limit)
	for {
		cur, err := d.readShellText(ctx, "settings get secure default_input_method")
		if err != nil {
			return err
		}
		if cur = strings.TrimSpace(cur); cur == id {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("device %s: `ime set %s` did not take effect within %s (the input method is still %q): nothing typed", d.serial, id, limit, cur)
		}
		if err := Sleep(ctx, imeSwitchPoll); err != nil {
			return err
		}
	}
}

// restoreIME selects the previous IME again when typing failed after the
// switch to ADBKeyboard, so the user's keyboard is not left replaced; the
// restore line is the last `ime set` of the lines not yet sent.
func (d *Device) restoreIME(ctx context.Context, sent, rest []string, err error) error {
	if !slices.Contains(sent, selectADBKeyboard) || len(rest) == 0 {
		return err
	}
	last := rest[len(rest)-1]
	if !strings.HasPrefix(last, imeSetPrefix) || last == selectADBKeyboard {
		return err
	}
	if _, rerr := d.runOne(context.WithoutCancel(ctx), last); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// chunkRunes cuts s into pieces of at most n bytes on rune boundaries.
func chunkRunes(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// foldSpecial maps letters and punctuation that have no ASCII
// decomposition but an obvious ASCII spelling.
var foldSpecial = map[rune]string{
	'ß': "ss", 'ẞ': "SS", 'æ': "ae", 'Æ': "AE", 'œ': "oe", 'Œ': "OE", 'ø': "o", 'Ø': "O",
	'ł': "l", 'Ł': "L", 'đ': "d", 'Đ': "D", 'ð': "d", 'Ð': "D", 'þ': "th", 'Þ': "TH", 'ı': "i",
	'‘': "'", '’': "'", '‚': "'", '‛': "'", '“': "\"", '”': "\"", '„': "\"", '«': "\"", '»': "\"",
	'‐': "-", '‑': "-", '‒': "-", '–': "-", '—': "-", '―': "-", '−': "-", '•': "*", '·': ".",
	'€': "EUR", '£': "GBP", '¥': "JPY", '©': "(c)", '®': "(R)", '°': " deg",
}

// FoldASCII spells text in ASCII: each character is decomposed (NFKD:
// "é" -> "e" + accent, "ﬁ" -> "fi", full-width "Ａ" -> "A"), combining marks
// are dropped, a few letters without a decomposition use their usual ASCII
// spelling (ß -> ss, ø -> o, curly quotes -> straight). What still has no
// ASCII form (CJK, emoji, ...) is dropped and returned in lost.
func FoldASCII(text string) (folded string, lost []rune) {
	var b strings.Builder
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
			continue
		case foldSpecial[r] != "":
			b.WriteString(foldSpecial[r])
			continue
		case unicode.Is(unicode.Mn, r):
			continue // a lone combining mark: the accent of the letter before
		}
		kept := false
		for _, p := range norm.NFKD.String(string(r)) {
			if p < utf8.RuneSelf {
				b.WriteRune(p)
				kept = true
			} else if s := foldSpecial[p]; s != "" {
				b.WriteString(s)
				kept = true
			}
		}
		if !kept {
			lost = append(lost, r)
		}
	}
	return b.String(), lost
}
