package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/tokenizer"
)

// tableCases are the golden cases the decoder table runs: the short output,
// the 504- and 512-token prompts, a 16-token limit, and a spread of others,
// in batches of three that mix prompt lengths.
func tableCases(t testing.TB) []goldenCase {
	all := loadGolden(t)
	var out []goldenCase
	for _, i := range []int{0, 10, 11, 3, 12, 21, 5, 16, 7} {
		out = append(out, all[i%len(all)])
	}
	return out
}

var placeNames = map[placement]string{placeHost: "host", placeDevice: "device", placeStatic: "static"}

// placed returns a predictor on the tiny bundle whose decodes keep their
// cross part at place (Adapter on the cpu provider runs the cuda code path
// with the adapters in host memory).
func placed(t testing.TB, place placement, opts Options) *Predictor {
	t.Helper()
	opts.Truncation = TruncateRight
	opts.CUDAGraph = place == placeStatic // opens the static graph
	p := tinyWith(t, opts)
	p.cachePlace = place
	return p
}

// Every way to decode runs through one loop: {host, device-on-CPU} cache x
// {B=1, B=3} x {argmax, grammar, replay} chooser x {none, n-gram} drafter.
// Argmax and replay must give the golden ids; grammar gives per item what
// the reference (host, one item, no drafter) gives, every output inside the
// grammar and, where the free output was already whole, the free output.
// Drafting must never change a token and must save calls; a replay must
// take exactly the calls of the model producing the same tokens.
func TestDecodeTable(t *testing.T) {
	ctx := context.Background()
	cases := tableCases(t)
	feats := make([][]float32, len(cases))
	for i, c := range cases {
		feats[i] = loadNpy(t, c.Tensors["image_features"])
	}
	eos := tiny(t).bundle.Manifest.Tokens.EOSID
	grammarMin := tiny(t).grammars.MinTokens()
	request := func(i int, chooser string) predict.Request {
		c := cases[i]
		r := predict.Request{Features: feats[i], Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens}
		if chooser == "replay" {
			// another screen, which the model answers differently (checked
			// below): the replay decides. The prompt stays, which the
			// drafter reads too (prompt lookup).
			r.Features = feats[(i+1)%len(feats)]
			r.Replay = c.GeneratedIDs
			if r.Replay[len(r.Replay)-1] == eos {
				r.Replay = r.Replay[:len(r.Replay)-1]
			}
			r.MaxNewTokens = max(c.MaxNewTokens, len(r.Replay)+1)
		}
		if chooser == "grammar" {
			r.MaxNewTokens = max(c.MaxNewTokens, grammarMin)
		}
		return r
	}
	type key struct {
		place          placement
		chooser, draft string
	}
	preds := map[key]*Predictor{}
	results := map[string][]*predict.Result{} // by configuration name
	var ref []*predict.Result                 // grammar reference: host, B=1, no drafter
	for _, place := range []placement{placeHost, placeDevice, placeStatic} {
		for _, chooser := range []string{"argmax", "grammar", "replay"} {
			for _, draft := range []string{"none", "ngram"} {
				opts := Options{Constrained: chooser == "grammar"}
				if draft == "none" {
					opts.Decoding = DecodeGreedy
				}
				preds[key{place, chooser, draft}] = placed(t, place, opts)
			}
		}
	}
	for _, chooser := range []string{"grammar", "argmax", "replay"} {
		for _, place := range []placement{placeHost, placeDevice, placeStatic} {
			for _, draft := range []string{"none", "ngram"} {
				for _, B := range []int{1, 3} {
					name := fmt.Sprintf("%s/%s/B=%d/%s", placeNames[place], chooser, B, draft)
					p := preds[key{place, chooser, draft}]
					var got []*predict.Result
					for lo := 0; lo < len(cases); lo += B {
						var reqs []predict.Request
						for i := lo; i < lo+B; i++ {
							reqs = append(reqs, request(i, chooser))
						}
						res, err := p.PredictBatch(ctx, reqs)
						if err != nil {
							t.Fatalf("%s items %d..: %v", name, lo, err)
						}
						got = append(got, res...)
					}
					results[name] = got
					if chooser == "grammar" && ref == nil {
						ref = got // host/grammar/B=1/none comes first
					}
					for i, res := range got {
						c := cases[i]
						switch chooser {
						case "argmax", "replay":
							want := c.GeneratedIDs
							if chooser == "replay" && want[len(want)-1] != eos {
								want = append(slices.Clip(want), eos) // cut by its limit; the replay ends
							}
							if !slices.Equal(res.TokenIDs, want) {
								t.Errorf("%s %s: ids differ from golden\n got %v\nwant %v", name, c.ID, res.TokenIDs, want)
							}
						case "grammar":
							if !slices.Equal(res.TokenIDs, ref[i].TokenIDs) {
								t.Errorf("%s %s: ids differ from the reference\n got %v\nwant %v", name, c.ID, res.TokenIDs, ref[i].TokenIDs)
							}
							if !action.ValidOutputPrefix(res.Raw) && !action.ValidOutputPrefix(p.tok.Decode(res.TokenIDs, decodePlain)) {
								t.Errorf("%s %s: left the grammar: %q", name, c.ID, res.Raw)
							}
						}
						if draft == "none" && B == 1 && res.Timings.DecoderCalls != len(res.TokenIDs) {
							t.Errorf("%s %s: %d calls for %d tokens", name, c.ID, res.Timings.DecoderCalls, len(res.TokenIDs))
						}
					}
				}
			}
		}
	}
	// The replays' screens make the model answer otherwise.
	differ := 0
	for i, c := range cases {
		r := request(i, "replay")
		r.Replay = nil
		res, err := tiny(t).Predict(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
			differ++
		}
	}
	if differ < len(cases)/2 {
		t.Errorf("on the replays' screens the model answers %d of %d cases as golden: a replay would not be seen to decide", len(cases)-differ, len(cases))
	}
	// Drafts save calls; a replay costs what the model's own decoding does.
	for _, place := range []string{"host", "device", "static"} {
		for _, B := range []int{1, 3} {
			calls := func(chooser, draft string) (n int) {
				for _, r := range results[fmt.Sprintf("%s/%s/B=%d/%s", place, chooser, B, draft)] {
					n += r.Timings.DecoderCalls
				}
				return n
			}
			if g, s := calls("argmax", "none"), calls("argmax", "ngram"); s >= g {
				t.Errorf("%s B=%d: n-gram drafts took %d calls, greedy %d", place, B, s, g)
			}
			if B == 1 {
				if r, m := calls("replay", "ngram"), calls("argmax", "ngram"); r != m {
					t.Errorf("%s: replay took %d calls, the model's own decoding %d", place, r, m)
				}
			}
		}
	}
	// Where the free output was already whole, the grammar changes nothing.
	same := 0
	for i, r := range results["host/argmax/B=1/none"] {
		if action.CompleteOutput(tiny(t).tok.Decode(r.TokenIDs, decodePlain)) {
			same++
			if !slices.Equal(r.TokenIDs, ref[i].TokenIDs) {
				t.Errorf("%s: the grammar changed a whole output\n free %q\n cons %q", cases[i].ID, r.Raw, ref[i].Raw)
			}
		}
	}
	if same == 0 {
		t.Error("no table case was whole without the grammar: the check above proves nothing")
	}
}

