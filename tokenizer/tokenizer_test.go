package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Golden data written by `python -m scripts.tokenizer_fixture` with Hugging Face
// tokenizers 0.20.3 / transformers 4.46.3.
const goldenPath = "testdata/golden_ids.json"

var layouts = []string{"legacy", "modern"}

type goldenEncode struct {
	Text         string  `json:"text"`
	Legacy       []int64 `json:"legacy"`
	Modern       []int64 `json:"modern"`
	LayoutsAgree bool    `json:"layouts_agree"`
}

func (g goldenEncode) ids(layout string) []int64 {
	if layout == "legacy" {
		return g.Legacy
	}
	return g.Modern
}

type goldenDecode struct {
	IDs    []int64           `json:"ids"`
	Legacy map[string]string `json:"legacy"`
	Modern map[string]string `json:"modern"`
}

func (g goldenDecode) results(layout string) map[string]string {
	if layout == "legacy" {
		return g.Legacy
	}
	return g.Modern
}

type golden struct {
	Layouts       map[string]string `json:"layouts"`
	VocabSize     int               `json:"vocab_size"`
	PadID         int64             `json:"pad_id"`
	EOSID         int64             `json:"eos_id"`
	UnkID         int64             `json:"unk_id"`
	SpecialTokens map[string]int64  `json:"special_tokens"`
	Encode        []goldenEncode    `json:"encode"`
	Decode        []goldenDecode    `json:"decode"`
}

var (
	goldenOnce sync.Once
	goldenData *golden
	goldenErr  error
	tokCache   sync.Map // layout -> *Tokenizer
)

func loadGolden(t testing.TB) *golden {
	t.Helper()
	goldenOnce.Do(func() {
		data, err := os.ReadFile(goldenPath)
		if err != nil {
			goldenErr = err
			return
		}
		var g golden
		goldenErr = json.Unmarshal(data, &g)
		goldenData = &g
	})
	if goldenErr != nil {
		t.Fatalf("read %s: %v", goldenPath, goldenErr)
	}
	return goldenData
}

func loadLayout(t testing.TB, layout string) *Tokenizer {
	t.Helper()
	if tok, ok := tokCache.Load(layout); ok {
		return tok.(*Tokenizer)
	}
	g := loadGolden(t)
	tok, err := Load(filepath.FromSlash(g.Layouts[layout]))
	if err != nil {
		t.Fatalf("load %s: %v", layout, err)
	}
	tokCache.Store(layout, tok)
	return tok
}

func TestGoldenEncode(t *testing.T) {
	g := loadGolden(t)
	if len(g.Encode) < 200 {
		t.Fatalf("only %d golden strings", len(g.Encode))
	}
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			tok := loadLayout(t, layout)
			failures := 0
			for i, c := range g.Encode {
				got, err := tok.Encode(c.Text)
				if err != nil {
					t.Fatalf("case %d %q: %v", i, c.Text, err)
				}
				if !slices.Equal(got, c.ids(layout)) {
					failures++
					if failures <= 10 {
						t.Errorf("case %d %q:\n got %v\nwant %v", i, short(c.Text), got, c.ids(layout))
					}
				}
			}
			if failures > 0 {
				t.Errorf("%d of %d encodings differ", failures, len(g.Encode))
			}
		})
	}
}

func TestGoldenEncodeNoEOS(t *testing.T) {
	g := loadGolden(t)
	for _, layout := range layouts {
		tok := loadLayout(t, layout)
		for i, c := range g.Encode {
			got, err := tok.EncodeNoEOS(c.Text)
			if err != nil {
				t.Fatalf("%s case %d: %v", layout, i, err)
			}
			want := c.ids(layout)
			if !slices.Equal(got, want[:len(want)-1]) {
				t.Errorf("%s case %d %q: got %v, want %v without </s>", layout, i, short(c.Text), got, want)
			}
		}
	}
}

func TestGoldenDecode(t *testing.T) {
	g := loadGolden(t)
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			tok := loadLayout(t, layout)
			n := 0
			for i, c := range g.Decode {
				for _, skip := range []bool{true, false} {
					for _, clean := range []bool{true, false} {
						key := fmt.Sprintf("skip=%t,cleanup=%t", skip, clean)
						want, ok := c.results(layout)[key]
						if !ok {
							t.Fatalf("case %d: no %s result", i, key)
						}
						got := tok.Decode(c.IDs, DecodeOptions{SkipSpecial: skip, CleanUpSpaces: clean})
						if got != want {
							t.Errorf("case %d %v %s:\n got %q\nwant %q", i, c.IDs, key, got, want)
						}
						n++
					}
				}
			}
			if n < 400 {
				t.Errorf("only %d decode checks", n)
			}
		})
	}
}

