package engine

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/tokenizer"
)

func TestConstrainedDecoding(t *testing.T) {
	cons := tinyWith(t, Options{Truncation: TruncateRight, Constrained: true})
	free := tiny(t)
	ctx := context.Background()
	same := 0
	for _, c := range loadGolden(t) {
		req := Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens}
		f, err := free.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		g, err := cons.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		plain := free.tok.Decode(f.TokenIDs, tokenizer.DecodeOptions{SkipSpecial: true})
		if action.CompleteOutput(plain) {
			// every greedy choice was already grammatical: nothing may change
			if !equalIDs(f.TokenIDs, g.TokenIDs) {
				t.Errorf("%s: constraining changed a grammatical output\n free %q\n cons %q", c.ID, f.Raw, g.Raw)
			}
			same++
		}
		if got := cons.tok.Decode(g.TokenIDs, tokenizer.DecodeOptions{SkipSpecial: true}); !action.ValidOutputPrefix(got) {
			t.Errorf("%s: constrained output left the grammar: %q", c.ID, got)
		}
	}
	if same == 0 {
		t.Fatal("no golden output was grammatical")
	}

	// On noise, every token chosen keeps the text inside the grammar.
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, cons.cfg.VocabSize)
	var out []int64
	for step := 0; step < 120; step++ {
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		tok := cons.nextToken(row, out, 1<<30)
		if tok == cons.bundle.Manifest.Tokens.EOSID {
			break
		}
		out = append(out, tok)
		if s := cons.tok.Decode(out, tokenizer.DecodeOptions{SkipSpecial: true}); !action.ValidOutputPrefix(s) {
			t.Fatalf("step %d: %q left the grammar", step, s)
		}
	}
	if len(out) < 20 {
		t.Fatalf("constrained walk stopped after %d tokens", len(out))
	}
}

// A model that repeats itself inside typed_text until the token limit gives
// an output that never parses; constrained, the last allowed token closes it.
func TestConstrainedClosesAtTokenLimit(t *testing.T) {
	cons := tinyWith(t, Options{Truncation: TruncateRight, Constrained: true})
	prefix := `Action Plan: [TYPE,PRESS_ENTER] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "jazz jazz`
	out, err := cons.tok.EncodeNoEOS(prefix)
	if err != nil {
		t.Fatal(err)
	}
	word, err := cons.tok.EncodeNoEOS(" jazz")
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, cons.cfg.VocabSize)
	favour := func() []float32 {
		for i := range row {
			row[i] = 0
		}
		row[word[0]] = 10 // the runaway continuation
		return row
	}
	// With room left, the repetition is grammatical and kept.
	if tok := cons.nextToken(favour(), out, 5); tok != word[0] {
		t.Fatalf("with budget: got token %d, want the favoured %d", tok, word[0])
	}
	// On the last allowed token, the output is closed instead.
	tok := cons.nextToken(favour(), out, 1)
	text := cons.tok.Decode(append(append([]int64(nil), out...), tok), tokenizer.DecodeOptions{SkipSpecial: true})
	if !action.CompleteOutput(text) {
		t.Fatalf("last token %d leaves %q incomplete", tok, text)
	}
	if _, err := action.ParseOutput(text); err != nil {
		t.Fatalf("closed output does not parse: %v", err)
	}
	// End to end: a limit that cuts a golden output inside typed_text.
	for _, c := range loadGolden(t) {
		req := Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t)}
		full, err := cons.Predict(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if full.ParseErr != nil || full.Action.Type != action.TypeText || len(full.Action.Text) < 2 {
			continue
		}
		req.MaxNewTokens = len(full.TokenIDs) - 2 // inside the typed text, before its closing quote
		res, err := cons.Predict(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.ParseErr != nil {
			t.Fatalf("%s: cut at %d tokens, constrained output does not parse: %q", c.ID, req.MaxNewTokens, res.Raw)
		}
		return
	}
	t.Log("no golden TYPE case with text of 2+ characters; end-to-end part skipped")
}