// With the grammar, every limit that can hold a valid action gives one that
// parses; a smaller limit is refused up front with the number needed.
func TestGrammarWithinLimit(t *testing.T) {
	p := placed(t, placeHost, Options{Constrained: true})
	need := p.grammars.MinTokens()
	cases := loadGolden(t)
	ctx := context.Background()
	checked := 0
	for limit := 5; limit <= 85; limit += 4 {
		for _, c := range []goldenCase{cases[0], cases[5], cases[12]} {
			req := predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: limit}
			res, err := p.Predict(ctx, req)
			if limit < need {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at least %d tokens", need)) {
					t.Fatalf("limit %d < %d: got %v", limit, need, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("limit %d: %v", limit, err)
			}
			if res.ParseErr != nil {
				t.Errorf("limit %d %s: %d tokens do not parse: %q", limit, c.ID, len(res.TokenIDs), res.Raw)
			}
			if len(res.TokenIDs) > limit {
				t.Errorf("limit %d: %d tokens", limit, len(res.TokenIDs))
			}
			checked++
		}
	}
	t.Logf("shortest valid action: %d tokens; %d outputs at limits %d..85 parse", need, checked, need)
}

// One validator serves every path: each bad request fails alone, in a
// batch and in Check, with the same message.
func TestRequestValidation(t *testing.T) {
	p := tiny(t)
	feat := make([]float32, p.cfg.ImageDim)
	nan := append([]float32(nil), feat...)
	nan[7] = float32(inf())
	bad := []struct {
		req  predict.Request
		want string
	}{
		{predict.Request{Goal: "x"}, "no screen"},
		{predict.Request{Features: []float32{1}, Goal: "x"}, "image_dim"},
		{predict.Request{Features: nan, Goal: "x"}, "image feature 7"},
		{predict.Request{Features: feat, Goal: "x", MaxNewTokens: -1}, "negative"},
		{predict.Request{Features: feat, Goal: "x", Replay: make([]int64, 20), MaxNewTokens: 20}, "does not fit"},
		{predict.Request{Features: feat, Goal: "x", Replay: []int64{-3}}, "outside the vocabulary"},
		{predict.Request{Features: feat, Goal: "x", History: []action.Action{{Type: action.DualPoint, Touch: action.Point{Y: 1.5}, Lift: action.Point{}}}}, "history action 0"},
		// Limits that bound memory (issue 22: 1e8 tokens allocated ~77 GB).
		{predict.Request{Features: feat, Goal: "x", MaxNewTokens: 100000000}, "max_new_tokens 100000000 is over this model's limit of 127"},
		{predict.Request{Features: feat, Goal: "x", MaxNewTokens: 128}, "limit of 127"},
		{predict.Request{Features: feat, Goal: strings.Repeat("g", predict.MaxGoalBytes+1)}, "goal is 8193 bytes, over the limit of 8192"},
		{predict.Request{Features: feat, Goal: "x", History: make([]action.Action, predict.MaxHistory+1)}, "1001 actions, over the limit of 1000"},
		{predict.Request{Features: feat, Goal: "x", History: []action.Action{{Type: action.TypeText, Touch: action.NoPoint, Lift: action.NoPoint, Text: strings.Repeat("t", predict.MaxTypedTextBytes+1)}}}, "typed_text is 8193 bytes"},
	}
	for _, ok := range []predict.Request{
		{Features: feat, Goal: "x", MaxNewTokens: 127},
		{Features: feat, Goal: strings.Repeat("g", predict.MaxGoalBytes)},
	} {
		if err := p.Check(ok); err != nil {
			t.Errorf("Check refused a request at the limits: %v", err)
		}
	}
	if err := p.Check(predict.Request{Features: feat, Goal: "ok"}); err != nil {
		t.Errorf("Check refused a good request: %v", err)
	}
	for _, b := range bad {
		_, err := p.Predict(context.Background(), b.req)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("alone: want %q, got %v", b.want, err)
		}
		var rerr *predict.RequestError
		if !errors.As(err, &rerr) {
			t.Errorf("%q: not a RequestError: %T", b.want, err)
		}
		if cerr := p.Check(b.req); cerr == nil || err == nil || cerr.Error() != err.Error() {
			t.Errorf("Check: %v, Predict: %v", cerr, err)
		}
		_, err = p.PredictBatch(context.Background(), []predict.Request{{Features: feat, Goal: "ok"}, b.req})
		if err == nil || !strings.Contains(err.Error(), "item 1") || !strings.Contains(err.Error(), b.want) {
			t.Errorf("in a batch: want item 1 and %q, got %v", b.want, err)
		}
	}
}

