package engine

import (
	"context"
	"testing"
)

// Speculative decoding must produce exactly greedy's tokens, in fewer
// sequential decoder calls; also when </s> is suppressed (benchmark mode) and
// when the token limit cuts the output.
func TestSpeculativeEqualsGreedy(t *testing.T) {
	greedy := tinyWith(t, Options{Truncation: TruncateRight, Decoding: DecodeGreedy})
	spec := tiny(t)
	ctx := context.Background()
	var callsG, callsS, tokens int
	for _, c := range loadGolden(t) {
		feat := loadNpy(t, c.Tensors["image_features"])
		for _, v := range []struct {
			name     string
			min, max int
		}{{"golden", 0, c.MaxNewTokens}, {"fixed-40", 40, 40}, {"limit-7", 0, 7}} {
			req := Request{Features: feat, Goal: c.Goal, History: c.history(t), MinNewTokens: v.min, MaxNewTokens: v.max}
			g, err := greedy.Predict(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			s, err := spec.Predict(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(g.TokenIDs, s.TokenIDs) {
				t.Fatalf("%s %s: speculative differs from greedy\n greedy %v\n   spec %v", c.ID, v.name, g.TokenIDs, s.TokenIDs)
			}
			if v.name == "golden" {
				callsG += g.Timings.DecoderCalls
				callsS += s.Timings.DecoderCalls
				tokens += len(g.TokenIDs)
			}
			if v.name == "fixed-40" && len(s.TokenIDs) != 40 {
				t.Fatalf("%s: MinNewTokens 40 gave %d tokens", c.ID, len(s.TokenIDs))
			}
		}
	}
	t.Logf("golden cases: %d tokens, greedy %d decoder calls, speculative %d (%.2f tokens/call)", tokens, callsG, callsS, float64(tokens)/float64(callsS))
	if callsS >= callsG {
		t.Errorf("speculative used %d calls, greedy %d", callsS, callsG)
	}
}

// With an oracle that knows the true output, count the sequential calls the
// drafter needs on whole targets tokenized as the model emits them: the
// format's fixed text and the lift point's copy of the touch point must be
// drafted, leaving mostly the touch point's digits to decode one by one.
func TestDrafterOnTargets(t *testing.T) {
	p := tiny(t)
	targets := []string{
		`Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER,STATUS_TASK_COMPLETE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1234, 0.5678]", "lift_point": "[0.1234, 0.5678]", "typed_text": ""`,
		`Action Plan: [TYPE,PRESS_ENTER] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "cheap flights to paris"`,
		`Action Plan: [PRESS_HOME] ; Action Decision: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": ""`,
		`Action Plan: [DUAL_POINT,DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.8, 0.5]", "lift_point": "[0.2, 0.5]", "typed_text": ""`,
	}
	for _, target := range targets {
		ids, err := p.tok.Encode(target)
		if err != nil {
			t.Fatal(err)
		}
		seq := []int64{0}
		calls := 0
		for pos := 0; pos < len(ids); calls++ {
			d := p.drafts.draft(seq, maxDraft)
			acc := 0
			for acc < len(d) && pos+acc < len(ids) && d[acc] == ids[pos+acc] {
				acc++
			}
			n := min(acc+1, len(ids)-pos)
			seq = append(seq, ids[pos:pos+n]...)
			pos += n
		}
		t.Logf("%d tokens in %d calls: %.60s...", len(ids), calls, target)
		if calls*3 > len(ids) {
			t.Errorf("%d calls for %d tokens: the drafter misses the format", calls, len(ids))
		}
	}
	if d := p.drafts.draft([]int64{0}, 0); len(d) != 0 {
		t.Fatalf("max 0 drafted %v", d)
	}
}
