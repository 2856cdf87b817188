package device

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/device/fakephone"
)

func TestFoldASCII(t *testing.T) {
	cases := []struct{ in, want, lost string }{
		{"café", "cafe", ""},
		{"Ünïcødé", "Unicode", ""},
		{"Straße", "Strasse", ""},
		{"ﬁle Ａ①", "file A1", ""},
		{"“quoted” – ok…", `"quoted" - ok...`, ""},
		{"e\u0301", "e", ""}, // a combining accent
		{"日本語 🎉 ok", "  ok", "日本語🎉"},
		{"plain", "plain", ""},
	}
	for _, c := range cases {
		got, lost := FoldASCII(c.in)
		if got != c.want || string(lost) != c.lost {
			t.Errorf("FoldASCII(%q) = %q, lost %q; want %q, lost %q", c.in, got, string(lost), c.want, c.lost)
		}
	}
}

// nonASCIITexts are model outputs a stock `input text` cannot type.
var nonASCIITexts = []string{
	"café crème", "Straße 5", "日本語", "emoji 🎉!", "naïve 'quote' $(reboot)", "ünïcødé 日本語 🎉",
	"‘smart’ “quotes” — dash", strings.Repeat("éàü 'x' %s ", 120),
}

// TestNonASCIIInputTextFailsLikeAPhone: the fake device throws on non-ASCII
// `input text` as Android does, and Run refuses such a line before sending.
func TestNonASCIIInputTextFailsLikeAPhone(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	for _, v := range []int{10, 14} {
		fake := r.add(t, fakephone.Options{Android: v})
		d := r.connect(t, Options{Serial: fake.Serial()})
		out, err := d.shellText(ctx, "input text 'café'")
		if err != nil || !strings.Contains(out, "NullPointerException") {
			t.Fatalf("Android %d: input text café printed %q, %v", v, out, err)
		}
		if typed := phoneOf(fake).TypedText(); typed != "" {
			t.Fatalf("Android %d typed %q", v, typed)
		}
		err = d.Run(ctx, []string{"input text 'café'"})
		if err == nil || !strings.Contains(err.Error(), "not sent") || !strings.Contains(err.Error(), "ADBKeyboard") {
			t.Fatalf("Run of non-ASCII input text: %v", err)
		}
	}
}

func TestTypingModes(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	t.Run("fold by default without ADBKeyboard", func(t *testing.T) {
		fake := r.add(t, fakephone.Options{})
		d := r.connect(t, Options{Serial: fake.Serial()})
		for _, s := range nonASCIITexts {
			before := phoneOf(fake).TypedText()
			p := d.PlanText(s)
			if p.Warning == "" || p.Refused != nil {
				t.Fatalf("%q: no warning (%+v)", s, p)
			}
			if err := d.Run(ctx, p.Commands); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			want, _ := FoldASCII(s)
			if got := strings.TrimPrefix(phoneOf(fake).TypedText(), before); got != want || got != p.Typed {
				t.Fatalf("typed %q, want %q", got, want)
			}
			// an action's plan records the text the device types
			a := action.Action{Type: action.TypeText, Text: s, Touch: action.NoPoint, Lift: action.NoPoint}
			if g := d.PlanAction(a, 1080, 2400).Gesture; g.Text != want {
				t.Fatalf("%q: the plan's gesture says %q, the device types %q", s, g.Text, want)
			}
		}
	})
	t.Run("refuse", func(t *testing.T) {
		fake := r.add(t, fakephone.Options{ADBKeyboard: true})
		d := r.connect(t, Options{Serial: fake.Serial(), NonASCII: TextRefuse})
		p := d.PlanText("café")
		if p.Refused == nil || !strings.Contains(p.Refused.Error(), "é") {
			t.Fatalf("plan = %+v", p)
		}
		if err := d.Run(ctx, p.Commands); err == nil {
			t.Fatal("Run sent refused text")
		}
		if len(fake.Inputs()) != 0 {
			t.Fatalf("inputs sent: %q", fake.Inputs())
		}
		if p := d.PlanText("plain ascii"); p.Refused != nil || p.Warning != "" {
			t.Fatalf("ASCII refused: %+v", p)
		}
	})
	t.Run("adbkeyboard types exactly and restores the IME", func(t *testing.T) {
		fake := r.add(t, fakephone.Options{ADBKeyboard: true})
		d := r.connect(t, Options{Serial: fake.Serial()})
		if !d.HasADBKeyboard() {
			t.Fatal("ADBKeyboard not detected")
		}
		ime := fake.CurrentIME()
		for _, s := range append(nonASCIITexts, hostileTexts...) {
			before, shellBefore := phoneOf(fake).TypedText(), len(fake.Shell())
			p := d.PlanText(s)
			if p.Warning != "" {
				t.Fatalf("%q: warning %q", s, p.Warning)
			}
			if err := d.Run(ctx, p.Commands); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			want := strings.ReplaceAll(s, "\x00", "")
			if got := strings.TrimPrefix(phoneOf(fake).TypedText(), before); got != want {
				t.Fatalf("typed %q, want %q (commands %q)", got, want, p.Commands)
			}
			if fake.CurrentIME() != ime {
				t.Fatalf("IME left at %q, was %q", fake.CurrentIME(), ime)
			}
			for _, sc := range fake.Shell()[shellBefore:] {
				if len(sc.Hazards) != 0 || len(sc.Commands) != 1 || sc.Exit != 0 {
					t.Fatalf("%q: line %q: hazards %q, exit %d", s, sc.Line, sc.Hazards, sc.Exit)
				}
			}
		}
	})
	t.Run("adbkeyboard required", func(t *testing.T) {
		fake := r.add(t, fakephone.Options{})
		_, err := Connect(ctx, Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Serial: fake.Serial(), NonASCII: TextADBKeyboard})
		if err == nil || !strings.Contains(err.Error(), "ADBKeyboard") {
			t.Fatalf("err = %v", err)
		}
		_, err = Connect(ctx, Options{Host: r.srv.Host, Port: r.srv.Port, NoStartServer: true, Serial: fake.Serial(), NonASCII: "wild"})
		if err == nil || !strings.Contains(err.Error(), "fold") {
			t.Fatalf("unknown mode: err = %v", err)
		}
	})
}