// decodePlain is the grammar's view of tokens: special tokens dropped, no
// clean-up of spaces.
var decodePlain = tokenizer.DecodeOptions{SkipSpecial: true}

func inf() float64 { return math.Inf(1) }

// caseInputs runs the encoder and fusion on a golden case's own prompt
// tokens and image features: the decoder's inputs.
func caseInputs(t testing.TB, p *Predictor, c goldenCase) (fused encoded, mask []int64) {
	t.Helper()
	return hostInputs(t, p, c.InputIDs, loadNpy(t, c.Tensors["image_features"]))
}

// hostInputs runs the encoder and fusion on one prompt of ids and its image
// features, in Go memory whatever p's placement (so that both placements
// start from the same states).
func hostInputs(t testing.TB, p *Predictor, ids []int64, feat []float32) (fused encoded, mask []int64) {
	t.Helper()
	mask = make([]int64, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	place := p.cachePlace
	p.cachePlace = placeHost
	defer func() { p.cachePlace = place }()
	enc, err := p.runEncoder(1, len(ids), ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	fused, err = p.runFusion(1, len(ids), enc, feat, mask)
	if err != nil {
		t.Fatal(err)
	}
	return fused, mask
}

// compareCaches drives host's and dev's caches through the same script of
// multi-token calls (drafts) and truncations (rejected drafts, and the whole
// past) and requires the same logits from both.
func compareCaches(t testing.TB, host, dev *Predictor, c goldenCase, tol float64) {
	t.Helper()
	g := c.GeneratedIDs
	if len(g) < 10 {
		t.Fatalf("%s: golden output too short for the script", c.ID)
	}
	start := host.bundle.Manifest.Tokens.DecoderStartID
	cat := func(a []int64, b ...int64) []int64 { return append(append([]int64(nil), a...), b...) }
	script := []struct {
		feed []int64
		keep int // truncate to this many cached positions after the call; -1 keeps all
	}{
		{[]int64{start}, -1},
		{cat(g[0:4], 7, 7, 7), 5}, // 4 accepted drafts, 3 rejected
		{g[4:5], -1},
		{cat(g[5:9], 3), 9},
		{g[8:9], 0}, // then drop the whole past
		{cat([]int64{start}, g[0:3]...), -1},
		{g[3:6], 5},
		{g[5:7], -1},
	}
	fused, mask := caseInputs(t, host, c)
	var calls [2]stepper
	for i, p := range []*Predictor{host, dev} {
		var err error
		if calls[i], err = p.newCall(1, fused, mask, 32, 8); err != nil {
			t.Fatal(err)
		}
		defer calls[i].close()
	}
	for i, s := range script {
		var logits [2][]float32
		for j, call := range calls {
			copy(call.input(len(s.feed)), s.feed)
			out, err := call.step(len(s.feed), true)
			if err != nil {
				t.Fatalf("%s call %d (%d): %v", c.ID, i, j, err)
			}
			logits[j] = append([]float32(nil), out.logits...)
			checkArgmax(t, out, host.cfg.VocabSize)
			if s.keep >= 0 {
				if err := call.truncate(s.keep); err != nil {
					t.Fatal(err)
				}
			}
		}
		if d := maxAbsDiff(t, "logits", logits[1], logits[0]); d > tol {
			t.Fatalf("%s call %d (%d tokens): logits differ by %g", c.ID, i, len(s.feed), d)
		}
	}
}

// The device cache (ORT-owned values, in ORT's CPU memory on the cpu
// provider) gives the host cache's logits through drafts and truncations,
// down to an empty past.
func TestDeviceCacheMatchesHost(t *testing.T) {
	host, dev := placed(t, placeHost, Options{}), placed(t, placeDevice, Options{})
	cases := loadGolden(t)
	for _, c := range []goldenCase{cases[0], cases[10], cases[11]} { // short, and long prompts (504, 512)
		compareCaches(t, host, dev, c, 1e-5)
	}
}

// checkArgmax requires a call's argmax ids, where it brought them, to be the
// first index of each logits row's maximum.
func checkArgmax(t testing.TB, out stepOut, V int) {
	t.Helper()
	if out.ids == nil || out.logits == nil {
		return
	}
	for i, id := range out.ids {
		if want := (sample.Argmax{}).Choose(out.logits[i*V:(i+1)*V], nil); id != want {
			t.Fatalf("position %d: argmax output %d, argmax of the logits %d", i, id, want)
		}
	}
}

// A call longer than the cache, or on nothing, is refused, not written past it.
func TestDecoderCallBounds(t *testing.T) {
	for _, place := range []placement{placeHost, placeDevice} {
		p := placed(t, place, Options{})
		fused, mask := caseInputs(t, p, loadGolden(t)[0])
		c, err := p.newCall(1, fused, mask, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.step(3, false); place == placeHost && err == nil {
			t.Error("3 positions into a 2-position cache: no error")
		}
		if _, err := c.step(4, false); err == nil {
			t.Error("4 positions into 3-position buffers: no error")
		}
		if _, err := c.step(0, false); err == nil {
			t.Error("empty call: no error")
		}
		c.close()
		if _, err := p.newCall(1, encoded{host: fused.host[1:]}, mask, 2, 1); err == nil {
			t.Error("fused states of the wrong size: no error")
		}
	}
}

// Constrained per request: in one batch, a constrained and a free item each
// get what they get alone under a predictor with that option.
func TestConstrainedPerRequest(t *testing.T) {
	free := tiny(t)
	cons := placed(t, placeHost, Options{Constrained: true})
	ctx := context.Background()
	var reqs []predict.Request
	for i, c := range loadGolden(t)[:4] {
		reqs = append(reqs, predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t),
			MaxNewTokens: 80, Constrained: i%2 == 1})
	}
	got, err := free.PredictBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		p := free
		if r.Constrained {
			p = cons
		}
		r.Constrained = false
		want, err := p.Predict(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i].TokenIDs, want.TokenIDs) {
			t.Errorf("item %d (constrained %v): %v, alone %v", i, reqs[i].Constrained, got[i].TokenIDs, want.TokenIDs)
		}
	}
}

