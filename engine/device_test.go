package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/predict"
)

// withoutArgmax reopens p's decoder without its logits_argmax output, as a
// bundle exported before graphs_revision 3 has it: the engine then takes
// the argmax of the logits on the host.
func withoutArgmax(t testing.TB, p *Predictor) {
	t.Helper()
	g := p.decoder
	var outs []string
	for _, o := range g.outputs {
		if o != p.decoderNames.Argmax {
			outs = append(outs, o)
		}
	}
	if len(outs) == len(g.outputs) {
		t.Fatal("the tiny decoder has no argmax output: the argmax path is not tested")
	}
	so := p.so
	if p.decoderSO != nil {
		so = p.decoderSO
	}
	sess, err := ort.NewDynamicAdvancedSession(g.path, g.inputs, outs, so)
	if err != nil {
		t.Fatal(err)
	}
	g.sess.Destroy()
	g.sess, g.outputs = sess, outs
	if p.decoderSlots, err = kv.FindSlots(p.decoderNames, g.inputs, g.outputs, p.decoderCross.inputs, p.decoderCross.outputs); err != nil {
		t.Fatal(err)
	}
	if p.decoderSlots.Argmax >= 0 {
		t.Fatal("argmax slot still found")
	}
}

// The device-resident decoder gives the golden tokens on every case: with
// the argmax output and without it, greedy and speculative (drafts,
// rejected drafts, truncation), in batches of 1, 3 and 8 (rows dropped as
// items finish, per-item limits), and fetches logits only where asked.
func TestDeviceDecodeGolden(t *testing.T) {
	ctx := context.Background()
	cases := loadGolden(t)
	for _, argmax := range []bool{true, false} {
		for _, dec := range []Decoding{DecodeSpeculative, DecodeGreedy} {
			p := placed(t, placeDevice, Options{Decoding: dec})
			if !argmax {
				withoutArgmax(t, p)
			}
			for _, B := range []int{1, 3, 8} {
				name := fmt.Sprintf("argmax=%v/%s/B=%d", argmax, dec, B)
				for lo := 0; lo < len(cases); lo += B {
					var reqs []predict.Request
					for _, c := range cases[lo:min(lo+B, len(cases))] {
						reqs = append(reqs, predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal,
							History: c.history(t), MaxNewTokens: c.MaxNewTokens})
					}
					got, err := p.PredictBatch(ctx, reqs)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for j, res := range got {
						if c := cases[lo+j]; !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
							t.Errorf("%s %s: ids differ from golden\n got %v\nwant %v", name, c.ID, res.TokenIDs, c.GeneratedIDs)
						}
					}
				}
			}
		}
	}
}

// Logits cross only where a chooser needs them: never for greedy argmax
// with the argmax output, every call for the grammar, every call without
// the output.
func TestDeviceFetchesLogitsOnlyWhereNeeded(t *testing.T) {
	c := loadGolden(t)[0]
	for _, tc := range []struct {
		name      string
		opts      Options
		argmax    bool
		allLogits bool
	}{
		{"greedy", Options{}, true, false},
		{"constrained", Options{Constrained: true}, true, true},
		{"no argmax output", Options{}, false, true},
	} {
		p := placed(t, placeDevice, tc.opts)
		if !tc.argmax {
			withoutArgmax(t, p)
		}
		n, fetched := decodeCountingLogits(t, p, c)
		if want := map[bool]int{false: 0, true: n}[tc.allLogits]; fetched != want {
			t.Errorf("%s: logits fetched in %d of %d calls, want %d", tc.name, fetched, n, want)
		}
	}
}

// decodeCountingLogits decodes case c alone on p (device-resident or static)
// and returns its decoder calls and how many of them fetched logits.
func decodeCountingLogits(t *testing.T, p *Predictor, c goldenCase) (calls, fetched int) {
	t.Helper()
	s, err := p.sequence(predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t),
		MaxNewTokens: max(c.MaxNewTokens, p.grammars.MinTokens())}, &predict.Timings{})
	if err != nil {
		t.Fatal(err)
	}
	fused, mask := caseInputs(t, p, c)
	var st stepper
	p.newCallHook = func(s stepper) { st = s }
	defer func() { p.newCallHook = nil }()
	if err := p.decode(context.Background(), []*sequence{s}, fused, mask); err != nil {
		t.Fatal(err)
	}
	switch st := st.(type) {
	case *deviceCall:
		fetched = st.logitsCalls
	case *staticCall:
		fetched = st.logitsCalls
	default:
		t.Fatalf("%T counts no logits", st)
	}
	return s.tm.DecoderCalls, fetched
}

// With the state on the device the encoder's and the fusion's outputs stay
// there too (ORT-owned, never in Go memory), and hold what the host path
// computes.
func TestDevicePrefill(t *testing.T) {
	c := loadGolden(t)[0]
	p := placed(t, placeDevice, Options{})
	want, mask := caseInputs(t, p, c) // in Go memory
	enc, err := p.runEncoder(1, len(mask), c.InputIDs, mask)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.release()
	fused, err := p.runFusion(1, len(mask), enc, loadNpy(t, c.Tensors["image_features"]), mask)
	if err != nil {
		t.Fatal(err)
	}
	defer fused.release()
	if enc.host != nil || enc.dev == nil || fused.host != nil || fused.dev == nil {
		t.Fatal("the encoder states or the fused states came to Go memory")
	}
	raw, err := fused.dev.HostData() // ORT's CPU memory stands in for the device here
	if err != nil {
		t.Fatal(err)
	}
	got := unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(raw)/4)
	if !slices.Equal(got, want.host) {
		t.Errorf("fused states on the device differ from the host path's (%d vs %d values)", len(got), len(want.host))
	}
}
