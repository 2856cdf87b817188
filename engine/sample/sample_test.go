package sample

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/tokenizer"
)

func tinyTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join("..", "..", "models", "testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var plain = tokenizer.DecodeOptions{SkipSpecial: true}

// tinyNGram is the tiny bundle's tokenizer and a drafter on it.
func tinyNGram(t testing.TB) (*tokenizer.Tokenizer, *NGram) {
	t.Helper()
	tok := tinyTokenizer(t)
	d, err := NewNGram(tok, tok.EOS(), NGramOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok, d
}

// With an oracle that knows the true output, count the sequential calls the
// drafter needs on whole targets tokenized as the model emits them: the
// format's fixed text and the lift point's copy of the touch point must be
// drafted, leaving mostly the touch point's digits to decode one by one.
func TestNGramOnTargets(t *testing.T) {
	tok, d := tinyNGram(t)
	targets := []string{
		`Action Plan: [DUAL_POINT,TYPE,PRESS_ENTER,STATUS_TASK_COMPLETE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1234, 0.5678]", "lift_point": "[0.1234, 0.5678]", "typed_text": ""`,
		`Action Plan: [TYPE,PRESS_ENTER] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "cheap flights to paris"`,
		`Action Plan: [PRESS_HOME] ; Action Decision: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": ""`,
		`Action Plan: [DUAL_POINT,DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.8, 0.5]", "lift_point": "[0.2, 0.5]", "typed_text": ""`,
	}
	for _, target := range targets {
		ids, err := tok.Encode(target)
		if err != nil {
			t.Fatal(err)
		}
		calls := draftCalls(d, ids)
		t.Logf("%d tokens in %d calls: %.60s...", len(ids), calls, target)
		if calls*3 > len(ids) {
			t.Errorf("%d calls for %d tokens: the drafter misses the format", calls, len(ids))
		}
	}
	if dr := d.Draft([]int64{0}, 0); len(dr) != 0 {
		t.Fatalf("max 0 drafted %v", dr)
	}
}

// draftCalls counts the sequential calls a decode of ids takes with d's
// drafts, each call keeping the drafts that match and adding one token.
func draftCalls(d Drafter, ids []int64) int {
	seq := []int64{0}
	calls := 0
	for pos := 0; pos < len(ids); calls++ {
		dr := d.Draft(seq, MaxDraft)
		acc := 0
		for acc < len(dr) && pos+acc < len(ids) && dr[acc] == ids[pos+acc] {
			acc++
		}
		n := min(acc+1, len(ids)-pos)
		seq = append(seq, ids[pos:pos+n]...)
		pos += n
	}
	return calls
}

// The drafter's sources each save calls: the text every output begins with
// (a sequence of the start token alone), the text after a coordinate's
// digits matched by shape ("8]" as the template's "8]" of other digits),
// the sequence itself before a template of equal shape, and the prompt (the
// typed text is the goal's).
func TestNGramSources(t *testing.T) {
	tok, d := tinyNGram(t)
	start := d.Draft([]int64{0}, MaxDraft)
	if want, _ := tok.EncodeNoEOS("Action Plan: ["); !slices.Equal(start, want) {
		t.Errorf("drafted %q at the start, want %q", tok.Decode(start, plain), "Action Plan: [")
	}
	tap, _ := tok.EncodeNoEOS(`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]"`)
	if dr := d.Draft(append([]int64{0}, tap...), MaxDraft); !strings.HasPrefix(tok.Decode(dr, plain), `, "lift`) {
		t.Errorf("after a touch point drafted %q", tok.Decode(dr, plain))
	}
	// a lift point continues its touch point's own digits, not a template's
	lift, _ := tok.EncodeNoEOS(`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]", "lift_point": "[0.1`)
	if dr := d.Draft(append([]int64{0}, lift...), MaxDraft); !strings.HasPrefix(tok.Decode(dr, plain), `852, 0.4979]`) {
		t.Errorf("in a lift point drafted %q", tok.Decode(dr, plain))
	}
	// the comma after a first coordinate's four decimals, however they are cut
	for _, c := range []string{"0.1852", "0.7316", "0.0452", "0.9966"} {
		first, _ := tok.EncodeNoEOS(`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[` + c)
		// (up to the placeholder digits of the next)
		if dr := tok.Decode(d.Draft(append([]int64{0}, first...), MaxDraft), plain); !strings.HasPrefix(dr, ",") || strings.ContainsAny(dr, "0123456789") {
			t.Errorf("after the coordinate %s drafted %q", c, dr)
		}
	}
	// drafting in full: as many tokens as allowed after a weak match
	full, err := NewNGram(tok, tok.EOS(), NGramOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Decode(full.Draft([]int64{0}, MaxDraft), plain); !strings.HasPrefix(got, "Action Plan: [DUAL_POINT,") {
		t.Errorf("in full drafted %q at the start, want a tap's plan", got)
	}
	x, _ := tok.EncodeNoEOS(`Action Plan: [DUAL_POINT] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]`)
	seq := append([]int64{0}, x...)
	if short, long := d.Draft(seq, MaxDraft), full.Draft(seq, MaxDraft); len(long) != MaxDraft || len(short) >= len(long) || !slices.Equal(short, long[:len(short)]) {
		t.Errorf("after a coordinate drafted %q, in full %q", tok.Decode(short, plain), tok.Decode(long, plain))
	}
	typed, _ := tok.Encode(`Action Plan: [TYPE] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "cheap flights to paris tomorrow morning"`)
	prompt, _ := tok.Encode("Goal: search for cheap flights to paris tomorrow morning")
	without, with := draftCalls(d, typed), draftCalls(d.WithPrompt(prompt), typed)
	t.Logf("typed text: %d calls without the prompt, %d with", without, with)
	if with >= without-2 {
		t.Errorf("typed text: %d calls with the prompt, %d without", with, without)
	}
}

// On noise, every token the grammar chooses keeps the text inside the
// grammar, and the output is whole within its limit.
func TestGrammarOnNoise(t *testing.T) {
	tok := tinyTokenizer(t)
	gs, err := NewGrammars(tok)
	if err != nil {
		t.Fatal(err)
	}
	need := gs.MinTokens()
	if _, err := gs.New(need - 1); err == nil {
		t.Fatalf("a limit of %d below the shortest action (%d) accepted", need-1, need)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, tok.VocabSize())
	for _, limit := range []int{need, need + 3, 120} {
		g, err := gs.New(limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for len(out) < limit {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			id := g.Choose(row, out)
			if id == tok.EOS() {
				break
			}
			out = append(out, id)
			if s := tok.Decode(out, plain); !action.ValidOutputPrefix(s) {
				t.Fatalf("limit %d, token %d: %q left the grammar", limit, len(out), s)
			}
		}
		s := tok.Decode(out, tokenizer.DecodeOptions{SkipSpecial: true, CleanUpSpaces: true})
		if _, err := action.ParseOutput(s); err != nil {
			t.Fatalf("limit %d: %d tokens do not parse: %v\n%q", limit, len(out), err, s)
		}
	}
}

// A model that repeats itself inside typed_text until the token limit
// gives an output that never parses; the grammar closes it in time.
func TestGrammarClosesRunaway(t *testing.T) {
	tok := tinyTokenizer(t)
	prefix := `Action Plan: [TYPE,PRESS_ENTER] ; Action Decision: "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", "typed_text": "jazz jazz`
	out, err := tok.EncodeNoEOS(prefix)
	if err != nil {
		t.Fatal(err)
	}
	word, err := tok.EncodeNoEOS(" jazz")
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, tok.VocabSize())
	favour := func() []float32 {
		clear(row)
		row[word[0]] = 10 // the runaway continuation
		return row
	}
	// With room left, the repetition is grammatical and kept.
	gs, err := NewGrammars(tok)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := gs.New(len(out) + 5)
	if id := g.Choose(favour(), out); id != word[0] {
		t.Fatalf("with room: got token %d, want the favoured %d", id, word[0])
	}
	// Near the limit the output is closed instead.
	for _, room := range []int{1, 2} {
		g, _ := gs.New(len(out) + room)
		seq := append([]int64(nil), out...)
		for len(seq) < len(out)+room {
			id := g.Choose(favour(), seq)
			if id == tok.EOS() {
				break
			}
			seq = append(seq, id)
		}
		if s := tok.Decode(seq, plain); !action.CompleteOutput(s) {
			t.Fatalf("room %d: %q is not whole", room, s)
		}
	}
}

func TestChoosers(t *testing.T) {
	row := []float32{0, 3, 1, 3}
	if got := (Argmax{}).Choose(row, nil); got != 1 {
		t.Errorf("argmax: first maximum is 1, got %d", got)
	}
	m := MinLength{N: 2, EOS: 1, Next: Argmax{}}
	if got := m.Choose([]float32{0, 3, 1, 2}, []int64{5}); got != 3 {
		t.Errorf("min length masks </s>: got %d", got)
	}
	if got := m.Choose([]float32{0, 3, 1, 2}, []int64{5, 6}); got != 1 {
		t.Errorf("min length reached: got %d", got)
	}
	r := Replay{Tokens: []int64{7, 8}, EOS: 1}
	if r.Choose(row, nil) != 7 || r.Choose(row, []int64{7}) != 8 || r.Choose(row, []int64{7, 8}) != 1 {
		t.Error("replay")
	}
}

// A model that favours T5's sentinels (<extra_id_N>, which decode to
// nothing) gets none of them under the grammar: they would only spend its
// token budget (issue 25; a random FLAN-style model spent 58 of 127).
func TestGrammarMasksSilentTokens(t *testing.T) {
	tok := tinyTokenizer(t)
	gs, err := NewGrammars(tok)
	if err != nil {
		t.Fatal(err)
	}
	var silent []int64
	for id := int64(0); id < int64(tok.VocabSize()); id++ {
		if tok.IsSpecial(id) && id != tok.EOS() {
			silent = append(silent, id)
		}
	}
	if len(silent) < 100 {
		t.Fatalf("only %d special tokens in the tiny tokenizer (its 100 sentinels?)", len(silent))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	row := make([]float32, tok.VocabSize())
	g, err := gs.New(120)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for len(out) < 120 {
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		for _, id := range silent {
			row[id] = 50 // every sentinel above every text token
		}
		id := g.Choose(row, out)
		if id == tok.EOS() {
			break
		}
		if tok.IsSpecial(id) {
			t.Fatalf("token %d: special id %d chosen", len(out), id)
		}
		out = append(out, id)
	}
	if _, err := action.ParseOutput(tok.Decode(out, tokenizer.DecodeOptions{SkipSpecial: true, CleanUpSpaces: true})); err != nil {
		t.Fatalf("%d tokens do not parse: %v", len(out), err)
	}
}

// BenchmarkNGramDraft is one Draft of a row mid-output, with a prompt of
// ~500 tokens: where the format continues (a match) and where nothing does
// (a coordinate's digits), the case every call of a 64-row batch meets.
//
//	go test ./engine/sample/ -run '^$' -bench NGramDraft
func BenchmarkNGramDraft(b *testing.B) {
	tok, d := tinyNGram(b)
	prompt, _ := tok.Encode(strings.Repeat("Previous Actions: tap the search field, type the departure city and the date; ", 25))
	drafter := d.WithPrompt(prompt)
	for _, c := range []struct{ name, text string }{
		{"format", `Action Plan: [DUAL_POINT,TYPE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]"`},
		{"digits", `Action Plan: [DUAL_POINT,TYPE] ; Action Decision: "action_type": "DUAL_POINT", "touch_point": "[0.18`},
	} {
		ids, _ := tok.EncodeNoEOS(c.text)
		seq := append([]int64{0}, ids...)
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				drafter.Draft(seq, MaxDraft)
			}
		})
	}
}

// bruteDraft is NGram's draft as its definition reads, scanning every
// source for every suffix length from the longest: the sequence's most
// recent earlier occurrence, the prompt's first, then the references' (by
// shape) agreeing longest with the sequence's start, first in order, unless
// the reference is a point's and its digits are in play (its last token
// matched by shape only, or digits next) and the sequence or the prompt has
// a shorter match that reaches past the sequence's trailing digits, which
// then wins. Unless in full, a point's reference drafts up to its digits.
// The start token alone drafts what every reference begins with, in full a
// tap's output.
func bruteDraft(tok *tokenizer.Tokenizer, d *NGram, seq, prompt []int64, max int) []int64 {
	if len(seq) <= 1 {
		var start []int64 // what every reference begins with
		for n := 0; ; n++ {
			if slices.ContainsFunc(d.refs, func(r []int64) bool { return n == len(r) || r[n] != d.refs[0][n] }) {
				start = d.refs[0][:n]
				break
			}
		}
		if d.full {
			start, _ = tok.EncodeNoEOS(action.Target([]action.Type{action.DualPoint, action.DualPoint, action.StatusTaskComplete},
				action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}))
		}
		return start[:min(max, len(start))]
	}
	clip := func(src []int64, n int) []int64 {
		if !d.full {
			max = min(max, 2*n+2)
		}
		return src[:min(max, len(src))]
	}
	var own []int64 // the sequence's or the prompt's longest match
	ownN := 0
	for n := min(maxNgram, len(seq)); n >= 1 && own == nil; n-- {
		suffix := seq[len(seq)-n:]
		for start := len(seq) - n - 1; start >= 0 && own == nil; start-- {
			if slices.Equal(seq[start:start+n], suffix) {
				own, ownN = seq[start+n:], n
			}
		}
		for start := 0; start+n < len(prompt) && own == nil; start++ {
			if slices.Equal(prompt[start:start+n], suffix) {
				own, ownN = prompt[start+n:], n
			}
		}
	}
	for n := min(maxNgram, len(seq)); n > ownN; n-- {
		shaped := d.shape(seq[len(seq)-n:])
		best, from, agree := -1, 0, -1
		for r, ref := range d.shapes {
			for start := 0; start+n < len(ref); start++ {
				if slices.Equal(ref[start:start+n], shaped) {
					if a := commonPrefix(d.refs[r], seq[1:]); a > agree {
						best, from, agree = r, start+n, a
					}
				}
			}
		}
		if best >= 0 {
			digits := 0
			for digits < min(maxNgram, len(seq)) && d.shape(seq[len(seq)-1-digits:])[0] < 0 {
				digits++
			}
			if ownN > digits && d.points[best] && (d.refs[best][from-1] != seq[len(seq)-1] || d.shapes[best][from] < 0) {
				break // placeholder digits in play
			}
			next := d.refs[best][from:]
			for i, sh := range d.shapes[best][from:] {
				if d.points[best] && !d.full && sh < 0 { // placeholder digits: the draft stops before them
					next = next[:i]
					break
				}
			}
			return clip(next, n)
		}
	}
	if own == nil {
		return nil
	}
	return clip(own, ownN)
}