func TestTimingsJSONRoundTrip(t *testing.T) {
	in := predict.Timings{Preprocess: 1500 * time.Microsecond, Total: 2 * time.Second, DecoderCalls: 7, LaterSteps: 3 * time.Millisecond}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out predict.Timings
	if err := json.Unmarshal(raw, &out); err != nil || out != in {
		t.Fatalf("%s -> %+v (%v)", raw, out, err)
	}
}

// A batch drafts with as many positions per call as VerifyPositions gives
// it: wider calls, fewer of them, the golden tokens either way, on both
// cache placements. The defaults: one call's worth per batch on the CPU,
// every row in full up to batches of 64 on CUDA.
func TestVerifyPositions(t *testing.T) {
	if d := DefaultVerifyPositions(ProviderCPU); d != sample.MaxDraft+1 {
		t.Errorf("cpu default %d, want %d", d, sample.MaxDraft+1)
	}
	if d := DefaultVerifyPositions(ProviderCUDA); d/64 != sample.MaxDraft+1 {
		t.Errorf("cuda default %d: not every row of a batch of 64 drafts in full", d)
	}
	for _, bad := range []int{-1, VerifyPositionsLimit + 1} {
		if err := (Options{VerifyPositions: bad}).check(); err == nil {
			t.Errorf("VerifyPositions %d accepted", bad)
		}
	}
	const B = 8
	cases := loadGolden(t)
	for _, place := range []placement{placeHost, placeDevice} {
		calls := map[int]int{}
		for _, positions := range []int{0, B * (sample.MaxDraft + 1)} {
			p := placed(t, place, Options{VerifyPositions: positions})
			for _, res := range goldenBatches(t, p, cases, B, fmt.Sprintf("place %d positions %d", place, positions)) {
				calls[positions] += res.Timings.DecoderCalls
			}
		}
		if wide, narrow := calls[B*(sample.MaxDraft+1)], calls[0]; wide >= narrow {
			t.Errorf("place %d: %d positions per call took %d calls, the default %d", place, B*(sample.MaxDraft+1), wide, narrow)
		}
		t.Logf("place %d: decoder calls over the golden cases at B=%d: default %d, wide %d", place, B, calls[0], calls[B*(sample.MaxDraft+1)])
	}
}

