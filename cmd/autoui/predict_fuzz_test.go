package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every form of a previous action goes through the same action.Validate.
func TestPrevAndHistoryValidate(t *testing.T) {
	for _, bad := range []string{
		"tap:NaN,0.2", "tap:0.2,Inf", "tap:1.5,0", "tap:-0.1,0", "swipe:0.1,0.2,0.3,NaN",
		`{"action_type": "DUAL_POINT", "touch_point": [5, 5], "lift_point": [5, 5]}`,
		`{"action_type": "DUAL_POINT", "touch_point": "[5, 5]", "lift_point": [0.5, 0.5]}`,
		`{"action_type": "PRESS_BACK", "touch_point": [-2, 0.5]}`,
		`{"action_type": 9}`,
		"{\"action_type\": [\n1]}",
	} {
		a, err := parseActionArg(bad)
		if err == nil {
			t.Errorf("--prev %q accepted: %+v", bad, a)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("--prev %q: multi-line error %q", bad, err)
		}
		if !strings.HasPrefix(bad, "{") {
			continue
		}
		for _, doc := range []string{"[" + bad + "]", bad + "\n"} {
			if _, err := parseHistory([]byte(doc), "h.json"); err == nil {
				t.Errorf("history %q accepted", doc)
			} else if strings.Contains(err.Error(), "\n") {
				t.Errorf("history %q: multi-line error %q", doc, err)
			}
		}
	}
	h, err := parseHistory([]byte(`[{"action_type": "DUAL_POINT", "touch_point": [0.5, 0.2], "lift_point": [0.5, 0.2]}, {"action_type": "TYPE", "typed_text": "wifi"}]`), "h.json")
	if err != nil || len(h) != 2 {
		t.Fatalf("valid history: %v %v", h, err)
	}
	_, err = parseHistory([]byte("{\"action_type\": \"PRESS_BACK\"}\n{\"action_type\": \"DUAL_POINT\", \"touch_point\": [0.5, 1.01], \"lift_point\": [0.5, 0.5]}\n"), "h.jsonl")
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("JSONL history with a bad line 2: %v", err)
	}
	if h, err := parseHistory([]byte("\ufeff{\"action_type\": \"PRESS_BACK\"}\n"), "bom.jsonl"); err != nil || len(h) != 1 {
		t.Errorf("history after a byte-order mark: %v %v", h, err)
	}
	if _, err := parseHistory([]byte("tap:0.5,0.5\n"), "prev.txt"); err == nil || !strings.Contains(err.Error(), "--prev") {
		t.Errorf("a --prev line in a history file: %v", err)
	}
}

// TestReadHistoryBounded: a history file is read up to a limit, so an
// endless one (/dev/zero) is an error, not the machine's memory.
func TestReadHistoryBounded(t *testing.T) {
	_, err := readHistory("/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
		t.Fatalf("/dev/zero: %v", err)
	}
	f := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(f, []byte(strings.Repeat("{\"action_type\": \"PRESS_HOME\"}\n", 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, err := readHistory(f); err != nil || len(h) != 3 {
		t.Fatalf("%v %v", h, err)
	}
}

func FuzzParseActionArg(f *testing.F) {
	for _, s := range []string{
		"tap:0.5,0.25", "tap:NaN,0.2", "tap:1.5,0", "tap:0x1p-2,0", "swipe:up", "swipe:0.1,0.2,0.3,0.4", "type:hello",
		"type:", "back", "HOME", "enter", "complete", "impossible", "fly", "tap:", "swipe:,,,",
		`{"action_type": "PRESS_BACK", "touch_point": [-1, -1], "lift_point": [-1, -1], "typed_text": ""}`,
		`{"action_type": 4, "touch_point": [5, 5], "lift_point": [5, 5]}`, `{"action_type": "TYPE", "typed_text": "a"}`, "{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseActionArg(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: multi-line error %q", s, err)
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("%q accepted as %+v, which does not validate: %v", s, a, err)
		}
	})
}

func FuzzParseHistory(f *testing.F) {
	for _, s := range []string{
		`[{"action_type": "DUAL_POINT", "touch_point": [0.5, 0.2], "lift_point": [0.5, 0.2], "typed_text": ""}]`,
		`[{"action_type": "DUAL_POINT", "touch_point": [5, 5], "lift_point": [5, 5]}]`,
		"{\"action_type\": \"TYPE\", \"typed_text\": \"x\"}\n{\"action_type\": 5}\n",
		`[null]`, `[]`, ``, "\n\n", `[{"action_type": "PRESS_BACK", "touch_point": "[0.1, 0.2]"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHistory(data, "h")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: multi-line error %q", data, err)
			}
			return
		}
		for i, a := range h {
			if err := a.Validate(); err != nil {
				t.Fatalf("%q: action %d accepted as %+v, which does not validate: %v", data, i, a, err)
			}
		}
	})
}