func TestLongTextIsChunked(t *testing.T) {
	s := strings.Repeat("日本語テキスト", 200)
	d := &Device{ime: imeState{adbKeyboard: true, current: "x/.Y"}}
	cmds := d.broadcastCommands(s)
	if len(cmds) < 5 || cmds[len(cmds)-1] != "ime set 'x/.Y'" {
		t.Fatalf("%d commands, last %q", len(cmds), cmds[len(cmds)-1])
	}
	for _, c := range cmds {
		if len(c) > 1000 {
			t.Fatalf("command of %d bytes", len(c))
		}
	}
}

// TestADBKeyboardWaitsForTheSwitch: `ime set` returns before ADBKeyboard
// runs and registers its receiver, so a broadcast sent at once is lost
// (and still exits 0). The text must arrive, and the IME be restored.
func TestADBKeyboardWaitsForTheSwitch(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	fake := r.add(t, fakephone.Options{ADBKeyboard: true, IMESwitchDelay: 400 * time.Millisecond})
	d := r.connect(t, Options{Serial: fake.Serial()})
	before := fake.CurrentIME()
	p := d.PlanText("café 日本")
	if err := d.Run(ctx, p.Commands); err != nil {
		t.Fatal(err)
	}
	if got := phoneOf(fake).TypedText(); got != "café 日本" {
		t.Fatalf("typed %q, want %q (commands %q)", got, "café 日本", p.Commands)
	}
	waitFor(t, func() bool { return fake.CurrentIME() == before }, "the previous IME back")
}

// TestADBKeyboardThatNeverTakesOver: a switch that never happens is an
// error naming it, nothing is typed, and the previous IME is selected again.
func TestADBKeyboardThatNeverTakesOver(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	fake := r.add(t, fakephone.Options{ADBKeyboard: true, IMESwitchDelay: time.Hour})
	d := r.connect(t, Options{Serial: fake.Serial(), CommandTimeout: 500 * time.Millisecond})
	err := d.Run(ctx, d.PlanText("café").Commands)
	if err == nil || !strings.Contains(err.Error(), "did not take effect") {
		t.Fatalf("err = %v", err)
	}
	oneLineErr(t, err)
	if got := phoneOf(fake).TypedText(); got != "" {
		t.Fatalf("typed %q", got)
	}
	last := fake.Shell()[len(fake.Shell())-1]
	if len(last.Commands) != 1 || strings.Join(last.Commands[0][:2], " ") != "ime set" || last.Commands[0][2] == ADBKeyboardIME {
		t.Fatalf("last line %q, want the previous IME selected again", last.Line)
	}
}

// waitFor polls cond for a few seconds (generous: the machine may be loaded).
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