// MaxDraft widens a row's share of a call: with the cache in every
// placement, drafts of up to 24 tokens give the golden tokens in no more
// calls than 12 (the format's fixed text goes in fewer), and the default
// verify budget grows with it.
func TestMaxDraft(t *testing.T) {
	for _, bad := range []int{-1, MaxDraftLimit + 1} {
		if err := (Options{MaxDraft: bad}).check(); err == nil {
			t.Errorf("MaxDraft %d accepted", bad)
		}
	}
	if d := defaultVerify(ProviderCUDA, 24); d != 64*25 {
		t.Errorf("cuda default with drafts of 24: %d positions, want every row of 64 in full", d)
	}
	if d := defaultVerify(ProviderCUDA, MaxDraftLimit); d > VerifyPositionsLimit {
		t.Errorf("cuda default with drafts of %d: %d positions, over the limit %d", MaxDraftLimit, d, VerifyPositionsLimit)
	}
	const B = 2
	cases := loadGolden(t)
	for _, place := range []placement{placeHost, placeDevice, placeStatic} {
		calls := map[int]int{}
		for _, draft := range []int{0, 24} {
			p := placed(t, place, Options{MaxDraft: draft, VerifyPositions: B * 25})
			for _, res := range goldenBatches(t, p, cases, B, fmt.Sprintf("place %d max draft %d", place, draft)) {
				calls[draft] += res.Timings.DecoderCalls
			}
		}
		if calls[24] > calls[0] {
			t.Errorf("place %d: drafts of 24 took %d calls, of 12 %d", place, calls[24], calls[0])
		}
		t.Logf("place %d: decoder calls over the golden cases at B=%d: drafts of 12 %d, of 24 %d", place, B, calls[0], calls[24])
	}
}

