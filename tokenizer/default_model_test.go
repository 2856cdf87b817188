package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// The default model's tokenizer is trained on the simulator's task suite
// (scripts/sim_tokenizer.py). Its goldens are Hugging Face ids for prompts and
// targets of the validation split, copied here when the model is retrained.
const (
	defaultTokenizerPath = "../models/default/tokenizer.json"
	defaultGoldenPath    = "testdata/default_model_golden_ids.json"
)

func TestDefaultModelGoldenEncode(t *testing.T) {
	data, err := os.ReadFile(defaultGoldenPath)
	if err != nil {
		t.Fatalf("read %s: %v", defaultGoldenPath, err)
	}
	var g struct {
		VocabSize int `json:"vocab_size"`
		Encode    []struct {
			Text string  `json:"text"`
			IDs  []int64 `json:"ids"`
		} `json:"encode"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("parse %s: %v", defaultGoldenPath, err)
	}
	if len(g.Encode) < 100 {
		t.Fatalf("only %d golden strings", len(g.Encode))
	}
	tok, err := Load(defaultTokenizerPath)
	if err != nil {
		t.Fatalf("load %s: %v", defaultTokenizerPath, err)
	}
	if tok.VocabSize() != g.VocabSize {
		t.Fatalf("vocab size %d, golden %d: goldens and models/default are from different trainings", tok.VocabSize(), g.VocabSize)
	}
	failures := 0
	for i, c := range g.Encode {
		got, err := tok.Encode(c.Text)
		if err != nil {
			t.Fatalf("case %d %q: %v", i, short(c.Text), err)
		}
		if !slices.Equal(got, c.IDs) {
			if failures++; failures <= 5 {
				t.Errorf("case %d %q:\n got %v\nwant %v", i, short(c.Text), got, c.IDs)
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d encodings differ", failures, len(g.Encode))
	}
}
