package sample

import (
	"fmt"
	"slices"
	"strings"

	"github.com/autoui/autoui/action"
)

// Drafter proposes up to max tokens that may follow seq (the decoder start
// token and the tokens so far). Verification keeps exactly what the Chooser
// would have produced, so a wrong draft costs only compute.
type Drafter interface {
	Draft(seq []int64, max int) []int64
}

// MaxDraft is the default bound on the tokens a row drafts per call
// (engine.Options.MaxDraft): decode steps are bound by reading the
// weights, so a call on 12 tokens costs little more than one.
const MaxDraft = 12

// maxNgram is the longest context suffix the drafter matches.
const maxNgram = 8

// NGram proposes continuations by matching the end of the sequence so far
// against token sequences that are likely to recur: the sequence itself (a
// tap's lift point repeats its touch point, a plan's first type is usually
// the decision's type) and tokenized Auto-UI outputs (the format's fixed
// text). A wrong draft costs only a little extra compute: verification keeps
// exactly what greedy decoding would have produced.
//
// Against the Auto-UI outputs a token that holds digits matches any token of
// the same shape (digits as 0: "9]" as the template's "5]"), so the text
// after a coordinate is drafted whatever its digits; of the outputs that
// match, the one agreeing longest with the sequence's start wins (its plan
// names the decision's type). A sequence of the start token alone drafts
// the text every output begins with (drafting in full, a tap's output).
type NGram struct {
	refs   [][]int64
	shapes [][]int64       // refs, a digit-bearing token as its shape class
	class  map[int64]int64 // digit-bearing token id -> shape class (negative)
	start  []int64         // the first draft: what every ref begins with, in full a tap's output
	at     map[int64][]refPos
	points []bool // refs whose digits are placeholders (a tap's or swipe's coordinates)
	full   bool   // NGramOptions.Full
}

// NGramOptions tune a drafter.
type NGramOptions struct {
	// Full drafts as many tokens as allowed whatever the length of the
	// match: where a position costs little beside a call (a GPU), a weak
	// guess is cheap.
	Full bool
}

// refPos is a place in the refs: at[shape] lists those holding a token of
// that shape and followed by one more, in order.
type refPos struct{ ref, pos int }

// NewNGram tokenizes one canonical output per action type, so every fixed
// piece of the format (keys, punctuation, [-1.0, -1.0], type names) is in a
// reference in the tokenization the model was trained on, a swipe, and the
// taps of fineTaps.
func NewNGram(tok interface {
	EncodeNoEOS(string) ([]int64, error)
	Token(int64) (string, bool)
	VocabSize() int
}, eos int64, opts NGramOptions) (*NGram, error) {
	d := &NGram{class: map[int64]int64{}, full: opts.Full}
	classes := map[string]int64{}
	for id := range int64(tok.VocabSize()) {
		t, ok := tok.Token(id)
		if !ok || !strings.ContainsAny(t, "0123456789") {
			continue
		}
		shape := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '0'
			}
			return r
		}, t)
		c, ok := classes[shape]
		if !ok {
			c = -int64(len(classes)) - 1
			classes[shape] = c
		}
		d.class[id] = c
	}
	tap := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.5, X: 0.5}, Lift: action.Point{Y: 0.5, X: 0.5}}
	swipe := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 0.8, X: 0.5}, Lift: action.Point{Y: 0.2, X: 0.5}}
	type output struct {
		plan []action.Type
		a    action.Action
	}
	var outs []output
	for _, t := range action.Types {
		a := action.Action{Type: t, Touch: action.NoPoint, Lift: action.NoPoint}
		if t == action.DualPoint {
			a = tap
		}
		outs = append(outs, output{[]action.Type{t, t, action.StatusTaskComplete}, a})
	}
	outs = append(outs, output{[]action.Type{action.DualPoint}, swipe})
	fine, err := d.fineTaps(tok)
	if err != nil {
		return nil, err
	}
	for _, a := range fine {
		outs = append(outs, output{[]action.Type{action.DualPoint}, a})
	}
	for _, o := range outs {
		ids, err := tok.EncodeNoEOS(strings.Join(strings.Fields(action.Target(o.plan, o.a)), " "))
		if err != nil {
			return nil, fmt.Errorf("tokenize draft template: %w", err)
		}
		ref := append(ids, eos)
		d.refs = append(d.refs, ref)
		d.shapes = append(d.shapes, d.shape(ref))
		d.points = append(d.points, o.a.Type == action.DualPoint)
	}
	d.at = map[int64][]refPos{}
	for r, sh := range d.shapes {
		for i := range len(sh) - 1 {
			d.at[sh[i]] = append(d.at[sh[i]], refPos{r, i})
		}
	}
	d.start = d.refs[0]
	for _, ref := range d.refs[1:] {
		d.start = d.start[:commonPrefix(d.start, ref)]
	}
	// Drafting in full, the first draft goes on past the common text with
	// a tap's plan: taps are most of AITW's steps (and 57% of the default
	// model's on its test split), and a wrong guess is cheap.
	if d.full {
		d.start = d.refs[slices.Index(action.Types, action.DualPoint)]
	}
	return d, nil
}