// Aligned calls give the golden tokens in every cache placement, each call
// on a multiple of the alignment, never wider than the aligned width, and in
// as many calls as unaligned: the positions gained are padding, not drafts.
func TestAlignPositions(t *testing.T) {
	for _, bad := range []int{-1, AlignPositionsLimit + 1} {
		if err := (Options{AlignPositions: bad}).check(); err == nil {
			t.Errorf("AlignPositions %d accepted", bad)
		}
	}
	for _, c := range [][3]int{{1, 8, 8}, {8, 8, 8}, {9, 8, 16}, {13, 1, 13}, {13, 16, 16}} {
		if got := alignUp(c[0], c[1]); got != c[2] {
			t.Errorf("alignUp(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
	const B = 3
	cases := loadGolden(t)
	calls := func(res []*predict.Result) (n int) {
		for _, r := range res {
			n += r.Timings.DecoderCalls
		}
		return n
	}
	for _, place := range []placement{placeHost, placeDevice, placeStatic} {
		unaligned := calls(goldenBatches(t, placed(t, place, Options{VerifyPositions: B * 13}), cases, B, "unaligned"))
		for _, align := range []int{8, 16} {
			p := placed(t, place, Options{AlignPositions: align, VerifyPositions: B * 13})
			ks := map[int]int{}
			p.stepHook = func(k int) { ks[k]++ }
			res := goldenBatches(t, p, cases, B, fmt.Sprintf("place %d align %d", place, align))
			for k := range ks {
				if k%align != 0 || k > alignUp(13, align) {
					t.Errorf("place %d align %d: a call on %d positions per row", place, align, k)
				}
			}
			if len(ks) == 0 {
				t.Errorf("place %d align %d: no decoder call seen", place, align)
			}
			if n := calls(res); n != unaligned {
				t.Errorf("place %d align %d: %d decoder calls, %d unaligned", place, align, n, unaligned)
			}
		}
	}
}

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
