// Package kv holds a T5 decoder's state between calls: the self-attention
// cache, which grows with every generated position, and the cross part (the
// encoder mask and the cross-attention K/V the cross graph projects once),
// which is fixed for a request. A Cache binds both into a decoder call's
// input and output slots; the caller binds the token ids and logits and runs
// the graph.
package kv

import (
	"fmt"
	"strconv"
)

// Names are the decoder graphs' input and output names by role, in the
// optimum with-past convention (bundle format 2: the with-past decoder and
// the cross graph that gives its cross-attention K/V).
type Names struct {
	IDs, EncoderMask string
	// Position is the static decoder's input of each row's cache position
	// (the decoder_static graph's only name the with-past one lacks).
	Position string
	Logits   string
	// Argmax is the logits' argmax per position (int64 ids), an output of
	// graphs_revision 3 decoders; older decoders lack it.
	Argmax string
	// Past per layer: self key, self value, cross key, cross value.
	Past [][4]string
	// Present per layer: self key, self value (past ++ the new positions).
	Present [][2]string
	// CrossStates is the cross graph's input; CrossKV its outputs per
	// layer, key and value, fed back as Past[l][CrossKey], [CrossValue].
	CrossStates string
	CrossKV     [][2]string
}

// Per-layer roles in Names.Past and Names.Present.
const (
	SelfKey = iota
	SelfValue
	CrossKey
	CrossValue
)

// DecoderNames returns the names of a decoder with the given layers.
func DecoderNames(layers int) Names {
	n := Names{IDs: "input_ids", EncoderMask: "encoder_attention_mask", Position: "position", Logits: "logits",
		Argmax: "logits_argmax", CrossStates: "encoder_hidden_states"}
	for l := 0; l < layers; l++ {
		var past [4]string
		for role, s := range [4]string{"decoder.key", "decoder.value", "encoder.key", "encoder.value"} {
			past[role] = "past_key_values." + strconv.Itoa(l) + "." + s
		}
		p := "present." + strconv.Itoa(l) + "."
		n.Past = append(n.Past, past)
		n.Present = append(n.Present, [2]string{p + "decoder.key", p + "decoder.value"})
		n.CrossKV = append(n.CrossKV, [2]string{p + "encoder.key", p + "encoder.value"})
	}
	return n
}

// Slots are the positions of Names in the graphs' input and output lists:
// a call binds values into two slices in that order.
type Slots struct {
	IDs, EncoderMask int
	Logits           int
	Argmax           int // -1: the decoder has no argmax output
	Past             [][4]int
	Present          [][2]int
	Inputs, Outputs  int // list lengths
	// The cross graph's.
	CrossStates               int
	CrossKV                   [][2]int
	CrossInputs, CrossOutputs int
}

// FindSlots places names in the decoder's and the cross graph's inputs and
// outputs. Every input and output must have a role: each call binds them all.
func FindSlots(n Names, inputs, outputs, crossInputs, crossOutputs []string) (*Slots, error) {
	in, out, cin, cout := index(inputs), index(outputs), index(crossInputs), index(crossOutputs)
	var missing []string
	find := func(m map[string]int, name string) int {
		i, ok := m[name]
		if !ok {
			missing = append(missing, name)
		}
		return i
	}
	s := &Slots{Inputs: len(inputs), Outputs: len(outputs), CrossInputs: len(crossInputs), CrossOutputs: len(crossOutputs)}
	s.IDs, s.EncoderMask, s.Logits = find(in, n.IDs), find(in, n.EncoderMask), find(out, n.Logits)
	s.Argmax = -1
	if i, ok := out[n.Argmax]; ok {
		s.Argmax = i
	}
	s.CrossStates = find(cin, n.CrossStates)
	for l := range n.Past {
		var pa [4]int
		var pr, cr [2]int
		for j := range pa {
			pa[j] = find(in, n.Past[l][j])
		}
		for j := range pr {
			pr[j], cr[j] = find(out, n.Present[l][j]), find(cout, n.CrossKV[l][j])
		}
		s.Past, s.Present, s.CrossKV = append(s.Past, pa), append(s.Present, pr), append(s.CrossKV, cr)
	}
	if missing != nil {
		return nil, fmt.Errorf("decoder graphs lack %q", missing)
	}
	L := len(n.Past)
	outs := 1 + 2*L
	if s.Argmax >= 0 {
		outs++
	}
	if len(inputs) != 2+4*L || len(outputs) != outs {
		return nil, fmt.Errorf("decoder graph has %d inputs and %d outputs, want %d and %d for %d layers", len(inputs), len(outputs), 2+4*L, outs, L)
	}
	if len(crossInputs) != 1 || len(crossOutputs) != 2*L {
		return nil, fmt.Errorf("cross graph has %d inputs and %d outputs, want 1 and %d for %d layers", len(crossInputs), len(crossOutputs), 2*L, L)
	}
	return s, nil
}

func index(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// CheckStatic says whether a static decoder graph's inputs and outputs are
// exactly the ones a static decode binds (in any order): ids, position, mask
// and every past in; logits, argmax and every self-attention present out.
func CheckStatic(n Names, inputs, outputs []string) error {
	want := []string{n.IDs, n.Position, n.EncoderMask}
	for _, p := range n.Past {
		want = append(want, p[:]...)
	}
	wantOut := []string{n.Logits, n.Argmax}
	for _, p := range n.Present {
		wantOut = append(wantOut, p[:]...)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"inputs", inputs, want}, {"outputs", outputs, wantOut}} {
		have := index(c.got)
		var missing []string
		for _, w := range c.want {
			if _, ok := have[w]; !ok {
				missing = append(missing, w)
			}
		}
		if missing != nil || len(c.got) != len(c.want) {
			return fmt.Errorf("static decoder graph has %d %s, want %d (lacking %q)", len(c.got), c.what, len(c.want), missing)
		}
	}
	return nil
}