// The indexed draft is the definition's (bruteDraft) on random sequences
// spliced from the references (half their digits changed), a prompt, noise
// and their own earlier pieces, drafting in full or not, and its drafts
// are clipped: appending to one never writes into the shared references.
func TestNGramDraftParity(t *testing.T) {
	tok, d := tinyNGram(t)
	full, err := NewNGram(tok, tok.EOS(), NGramOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt, _ := tok.Encode(`Goal: search for cheap flights to paris. Previous Actions: "action_type": "TYPE", "typed_text": "flights"`)
	rng := rand.New(rand.NewPCG(7, 11))
	pieces := append(slices.Clone(d.refs), prompt)
	sameShape := map[int64][]int64{} // shape class -> its tokens, in id order
	for id := range int64(tok.VocabSize()) {
		if c, ok := d.class[id]; ok {
			sameShape[c] = append(sameShape[c], id)
		}
	}
	for i := range 3000 {
		seq := []int64{0}
		for len(seq) < 1+rng.IntN(60) { // the start token alone too
			switch rng.IntN(5) {
			case 0:
				seq = append(seq, int64(rng.IntN(tok.VocabSize())))
				continue
			case 1: // the sequence repeating itself, as a lift point its touch point
				a := rng.IntN(len(seq))
				seq = append(seq, seq[a:min(len(seq), a+1+rng.IntN(12))]...)
				continue
			}
			p := pieces[rng.IntN(len(pieces))]
			a := rng.IntN(len(p))
			for _, id := range p[a:min(len(p), a+1+rng.IntN(6))] {
				if c, ok := d.class[id]; ok && rng.IntN(2) == 0 { // other digits, same shape
					id = sameShape[c][rng.IntN(len(sameShape[c]))]
				}
				seq = append(seq, id)
			}
		}
		max := rng.IntN(MaxDraft + 1)
		withPrompt := rng.IntN(2) == 0
		d := d
		if rng.IntN(2) == 0 {
			d = full
		}
		var got, want []int64
		if withPrompt {
			got, want = d.WithPrompt(prompt).Draft(seq, max), bruteDraft(tok, d, seq, prompt, max)
		} else {
			got, want = d.Draft(seq, max), bruteDraft(tok, d, seq, nil, max)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("case %d (prompt %v, full %v, max %d): drafted %v, by definition %v\nseq %v", i, withPrompt, d.full, max, got, want, seq)
		}
		if len(got) > max || cap(got) != len(got) {
			t.Fatalf("case %d: draft of %d (cap %d) for max %d", i, len(got), cap(got), max)
		}
	}
}
