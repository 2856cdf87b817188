package engine

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/predict"
)

// Logits that are not numbers, or an argmax outside the vocabulary, end the
// sequence as broken (it parses as that error) instead of decoding as some
// token: NaN's argmax is 0, and under --constrain garbage parsed as an
// action.
func TestAcceptRefusesBrokenOutputs(t *testing.T) {
	const V = 4
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for name, c := range map[string]struct {
		out  stepOut
		want string
	}{
		"NaN logits":      {stepOut{logits: []float32{nan, nan, nan, nan}}, "(token 0's is NaN)"},
		"+Inf logits":     {stepOut{logits: []float32{1, 0, 0, inf}}, "(token 3's is +Inf)"},
		"negative argmax": {stepOut{ids: []int64{-969}}, "token -969, outside its vocabulary of 4"},
		"argmax past V":   {stepOut{ids: []int64{V}}, "token 4, outside"},
	} {
		s := &sequence{tokens: []int64{0}, limit: 10, choose: sample.Argmax{}}
		if n := s.accept(nil, 0, c.out, V, 1); n != 0 || !s.done || s.broken == nil || !strings.Contains(s.broken.Error(), c.want) || len(s.out()) != 0 {
			t.Errorf("%s: accepted %d, done %v, broken %v, out %v", name, n, s.done, s.broken, s.out())
		}
	}
	// a chooser that masks the row is checked before it masks
	s0 := &sequence{tokens: []int64{0}, limit: 10, choose: sample.MinLength{N: 5, EOS: 1, Next: sample.Argmax{}}}
	if s0.accept(nil, 0, stepOut{logits: []float32{0, 0, 3, nan}}, V, 1); s0.broken == nil || !strings.Contains(s0.broken.Error(), "token 3's is NaN") {
		t.Errorf("NaN under a masking chooser: %v", s0.broken)
	}
	// -Inf is a masked token, not a broken output
	s := &sequence{tokens: []int64{0}, limit: 10, choose: sample.Argmax{}}
	if s.accept(nil, 0, stepOut{logits: []float32{float32(math.Inf(-1)), 0, 2, 0}}, V, 1); s.broken != nil || len(s.out()) != 1 || s.out()[0] != 2 {
		t.Errorf("-Inf logits: broken %v, out %v", s.broken, s.out())
	}
}

// A broken sequence's result is an output that did not parse, with why.
func TestBrokenSequenceParsesAsItsError(t *testing.T) {
	p := tiny(t)
	broken := errors.New("the model's logits at output position 0 are not numbers")
	res := &predict.Result{}
	p.parse(res, &sequence{tokens: []int64{0}, broken: broken}, time.Now())
	if res.ParseErr != broken || res.Action.Touch != action.NoPoint || res.Action.Type.Valid() {
		t.Errorf("result %+v", res)
	}
}
