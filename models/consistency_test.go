package models

import (
	"errors"
	"strings"
	"testing"
)

// A manifest whose numbers disagree with each other or size buffers beyond
// reason is refused at load, naming the field (issue 22: a 100000-pixel
// preprocess size made the engine run out of memory).
func TestLoadRefusesInconsistentManifest(t *testing.T) {
	setDims := func(role Role, out bool, dims ...any) func(map[string]any) {
		return func(m map[string]any) {
			key := "inputs"
			if out {
				key = "outputs"
			}
			f := file(m, role)
			name := map[Role]string{RoleVision: "pixel_values", RoleDecoder: "logits", RoleDecoderCross: "present.0.encoder.key", RoleEncoder: "last_hidden_state"}[role]
			f[key] = []map[string]any{{"name": name, "dtype": "float32", "dims": dims}}
		}
	}
	section := func(name, key string, v any) func(map[string]any) {
		return func(m map[string]any) { m[name].(map[string]any)[key] = v }
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"huge preprocess", func(m map[string]any) {
			section("preprocess", "height", 100000)(m)
			section("preprocess", "width", 100000)(m)
		}, "over the limit of 2048"},
		{"preprocess vs image_size", func(m map[string]any) {
			section("preprocess", "height", 448)(m)
			section("preprocess", "width", 448)(m)
		}, "vision.image_size 224"},
		{"output_dim vs image_dim", section("vision", "output_dim", 5), "image_dim 4"},
		{"huge max_target_tokens", section("prompt", "max_target_tokens", 100000000), "max_target_tokens 100000000 is over the limit"},
		{"huge max_source_tokens", section("prompt", "max_source_tokens", 1<<30), "max_source_tokens"},
		{"eos outside vocab", section("tokens", "eos_id", 10), "eos_id 10 is outside the vocabulary of 10"},
		{"negative start", section("tokens", "decoder_start_id", -1), "decoder_start_id -1"},
		{"eos is pad", section("tokens", "eos_id", 0), "eos_id 0 is also"},
		{"vision input size", setDims(RoleVision, false, "batch_size", 3, 5000, 5000), `"pixel_values" dimension 2 is 5000`},
		{"vision input rank", setDims(RoleVision, false, "batch_size", 3), `"pixel_values" has rank 2`},
		{"logits vs vocab", setDims(RoleDecoder, true, "b", "s", 32128), `"logits" dimension 2 is 32128, the manifest's config says 10`},
		{"heads", setDims(RoleDecoderCross, true, "b", 3, "s", 4), `dimension 1 is 3`},
		{"d_model", setDims(RoleEncoder, true, "b", "s", 16), `dimension 2 is 16`},
		{"logits dtype", func(m map[string]any) {
			setDims(RoleDecoder, true, "b", "s", 10)(m)
			file(m, RoleDecoder)["outputs"].([]map[string]any)[0]["dtype"] = "float64"
		}, `"logits" is float64; the engine's buffers for it are float32`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(fakeBundle(t, c.edit), LoadOptions{})
			if err == nil {
				t.Fatal("loaded")
			}
			if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrBadManifest naming %q", err, c.want)
			}
		})
	}
	// A free size where the config has a number is refused: the config
	// sizes the engine's buffers, and only a fixed size holds the graph to
	// it (a manifest claiming a vocabulary of 2^31 over free logits made
	// the engine allocate 111 GB).
	_, err := Load(fakeBundle(t, setDims(RoleDecoder, true, "b", "s", "vocab")), LoadOptions{})
	if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), `"logits" dimension 2 is free ("vocab")`) {
		t.Fatalf("free vocabulary dimension: %v", err)
	}
	// Free batch and sequence sizes are the graphs' own.
	if _, err := Load(fakeBundle(t, setDims(RoleVision, false, "b", 3, 224, 224)), LoadOptions{}); err != nil {
		t.Fatalf("free batch size: %v", err)
	}
}
