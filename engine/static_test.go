package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/autoui/autoui/models"
)

// The fixed-buffer decode over the static decoder graph (Options.CUDAGraph,
// here on the cpu provider, without capture) gives the golden tokens on
// every case, greedy and speculative, in batches of 1, 3 and 8 (finished
// rows kept in place and fed padding), twice over, the second time on the
// buffers the first left for reuse.
func TestStaticDecodeGolden(t *testing.T) {
	cases := loadGolden(t)
	for _, dec := range []Decoding{DecodeSpeculative, DecodeGreedy} {
		p := placed(t, placeStatic, Options{Decoding: dec})
		for pass := range 2 {
			for _, B := range []int{1, 3, 8} {
				goldenBatches(t, p, cases, B, fmt.Sprintf("static, %s B=%d pass %d", dec, B, pass))
			}
		}
		p.statics.mu.Lock()
		kept := 0
		for _, free := range p.statics.free {
			kept += len(free)
		}
		p.statics.mu.Unlock()
		if kept == 0 {
			t.Errorf("%s: no buffers kept for reuse", dec)
		}
	}
}

// Logits cross only for the calls whose chooser reads them.
func TestStaticFetchesLogitsOnlyWhereNeeded(t *testing.T) {
	c := loadGolden(t)[0]
	for _, constrained := range []bool{false, true} {
		p := placed(t, placeStatic, Options{Constrained: constrained})
		n, fetched := decodeCountingLogits(t, p, c)
		if want := map[bool]int{false: 0, true: n}[constrained]; fetched != want {
			t.Errorf("constrained=%v: logits fetched in %d of %d calls, want %d", constrained, fetched, n, want)
		}
	}
}

// A bundle without the static graph is refused by name, with the command
// that adds it.
func TestCUDAGraphNeedsStaticGraph(t *testing.T) {
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Has(models.RoleDecoderStatic) {
		t.Fatal("the tiny bundle has no static decoder graph: python -m scripts.upgrade_bundle models/testdata/tiny")
	}
	delete(b.Manifest.Files, models.RoleDecoderStatic)
	_, err = NewPredictor(b, Options{CUDAGraph: true})
	if err == nil || !strings.Contains(err.Error(), "scripts.upgrade_bundle") {
		t.Fatalf("got %v, want a refusal naming scripts.upgrade_bundle", err)
	}
}

// Prompts padded to a multiple of 64 (as under capture, so that prompt
// lengths share CUDA graphs) give the golden tokens.
func TestStaticPaddedPrompts(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	p.promptBucket = capturePromptBucket
	for _, B := range []int{1, 3} {
		goldenBatches(t, p, loadGolden(t), B, fmt.Sprintf("static, prompts padded, B=%d", B))
	}
	p.statics.mu.Lock()
	defer p.statics.mu.Unlock()
	for key := range p.statics.free {
		if key.enc%capturePromptBucket != 0 && key.enc != p.bundle.Manifest.Prompt.MaxSourceTokens {
			t.Errorf("a decode of encoder length %d", key.enc)
		}
	}
}

// Concurrent requests on one predictor each get buffers of their own (or
// reuse ones another has finished with) and the golden tokens.
func TestStaticConcurrent(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	cases := loadGolden(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(cases); i += 4 {
				c := cases[i]
				res, err := p.Predict(context.Background(), c.featureRequest(t))
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("%s: ids differ from golden\n got %v\nwant %v", c.ID, res.TokenIDs, c.GeneratedIDs)
				}
			}
		}()
	}
	wg.Wait()
}