func TestSpecialIDs(t *testing.T) {
	g := loadGolden(t)
	for _, layout := range layouts {
		tok := loadLayout(t, layout)
		if tok.VocabSize() != g.VocabSize {
			t.Errorf("%s: VocabSize %d, want %d", layout, tok.VocabSize(), g.VocabSize)
		}
		if tok.EOS() != g.EOSID || tok.Pad() != g.PadID || tok.Unk() != g.UnkID {
			t.Errorf("%s: eos/pad/unk %d/%d/%d, want %d/%d/%d", layout, tok.EOS(), tok.Pad(), tok.Unk(), g.EOSID, g.PadID, g.UnkID)
		}
		for s, id := range g.SpecialTokens {
			if got, ok := tok.TokenID(s); !ok || got != id {
				t.Errorf("%s: TokenID(%q) = %d, %v; want %d", layout, s, got, ok, id)
			}
			if got, ok := tok.Token(id); !ok || got != s {
				t.Errorf("%s: Token(%d) = %q, %v; want %q", layout, id, got, ok, s)
			}
		}
		for _, id := range []int64{-1, int64(g.VocabSize), 1 << 40} {
			if _, ok := tok.Token(id); ok {
				t.Errorf("%s: Token(%d) found", layout, id)
			}
		}
		if _, ok := tok.TokenID("no such token"); ok {
			t.Errorf("%s: TokenID of an unknown string found", layout)
		}
	}
}

// The layouts differ only (1) where text directly follows an added token: the legacy
// layout starts that text with "▁", the modern one ("first" prepend scheme) does not; and
// (2) on White_Space characters the charsmap keeps (U+0085): the legacy WhitespaceSplit
// drops them, the modern layout hands them to the model.
func TestLayoutDifferences(t *testing.T) {
	g := loadGolden(t)
	for _, c := range g.Encode {
		if c.LayoutsAgree != slices.Equal(c.Legacy, c.Modern) {
			t.Errorf("%q: layouts_agree flag is wrong", short(c.Text))
		}
		if !c.LayoutsAgree && !hasAddedToken(c.Text) && !strings.Contains(c.Text, "\u0085") {
			t.Errorf("%q: layouts differ without an added token in the text", short(c.Text))
		}
	}
}

func hasAddedToken(s string) bool {
	return strings.Contains(s, "</s>") || strings.Contains(s, "<pad>") || strings.Contains(s, "<unk>") ||
		strings.Contains(s, "<extra_id_")
}

func TestConcurrentUse(t *testing.T) {
	g := loadGolden(t)
	tok := loadLayout(t, "modern")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(g.Encode); i += 3 {
				c := g.Encode[i]
				got, err := tok.Encode(c.Text)
				if err != nil || !slices.Equal(got, c.Modern) {
					errs <- fmt.Errorf("worker %d case %d: %v %v", w, i, got, err)
					return
				}
				d := g.Decode[i%len(g.Decode)]
				if s := tok.Decode(d.IDs, DecodeOptions{SkipSpecial: true, CleanUpSpaces: true}); s != d.Modern["skip=true,cleanup=true"] {
					errs <- fmt.Errorf("worker %d decode %d: %q", w, i, s)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLoadErrors(t *testing.T) {
	base, err := os.ReadFile(filepath.FromSlash(loadGolden(t).Layouts["modern"]))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(d map[string]any)) []byte {
		var d map[string]any
		_ = json.Unmarshal(base, &d)
		f(d)
		b, _ := json.Marshal(d)
		return b
	}
	cases := map[string][]byte{
		"not json":     []byte("{"),
		"bpe model":    edit(func(d map[string]any) { d["model"].(map[string]any)["type"] = "BPE" }),
		"no model":     edit(func(d map[string]any) { delete(d, "model") }),
		"unknown norm": edit(func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} }),
		"bad regex": edit(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "(?<=a)b"}, "content": ""}
		}),
		"bad charsmap b64": edit(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": "!!"}
		}),
		"short charsmap": edit(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": "AQID"}
		}),
		"huge trie size": edit(func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": "/////wAAAAA="}
		}),
		"unknown pretok":   edit(func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "ByteLevel"} }),
		"bad scheme":       edit(func(d map[string]any) { d["pre_tokenizer"].(map[string]any)["prepend_scheme"] = "sometimes" }),
		"unknown decoder":  edit(func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }),
		"unknown post":     edit(func(d map[string]any) { d["post_processor"] = map[string]any{"type": "BertProcessing"} }),
		"unk out of range": edit(func(d map[string]any) { d["model"].(map[string]any)["unk_id"] = 1e6 }),
		"no unk":           edit(func(d map[string]any) { delete(d["model"].(map[string]any), "unk_id") }),
		"lstrip token":     edit(func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["lstrip"] = true }),
		"bad vocab entry":  edit(func(d map[string]any) { d["model"].(map[string]any)["vocab"] = []any{[]any{"a"}} }),
	}
	for name, data := range cases {
		if _, err := FromJSON(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
