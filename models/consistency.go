package models

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Bounds on manifest values that size buffers. A manifest that lies about
// them would otherwise make the engine allocate gigabytes before a graph can
// refuse its input, so Load refuses it instead.
const (
	// MaxImageSide bounds preprocess.height and width (ViTs take 224-1024).
	MaxImageSide = 2048
	// MaxTargetTokensLimit bounds max_target_tokens and any override of it:
	// the self-attention cache grows with it (Auto-UI generates <= 127).
	MaxTargetTokensLimit = 1024
	// MaxSourceTokensLimit bounds max_source_tokens (Auto-UI: 512).
	MaxSourceTokensLimit = 8192
)

// checkConsistency cross-checks the manifest's numbers against each other
// and against its own graph specs (which openGraph checks against the
// graphs): sizes, token ids and the dimensions every graph shares.
func (m *Manifest) checkConsistency() error {
	c, p := m.Model, m.Preprocess
	if p.Height > MaxImageSide || p.Width > MaxImageSide {
		return fmt.Errorf("preprocess size %dx%d is over the limit of %d per side: %w", p.Width, p.Height, MaxImageSide, ErrBadManifest)
	}
	if s := m.Vision.ImageSize; s > 0 && (p.Height != s || p.Width != s) {
		return fmt.Errorf("preprocess size %dx%d differs from vision.image_size %d: %w", p.Width, p.Height, s, ErrBadManifest)
	}
	if m.Vision.OutputDim != c.ImageDim {
		return fmt.Errorf("vision.output_dim %d differs from model.image_dim %d: %w", m.Vision.OutputDim, c.ImageDim, ErrBadManifest)
	}
	if n := m.Prompt.MaxTargetTokens; n > MaxTargetTokensLimit {
		return fmt.Errorf("prompt.max_target_tokens %d is over the limit of %d: %w", n, MaxTargetTokensLimit, ErrBadManifest)
	}
	if n := m.Prompt.MaxSourceTokens; n > MaxSourceTokensLimit {
		return fmt.Errorf("prompt.max_source_tokens %d is over the limit of %d: %w", n, MaxSourceTokensLimit, ErrBadManifest)
	}
	t := m.Tokens
	for _, id := range []struct {
		name string
		v    int64
	}{{"pad_id", t.PadID}, {"eos_id", t.EOSID}, {"unk_id", t.UnkID}, {"decoder_start_id", t.DecoderStartID}} {
		if id.v < 0 || id.v >= int64(c.VocabSize) {
			return fmt.Errorf("tokens.%s %d is outside the vocabulary of %d: %w", id.name, id.v, c.VocabSize, ErrBadManifest)
		}
	}
	if t.EOSID == t.PadID || t.EOSID == t.DecoderStartID {
		return fmt.Errorf("tokens.eos_id %d is also the pad or decoder start id: %w", t.EOSID, ErrBadManifest)
	}
	for _, role := range slices.Concat(GraphRoles, OptionalGraphRoles) {
		spec := m.Files[role] // an absent optional graph has nothing to check
		for _, ts := range append(append([]TensorSpec{}, spec.Inputs...), spec.Outputs...) {
			if err := checkDims(ts, m.expectedDims(ts.Name)); err != nil {
				return fmt.Errorf("files.%s %w: %w", role, err, ErrBadManifest)
			}
			if want, ok := engineDTypes[ts.Name]; ok && ts.DType != want {
				return fmt.Errorf("files.%s %q is %s; the engine's buffers for it are %s: %w", role, ts.Name, ts.DType, want, ErrBadManifest)
			}
		}
	}
	return nil
}

// engineDTypes are the element types of the tensors the engine feeds and
// reads by name (the K/V caches' are CacheDType's): a graph of another type
// would fail in its first call, so its bundle is refused at load.
var engineDTypes = map[string]string{
	"pixel_values": "float32", "image_features": "float32",
	"input_ids": "int64", "attention_mask": "int64", "encoder_attention_mask": "int64", "position": "int64",
	"last_hidden_state": "float32", "encoder_hidden_states": "float32", "fused_hidden_states": "float32",
	"logits": "float32", "logits_argmax": "int64",
}

// expectedDims gives the sizes a tensor's fixed dimensions must have, by
// its name (optimum's and the exporter's names); -1 leaves a dimension free.
func (m *Manifest) expectedDims(name string) []int64 {
	c, p := m.Model, m.Preprocess
	switch {
	case name == "pixel_values":
		return []int64{-1, 3, int64(p.Height), int64(p.Width)}
	case name == "image_features":
		return []int64{-1, int64(c.ImageDim)}
	case name == "logits":
		return []int64{-1, -1, int64(c.VocabSize)}
	case name == "last_hidden_state", name == "fused_hidden_states", name == "encoder_hidden_states":
		return []int64{-1, -1, int64(c.DModel)}
	case isCache(name):
		return []int64{-1, int64(c.NumHeads), -1, int64(c.DKV)}
	}
	return nil
}

// isCache reports whether name is a decoder graph's K/V input or output
// (optimum's past_key_values.* and present.*).
func isCache(name string) bool {
	return strings.HasPrefix(name, "past_key_values.") || strings.HasPrefix(name, "present.")
}

// CacheDType is the element type of the decoder graphs' K/V: float32, or
// float16 where scripts.half --fp16-cache made it so. Every past and present
// of the decoders and every output of the cross graph must have the same
// one; a manifest without them says float32.
func (m *Manifest) CacheDType() (string, error) {
	dtype, first := "", ""
	for _, role := range []Role{RoleDecoder, RoleDecoderCross, RoleDecoderStatic} {
		spec := m.Files[role]
		for _, t := range append(slices.Clone(spec.Inputs), spec.Outputs...) {
			switch {
			case !isCache(t.Name):
			case first == "":
				dtype, first = t.DType, string(role)+" "+t.Name
			case t.DType != dtype:
				return "", fmt.Errorf("%s %s is %s, %s %s: want one cache type", role, t.Name, t.DType, first, dtype)
			}
		}
	}
	return cmp.Or(dtype, "float32"), nil
}

// checkDims compares a spec's fixed dimensions with the expected sizes.
func checkDims(ts TensorSpec, want []int64) error {
	if want == nil {
		return nil
	}
	if len(ts.Dims) != len(want) {
		return fmt.Errorf("%q has rank %d, want %d", ts.Name, len(ts.Dims), len(want))
	}
	for i, d := range ts.Dims {
		// fixed, so that the config's numbers, which size the engine's
		// buffers, are the graph's (CheckIO compares the graph with these)
		if want[i] >= 0 && d.Dynamic() {
			return fmt.Errorf("%q dimension %d is free (%q), where the manifest's config says %d: export it fixed", ts.Name, i, d.Name, want[i])
		}
		if want[i] >= 0 && d.Size != want[i] {
			return fmt.Errorf("%q dimension %d is %d, the manifest's config says %d", ts.Name, i, d.Size, want[i])
		}
	}
	return nil
}
