package engine

import (
	"context"
	"testing"
)

// Replay stands in for the model's choices: the output is the replayed
// tokens and </s> whatever the prompt, greedy makes one call per token, and
// speculative decoding needs exactly the calls a model emitting those tokens
// would (fewer, as drafts of the format are accepted).
func TestReplay(t *testing.T) {
	spec := tiny(t)
	greedy := tinyWith(t, Options{Truncation: TruncateRight, Decoding: DecodeGreedy})
	eos := greedy.bundle.Manifest.Tokens.EOSID
	for _, c := range loadGolden(t)[:4] {
		ids := c.GeneratedIDs
		if ids[len(ids)-1] != eos {
			continue
		}
		// A goal the model would answer differently: the replay decides.
		req := Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: "something else entirely",
			Replay: ids[:len(ids)-1]}
		calls := map[string]int{}
		for name, p := range map[string]*Predictor{"greedy": greedy, "speculative": spec} {
			res, err := p.Predict(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(res.TokenIDs, ids) {
				t.Fatalf("%s %s: replay gave %v, want %v", c.ID, name, res.TokenIDs, ids)
			}
			calls[name] = res.Timings.DecoderCalls
		}
		if calls["greedy"] != len(ids) || calls["speculative"] >= calls["greedy"] {
			t.Errorf("%s: decoder calls %v for %d tokens", c.ID, calls, len(ids))
		}
		// The same calls as the model's own output from its real prompt.
		res, err := spec.Predict(context.Background(), Request{Features: req.Features, Goal: c.Goal, History: c.history(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Timings.DecoderCalls != calls["speculative"] {
			t.Errorf("%s: replay took %d calls, the model's own decoding %d", c.ID, calls["speculative"], res.Timings.DecoderCalls)
		}
	}
	long := make([]int64, 200)
	if _, err := spec.Predict(context.Background(), Request{Features: loadNpy(t, loadGolden(t)[0].Tensors["image_features"]),
		Goal: "x", Replay: long, MaxNewTokens: 50}); err == nil {
		t.Fatal("a replay longer than the token limit was accepted")
	}
}
