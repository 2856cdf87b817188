package engine

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/tokenizer"
)

func TestConstrainedDecoding(t *testing.T) {
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := NewPredictor(b, Options{Truncation: TruncateRight, Constrained: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
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
		tok := cons.nextToken(row, out)
		if tok == b.Manifest.Tokens.EOSID {
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
