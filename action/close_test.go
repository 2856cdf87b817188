package action

import (
	"strings"
	"testing"
)

// Every prefix of valid outputs closes into a whole output, and the closing
// of a whole output is empty.
func TestCloseOutput(t *testing.T) {
	outs := []string{
		`Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER,STATUS_TASK_COMPLETE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1234, 0.5678]", "lift_point": "[0.1234, 1.0]", "typed_text": ""`,
		`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "cheap flights, to paris"`,
	}
	for _, out := range outs {
		if !CompleteOutput(out) {
			t.Fatalf("not complete: %q", out)
		}
		for n := 0; n <= len(out); n++ {
			c, ok := CloseOutput(out[:n])
			if !ok {
				t.Fatalf("prefix %q: no closing", out[:n])
			}
			if !CompleteOutput(out[:n] + c) {
				t.Fatalf("prefix %q closed by %q is not complete", out[:n], c)
			}
			if n == len(out) && c != "" {
				t.Fatalf("whole output closed by %q", c)
			}
		}
	}
	shortest, _ := CloseOutput("")
	if !CompleteOutput(shortest) || len(shortest) > 160 {
		t.Errorf("shortest output %q", shortest)
	}
	for _, bad := range []string{"Action Plan: [FOO", "x", `Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[2`} {
		if c, ok := CloseOutput(bad); ok {
			t.Errorf("%q closed by %q", bad, c)
		}
	}
	// a plan list ending in a comma needs one more type
	c, _ := CloseOutput("Action Plan: [TYPE,")
	if !strings.HasPrefix(c, "TYPE]") {
		t.Errorf("after a comma: %q", c)
	}
}

// A text closes exactly when it is a valid prefix, and closes into a whole output.
func FuzzCloseOutput(f *testing.F) {
	for _, s := range []string{"", "Action Plan: [", "Action Plan: [DUAL_POINT,PRESS", `Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[0.`, "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := CloseOutput(s)
		if ok != ValidOutputPrefix(s) {
			t.Fatalf("%q: closes %v, valid prefix %v", s, ok, ValidOutputPrefix(s))
		}
		if !ok {
			return
		}
		if !CompleteOutput(s + c) {
			t.Fatalf("%q closed by %q is not whole", s, c)
		}
		// whatever the grammar lets the model say comes back as history
		out, err := ParseOutput(s + c)
		if err != nil {
			t.Fatalf("%q does not parse: %v", s+c, err)
		}
		if err := out.Action.Validate(); err != nil {
			t.Fatalf("%q: the model's action fails Validate: %v", s+c, err)
		}
	})
}
