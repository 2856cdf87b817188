package fakephone

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseShell(t *testing.T) {
	cases := []struct {
		line    string
		cmds    string // commands joined: argv by "|", commands by " ; "
		hazards string // joined by ","
		err     bool
	}{
		{line: "wm size", cmds: "wm|size"},
		{line: "input text 'a b'", cmds: "input|text|a b"},
		{line: `input text 'it'\''s'`, cmds: "input|text|it's"},
		{line: `input text "a \$b \"c\" \\ \x"`, cmds: `input|text|a $b "c" \ \x`},
		{line: `input text a\ b\;c`, cmds: "input|text|a b;c"},
		{line: "input text ''", cmds: "input|text|"},
		{line: "input text 'x;rm -rf /'", cmds: "input|text|x;rm -rf /"},
		{line: "input text x;rm -rf /", cmds: "input|text|x ; rm|-rf|/", hazards: ";"},
		{line: "input text a && reboot", cmds: "input|text|a ; reboot", hazards: "&&"},
		{line: "input text a | sh", cmds: "input|text|a ; sh", hazards: "|"},
		{line: "input text a & reboot", cmds: "input|text|a ; reboot", hazards: "&"},
		{line: "input text $(reboot)", cmds: "reboot ; input|text|$(reboot)", hazards: "command substitution $("},
		{line: "input text \"$(id)\"", cmds: "id ; input|text|$(id)", hazards: "command substitution $("},
		{line: "input text `id`", cmds: "id ; input|text|`id`", hazards: "command substitution `"},
		{line: "input text $HOME", cmds: "input|text|$HOME", hazards: "parameter expansion $HOME"},
		{line: "input text a>/sdcard/x", cmds: "input|text|a", hazards: "redirection >"},
		{line: "input text a 2>/dev/null", cmds: "input|text|a", hazards: "redirection >"},
		{line: "input text a\nreboot", cmds: "input|text|a ; reboot", hazards: "newline"},
		{line: "input text #x", cmds: "input|text", hazards: "comment"},
		{line: "input text a#x", cmds: "input|text|a#x"},
		{line: "input text *", cmds: "input|text|*", hazards: "glob *"},
		{line: "input text ~", cmds: "input|text|~", hazards: "tilde"},
		{line: "input text {a,b}", cmds: "input|text|{a,b}", hazards: "brace {"},
		{line: "input text (x)", cmds: "input|text ; x", hazards: "(,)"},
		{line: "input text '100$'", cmds: "input|text|100$"},
		{line: "input text a$", cmds: "input|text|a$"},
		{line: "input text 'abc", err: true},
		{line: `input text "abc`, err: true},
		{line: "input text $(abc", err: true},
	}
	for _, c := range cases {
		cmds, hazards, err := ParseShell(c.line)
		if (err != nil) != c.err {
			t.Errorf("ParseShell(%q) error = %v, want error %v", c.line, err, c.err)
			continue
		}
		if c.err {
			continue
		}
		var parts []string
		for _, a := range cmds {
			parts = append(parts, strings.Join(a, "|"))
		}
		if got := strings.Join(parts, " ; "); got != c.cmds {
			t.Errorf("ParseShell(%q) commands = %q, want %q", c.line, got, c.cmds)
		}
		if got := strings.Join(hazards, ","); got != c.hazards {
			t.Errorf("ParseShell(%q) hazards = %q, want %q", c.line, got, c.hazards)
		}
	}
}

func TestAndroidInputText(t *testing.T) {
	cases := map[string]string{
		"a%sb":    "a b",
		"%s%s":    "  ",
		"%%s":     "% ",
		"50%":     "50%",
		"%":       "%",
		"s%":      "s%",
		"%ss":     " s",
		"a%%%sb":  "a%% b",
		"é%sü":    "é ü",
		"100%sOK": "100 OK",
	}
	for in, want := range cases {
		if got := AndroidInputText(in); got != want {
			t.Errorf("AndroidInputText(%q) = %q, want %q", in, got, want)
		}
	}
}

// singleQuote is the reference quoting the fuzz test checks the parser with.
func singleQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// FuzzParseShellQuoted: any string single-quoted the POSIX way parses back to
// itself as one argument of one command, with no hazards.
func FuzzParseShellQuoted(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", "$(id)", "`id`", "a;b&&c||d|e", "\n", "\\", `"`, "''", "%s", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line := "input text " + singleQuote(s)
		cmds, hazards, err := ParseShell(line)
		if err != nil || len(hazards) != 0 || len(cmds) != 1 || len(cmds[0]) != 3 || cmds[0][2] != s {
			t.Fatalf("ParseShell(%q) = %q, %v, %v", line, cmds, hazards, err)
		}
	})
}

// FuzzParseShell: the parser never panics and never loses a command that
// follows a separator.
func FuzzParseShell(f *testing.F) {
	for _, s := range []string{"a;b", "a$(b)", "'", `"$(`, "a\\", "$((1+2))", "${x", "a>", "`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cmds, _, err := ParseShell(s)
		if err == nil && strings.Count(s, ";") == 0 && strings.ContainsAny(s, "\n&|()`$") == false && len(cmds) > 1 {
			t.Fatalf("%q split into %d commands without a separator: %s", s, len(cmds), fmt.Sprint(cmds))
		}
	})
}
