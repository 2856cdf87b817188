package engine

import (
	"encoding/binary"
	"testing"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// caseInputs runs the encoder and fusion on a golden case's own prompt
// tokens and image features: the decoder's inputs.
func caseInputs(t testing.TB, p *Predictor, c goldenCase) (fused []float32, mask []int64) {
	t.Helper()
	mask = make([]int64, len(c.InputIDs))
	for i := range mask {
		mask[i] = 1
	}
	enc, err := p.encode(c.InputIDs, mask)
	if err != nil {
		t.Fatal(err)
	}
	fused, err = p.fuse(enc, loadNpy(t, c.Tensors["image_features"]), mask)
	if err != nil {
		t.Fatal(err)
	}
	return fused, mask
}

// deviceGreedy decodes a golden case greedily with the device decoder state.
func deviceGreedy(t testing.TB, p *Predictor, c goldenCase) ([]int64, Timings) {
	t.Helper()
	fused, mask := caseInputs(t, p, c)
	var tm Timings
	r, err := p.newDeviceDecodeRun(fused, mask, c.MaxNewTokens, &tm)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	eos := p.bundle.Manifest.Tokens.EOSID
	tok := p.bundle.Manifest.Tokens.DecoderStartID
	var out []int64
	for len(out) < c.MaxNewTokens {
		logits, err := r.step([]int64{tok})
		if err != nil {
			t.Fatalf("%s step %d: %v", c.ID, len(out), err)
		}
		tok = p.pickToken(logits, out, 0, 1<<30)
		out = append(out, tok)
		if tok == eos {
			break
		}
	}
	return out, tm
}

// The device decoder state on the cpu provider (adapters in host memory,
// otherwise the cuda code path) reproduces the golden tokens. Every other
// case, for time: they include the short output and the 504- and 510-token
// prompts, and TestDeviceDecodeMatchesHostRun compares logits call by call.
func TestDeviceDecodeGolden(t *testing.T) {
	p := tiny(t)
	for i, c := range loadGolden(t) {
		if i%2 != 0 {
			continue
		}
		ids, tm := deviceGreedy(t, p, c)
		if !equalIDs(ids, c.GeneratedIDs) {
			t.Errorf("%s: device decoding differs from golden\n got %v\nwant %v", c.ID, ids, c.GeneratedIDs)
		}
		if tm.DecoderCalls != len(ids) {
			t.Errorf("%s: %d decoder calls for %d tokens", c.ID, tm.DecoderCalls, len(ids))
		}
	}
}

// compareWithHostRun drives decodeRun and deviceDecodeRun through the same
// script of multi-token calls (drafts) and truncations (rejected drafts, and
// the whole past) and requires the same logits from both.
func compareWithHostRun(t testing.TB, p *Predictor, c goldenCase, tol float64) {
	t.Helper()
	g := c.GeneratedIDs
	if len(g) < 10 {
		t.Fatalf("%s: golden output too short for the script", c.ID)
	}
	start := p.bundle.Manifest.Tokens.DecoderStartID
	cat := func(a []int64, b ...int64) []int64 { return append(append([]int64(nil), a...), b...) }
	script := []struct {
		feed []int64
		keep int64 // truncate to this many cached positions after the call; -1 keeps all
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
	fused, mask := caseInputs(t, p, c)
	host, err := p.newDecodeRun(fused, mask, 32, &Timings{})
	if err != nil {
		t.Fatal(err)
	}
	defer host.close()
	dev, err := p.newDeviceDecodeRun(fused, mask, 32, &Timings{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.close()
	for i, s := range script {
		want, err := host.step(s.feed)
		if err != nil {
			t.Fatalf("%s call %d host: %v", c.ID, i, err)
		}
		got, err := dev.step(s.feed)
		if err != nil {
			t.Fatalf("%s call %d device: %v", c.ID, i, err)
		}
		if d := maxAbsDiff(t, "logits", got, want); d > tol {
			t.Fatalf("%s call %d (%d tokens after %d): logits differ by %g", c.ID, i, len(s.feed), dev.pastLen-int64(len(s.feed)), d)
		}
		if s.keep >= 0 {
			host.truncate(s.keep)
			dev.truncate(s.keep)
		}
	}
}

func TestDeviceDecodeMatchesHostRun(t *testing.T) {
	p := tiny(t)
	cases := loadGolden(t)
	for _, c := range []goldenCase{cases[0], cases[10], cases[11]} { // short, and long prompts (504, 512)
		compareWithHostRun(t, p, c, 1e-5)
	}
}

// Under cpu no allocator is needed; asking for CUDA memory from a session
// without the CUDA provider fails instead of silently using host memory.
func TestDeviceKVAllocator(t *testing.T) {
	p := tiny(t)
	a, err := kvAllocator(p.decoder.sess, SessionOptions{})
	if a != nil || err != nil {
		t.Fatalf("cpu: allocator %v, error %v; want neither", a, err)
	}
	a, err = kvAllocator(p.decoder.sess, SessionOptions{Provider: ProviderCUDA})
	if err == nil {
		a.Destroy()
		t.Fatal("cuda memory from a cpu-only session: no error")
	}
	t.Log(err)
}

func TestDeviceAdapterLayout(t *testing.T) {
	tiny(t) // the runtime
	params := []adapterParam{
		{name: "a", dtype: onnxFloat, elem: 4, dims: []int64{1, 3}},
		{name: "empty_one", dtype: onnxFloat, elem: 4, dims: []int64{1, 4, 0, 2}},
		{name: "mask", dtype: onnxInt64, elem: 8, dims: []int64{2}},
	}
	buf, err := layoutAdapter(params)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf.float32s(0), []float32{1.5, -2, 3})
	copy(buf.int64s(2), []int64{-1, 1 << 40})
	if uintptr(unsafe.Pointer(&buf.bytes[0]))%8 != 0 {
		t.Error("buffer not 8-aligned in Go memory")
	}
	if string(buf.bytes[4:8]) != "TORT" {
		t.Fatalf("identifier %q", buf.bytes[4:8])
	}
	for i, r := range buf.raw {
		if len(r) == 0 {
			continue
		}
		off := uintptr(unsafe.Pointer(&r[0])) - uintptr(unsafe.Pointer(&buf.bytes[0]))
		if off%16 != 0 {
			t.Errorf("param %d data at %d, not 16-aligned", i, off)
		}
	}
	if got := binary.LittleEndian.Uint64(buf.raw[2][8:]); got != 1<<40 {
		t.Errorf("int64 view wrote %d", got)
	}
	a, err := ort.NewLoraAdapterWithData(buf.bytes)
	if err != nil {
		t.Fatalf("ORT rejects the adapter: %v", err)
	}
	a.Destroy()

	bad := append([]byte(nil), buf.bytes...)
	copy(bad[4:8], "XXXX")
	if a, err := ort.NewLoraAdapterWithData(bad); err == nil {
		a.Destroy()
		t.Error("ORT accepted an adapter without its identifier: the check above proves nothing")
	}
	if _, err := layoutAdapter([]adapterParam{{name: "x", dtype: onnxFloat, elem: 4, dims: []int64{-1}}}); err == nil {
		t.Error("negative dimension accepted")
	}
}

// A step longer than the buffers is refused, not written past them.
func TestDeviceDecodeBounds(t *testing.T) {
	p := tiny(t)
	c := loadGolden(t)[0]
	fused, mask := caseInputs(t, p, c)
	r, err := p.newDeviceDecodeRun(fused, mask, 2, &Timings{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if _, err := r.step([]int64{0, 1, 2}); err == nil {
		t.Error("3 tokens into a 2-position cache: no error")
	}
	if _, err := r.step(nil); err == nil {
		t.Error("empty step: no error")
	}
	if _, err := p.newDeviceDecodeRun(fused[1:], mask, 2, &Timings{}); err == nil {
		t.Error("fused states of the wrong size: no error")
	}
}