// fineTaps are taps at coordinates of up to four decimals (AITW's), one for each
// way the tokenizer cuts such a coordinate into tokens ("[0.1|8|52," and
// "[0.731|6,"; the first coordinate with its bracket and comma, the second
// with its closing text), so that the text after a coordinate's last digit
// is drafted by shape whatever the digits. A word's tokens do not depend on
// the words around it (a SentencePiece tokenizer cuts at spaces), so each
// coordinate is tokenized alone; the cuts come from fineSamples
// coordinates spread over [0, 1).
func (d *NGram) fineTaps(tok interface{ EncodeNoEOS(string) ([]int64, error) }) ([]action.Action, error) {
	var cuts [2][]float64 // the first coordinate of each new cut, as y and as x
	var seen [2]map[string]bool
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	for k := range fineSamples {
		c := float64((k*7919)%10000) / 10000 // printed as Python does: 0.185, not 0.1850
		for i, word := range [2]string{"\"[" + action.PyFloat(c) + ",", action.PyFloat(c) + "]\","} {
			ids, err := tok.EncodeNoEOS(word)
			if err != nil {
				return nil, fmt.Errorf("tokenize draft template: %w", err)
			}
			if key := fmt.Sprint(d.shape(ids)); !seen[i][key] {
				seen[i][key] = true
				cuts[i] = append(cuts[i], c)
			}
		}
	}
	var taps []action.Action
	for i := range max(len(cuts[0]), len(cuts[1])) {
		p := action.Point{Y: cuts[0][i%len(cuts[0])], X: cuts[1][i%len(cuts[1])]}
		taps = append(taps, action.Action{Type: action.DualPoint, Touch: p, Lift: p})
	}
	return taps, nil
}

// fineSamples is how many coordinates fineTaps tokenizes: with the test
// bundles' tokenizers 300 find the cuts of 98.6-99.9% of 20000 random
// coordinates of four decimals or fewer (14-21 of a first coordinate's
// 15-32 cuts, 18-19 of a second's 27-32; each cut missed is in under 0.4%
// of them).
const fineSamples = 300

// shape is ids with each digit-bearing token replaced by its shape class.
func (d *NGram) shape(ids []int64) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		if c, ok := d.class[id]; ok {
			id = c
		}
		out[i] = id
	}
	return out
}

func commonPrefix(a, b []int64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Draft returns up to max tokens that may follow seq. A match on a short
// suffix is weak evidence, so it drafts fewer tokens (unless the drafter
// drafts in full): a verified position costs little, but not nothing
// (logits over the vocabulary each).
func (d *NGram) Draft(seq []int64, max int) []int64 { return d.draft(seq, nil, max) }

// WithPrompt is d drafting from a request's prompt too (prompt lookup): the
// text an action types is usually in the goal, and the previous actions'
// text is the format's.
func (d *NGram) WithPrompt(prompt []int64) Drafter { return promptDrafter{d, prompt} }

type promptDrafter struct {
	d      *NGram
	prompt []int64
}

func (p promptDrafter) Draft(seq []int64, max int) []int64 { return p.d.draft(seq, &p, max) }

// draft continues the longest suffix of seq (up to maxNgram tokens) found
// in the sequence itself (its most recent earlier occurrence), the prompt
// (its first) or the Auto-UI outputs (by shape; the one agreeing longest
// with seq's start), in that order of preference between equal lengths,
// except that a tap's or swipe's output whose coordinates are in play (the
// last token matched by shape only, or digits next: placeholders) yields to
// a match in the sequence or the prompt that reaches past seq's trailing
// digits: a lift point continues its own touch point's digits. Unless
// drafting in full, a draft from those outputs stops before their digits.
// Candidates are the places holding seq's last token (one pass, not a scan
// per length: a batch of 64 rows drafts every call).
func (d *NGram) draft(seq []int64, p *promptDrafter, max int) []int64 {
	if len(seq) <= 1 {
		return slices.Clip(d.start[:min(max, len(d.start))])
	}
	last := len(seq) - 1
	n, src, from := 0, []int64(nil), 0
	for j := last - 1; j >= 0; j-- {
		if seq[j] == seq[last] {
			if m := matched(seq, j, seq, last); m > n {
				n, src, from = m, seq, j+1
			}
		}
	}
	if p != nil {
		// a scan of a few hundred ids per draft costs less than indexing
		// each request's prompt
		for j, id := range p.prompt {
			if id == seq[last] && j+1 < len(p.prompt) { // the last has no continuation
				if m := matched(p.prompt, j, seq, last); m > n {
					n, src, from = m, p.prompt, j+1
				}
			}
		}
	}
	tail := d.shape(seq[len(seq)-min(maxNgram, len(seq)):])
	rn, ref, rfrom, agree := 0, -1, 0, -1
	for _, at := range d.at[tail[len(tail)-1]] {
		m := matched(d.shapes[at.ref], at.pos, tail, len(tail)-1)
		if m < rn || m <= n { // a tie goes to the sequence or the prompt
			continue
		}
		if a := commonPrefix(d.refs[at.ref], seq[1:]); m > rn || a > agree {
			rn, ref, rfrom, agree = m, at.ref, at.pos+1, a
		}
	}
	digits := 0 // digit-bearing tokens at seq's end
	for digits < len(tail) && tail[len(tail)-1-digits] < 0 {
		digits++
	}
	stop := len(src)
	if ref >= 0 && (n <= digits || !d.points[ref] || d.refs[ref][rfrom-1] == seq[last] && d.shapes[ref][rfrom] >= 0) {
		n, src, from, stop = rn, d.refs[ref], rfrom, len(d.refs[ref])
		if d.points[ref] && !d.full { // up to the point's next digits: placeholders, a wrong guess mostly
			stop = from
			for stop < len(src) && d.shapes[ref][stop] >= 0 {
				stop++
			}
		}
	}
	if n == 0 {
		return nil
	}
	if !d.full {
		max = min(max, 2*n+2)
	}
	end := min(stop, from+max)
	return src[from:end:end]
}

// matched is how many tokens agree going back from a[i] and b[k], at most
// maxNgram.
func matched(a []int64, i int, b []int64, k int) int {
	m := 0
	for m < maxNgram && i-m >= 0 && k-m >= 0 && a[i-m] == b[k-m] {
		m++
	}
	return m
}
