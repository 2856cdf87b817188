// Package kv holds a T5 decoder's state between calls: the self-attention
// cache, which grows with every generated position, and the cross-attention
// part (encoder states, mask and the cross-attention K/V the first call
// projects), which is fixed for a request. A Cache binds both into a
// decoder call's input and output slots; the caller binds the token ids and
// logits and runs the graph.
package kv

import (
	"fmt"
	"strconv"
)

// Names are a decoder graph's input and output names by role, in the
// optimum export convention (a merged decoder with use_cache_branch).
type Names struct {
	IDs, EncoderMask, EncoderStates, UseCache string
	Logits                                    string
	// Past and Present per layer: self key, self value, cross key, cross value.
	Past, Present [][4]string
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
	n := Names{
		IDs: "input_ids", EncoderMask: "encoder_attention_mask", EncoderStates: "encoder_hidden_states",
		UseCache: "use_cache_branch", Logits: "logits",
	}
	for l := 0; l < layers; l++ {
		var past, pres [4]string
		for role, s := range [4]string{"decoder.key", "decoder.value", "encoder.key", "encoder.value"} {
			past[role] = "past_key_values." + strconv.Itoa(l) + "." + s
			pres[role] = "present." + strconv.Itoa(l) + "." + s
		}
		n.Past, n.Present = append(n.Past, past), append(n.Present, pres)
	}
	return n
}

// Slots are the positions of Names in a graph's input and output lists:
// a call binds values into two slices in that order.
type Slots struct {
	IDs, EncoderMask, EncoderStates, UseCache int
	Logits                                    int
	Past, Present                             [][4]int
	Inputs, Outputs                           int // list lengths
}

// FindSlots places names in a graph's inputs and outputs. Every input and
// output must have a role: each call binds them all.
func FindSlots(n Names, inputs, outputs []string) (*Slots, error) {
	in, out := index(inputs), index(outputs)
	var missing []string
	find := func(m map[string]int, name string) int {
		i, ok := m[name]
		if !ok {
			missing = append(missing, name)
		}
		return i
	}
	s := &Slots{Inputs: len(inputs), Outputs: len(outputs)}
	s.IDs, s.EncoderMask = find(in, n.IDs), find(in, n.EncoderMask)
	s.EncoderStates, s.UseCache = find(in, n.EncoderStates), find(in, n.UseCache)
	s.Logits = find(out, n.Logits)
	for l := range n.Past {
		var pa, pr [4]int
		for j := range pa {
			pa[j], pr[j] = find(in, n.Past[l][j]), find(out, n.Present[l][j])
		}
		s.Past, s.Present = append(s.Past, pa), append(s.Present, pr)
	}
	if missing != nil {
		return nil, fmt.Errorf("decoder graph lacks %q", missing)
	}
	if L := len(n.Past); len(inputs) != 4+4*L || len(outputs) != 1+4*L {
		return nil, fmt.Errorf("decoder graph has %d inputs and %d outputs, want %d and %d for %d layers", len(inputs), len(outputs), 4+4*L, 1+4*L, L)
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
