package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBundle writes a bundle whose "graphs" are placeholder bytes: Load only
// checks files against the manifest, the runtime checks graph contents.
func fakeBundle(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]any{}
	io := func(in, out string) ([]map[string]any, []map[string]any) {
		return []map[string]any{{"name": in, "dtype": "float32", "dims": []any{"batch_size", 3}}},
			[]map[string]any{{"name": out, "dtype": "float32", "dims": []any{"batch_size", 8}}}
	}
	for _, r := range append(append([]Role{}, GraphRoles...), RoleTokenizer) {
		name := string(r) + ".bin"
		data := []byte("contents of " + name)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		spec := map[string]any{"path": name, "sha256": hex.EncodeToString(sum[:]), "size": len(data)}
		if r != RoleTokenizer {
			spec["inputs"], spec["outputs"] = io("in_"+string(r), "out_"+string(r))
		}
		files[string(r)] = spec
	}
	m := map[string]any{
		"format": Format, "format_version": FormatVersion, "name": "fake",
		"model":      map[string]any{"size": "tiny", "d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 1, "num_decoder_layers": 1, "num_heads": 2, "vocab_size": 10, "image_dim": 4},
		"vision":     map[string]any{"image_size": 224, "patch_size": 14, "hidden_size": 4, "num_layers": 1, "num_heads": 1, "output_dim": 4},
		"files":      files,
		"tokens":     map[string]any{"pad_id": 0, "eos_id": 1, "unk_id": 2, "decoder_start_id": 0},
		"preprocess": map[string]any{"height": 224, "width": 224, "resample": "bicubic", "rescale_factor": 1.0 / 255, "mean": []float64{0.5, 0.5, 0.5}, "std": []float64{0.5, 0.5, 0.5}},
		"prompt":     map[string]any{"history_window": 8, "max_source_tokens": 512, "max_target_tokens": 127},
		"action":     map[string]any{"scroll_map": "fixed"},
		"precision":  "fp32",
	}
	if edit != nil {
		edit(m)
	}
	raw, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func file(m map[string]any, r Role) map[string]any {
	return m["files"].(map[string]any)[string(r)].(map[string]any)
}

func TestLoadValid(t *testing.T) {
	dir := fakeBundle(t, nil)
	b, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Manifest.Model.DModel != 8 || b.Path(RoleEncoder) != filepath.Join(dir, "encoder.bin") {
		t.Fatalf("unexpected bundle %+v", b.Manifest.Model)
	}
	if got := b.Manifest.Files[RoleVision].Inputs[0].Dims; !got[0].Dynamic() || got[1].Size != 3 {
		t.Fatalf("dims parsed as %v", got)
	}
}

// A manifest without max_target_tokens gets Auto-UI's cap of 127 new tokens.
func TestMaxTargetTokensDefault(t *testing.T) {
	dir := fakeBundle(t, func(m map[string]any) { delete(m["prompt"].(map[string]any), "max_target_tokens") })
	b, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Manifest.Prompt.MaxTargetTokens; got != 127 {
		t.Errorf("max_target_tokens %d, want 127", got)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(m map[string]any)
		after   func(dir string)
		want    error
		mention string
	}{
		{name: "missing graph", after: func(dir string) { os.Remove(filepath.Join(dir, "decoder.bin")) }, want: ErrMissingFile, mention: "decoder.bin"},
		{name: "checksum", after: func(dir string) {
			os.WriteFile(filepath.Join(dir, "encoder.bin"), []byte("contents of xxxxxxx.bin"), 0o644)
		}, want: ErrChecksum, mention: "encoder.bin"},
		{name: "truncated", after: func(dir string) { os.WriteFile(filepath.Join(dir, "fusion.bin"), []byte("short"), 0o644) }, want: ErrSizeMismatch, mention: "fusion.bin"},
		{name: "future version", edit: func(m map[string]any) { m["format_version"] = 99 }, want: ErrFormatVersion, mention: "format_version 99"},
		{name: "merged decoder (format 1)", edit: func(m map[string]any) { m["format_version"] = 1 }, want: ErrFormatVersion, mention: "scripts.upgrade_bundle"},
		{name: "no cross graph", edit: func(m map[string]any) { delete(m["files"].(map[string]any), "decoder_cross") }, want: ErrBadManifest, mention: "files.decoder_cross"},
		{name: "wrong format", edit: func(m map[string]any) { m["format"] = "something" }, want: ErrBadManifest, mention: "something"},
		{name: "no tokenizer", edit: func(m map[string]any) { delete(m["files"].(map[string]any), "tokenizer") }, want: ErrBadManifest, mention: "files.tokenizer"},
		{name: "escaping path", edit: func(m map[string]any) { file(m, RoleVision)["path"] = "../x.onnx" }, want: ErrBadManifest, mention: "../x.onnx"},
		{name: "bad scroll map", edit: func(m map[string]any) { m["action"] = map[string]any{"scroll_map": "diagonal"} }, want: ErrBadManifest, mention: "diagonal"},
		{name: "one mean for three channels", edit: func(m map[string]any) { m["preprocess"].(map[string]any)["mean"] = []float64{0.5} }, want: ErrBadManifest, mention: "1 values"},
		{name: "four stds", edit: func(m map[string]any) { m["preprocess"].(map[string]any)["std"] = []float64{1, 1, 1, 1} }, want: ErrBadManifest, mention: "4 values"},
		{name: "no std", edit: func(m map[string]any) { delete(m["preprocess"].(map[string]any), "std") }, want: ErrBadManifest, mention: "std [0 0 0]"},
		{name: "no source length", edit: func(m map[string]any) { delete(m["prompt"].(map[string]any), "max_source_tokens") }, want: ErrBadManifest, mention: "max_source_tokens 0"},
		{name: "precision", edit: func(m map[string]any) { m["precision"] = "int3" }, want: ErrBadManifest, mention: "int3"},
		{name: "missing external data", edit: func(m map[string]any) {
			file(m, RoleDecoder)["external_data"] = []any{map[string]any{"path": "decoder.bin.data", "size": 10}}
		}, want: ErrMissingFile, mention: "decoder.bin.data"},
		{name: "no manifest", after: func(dir string) { os.Remove(filepath.Join(dir, ManifestFile)) }, want: ErrNoManifest, mention: ManifestFile},
		{name: "garbled manifest", after: func(dir string) { os.WriteFile(filepath.Join(dir, ManifestFile), []byte("{not json"), 0o644) }, want: ErrBadManifest, mention: ManifestFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fakeBundle(t, c.edit)
			if c.after != nil {
				c.after(dir)
			}
			_, err := Load(dir, LoadOptions{})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q should name %q and the bundle", err, c.mention)
			}
		})
	}
}

func TestVerifySizesSkipsHashing(t *testing.T) {
	dir := fakeBundle(t, nil)
	// same size, different bytes: only a checksum notices
	os.WriteFile(filepath.Join(dir, "encoder.bin"), []byte("contents of XXXXXXX.bin"), 0o644)
	if _, err := Load(dir, LoadOptions{Verify: VerifySizes}); err != nil {
		t.Fatalf("size-only verification failed: %v", err)
	}
	if _, err := Load(dir, LoadOptions{}); !errors.Is(err, ErrChecksum) {
		t.Fatalf("full verification: got %v", err)
	}
}

func TestCheckIO(t *testing.T) {
	b, err := Load(fakeBundle(t, nil), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := func() ([]IOInfo, []IOInfo) {
		return []IOInfo{{Name: "in_encoder", DType: "float32", Dims: []int64{-1, 3}}},
			[]IOInfo{{Name: "out_encoder", DType: "float32", Dims: []int64{-1, 8}}}
	}
	in, out := good()
	if err := b.CheckIO(RoleEncoder, in, out); err != nil {
		t.Fatal(err)
	}
	mutations := map[string]func(in, out []IOInfo) ([]IOInfo, []IOInfo){
		"renamed input":  func(in, out []IOInfo) ([]IOInfo, []IOInfo) { in[0].Name = "input_ids"; return in, out },
		"dtype":          func(in, out []IOInfo) ([]IOInfo, []IOInfo) { in[0].DType = "int64"; return in, out },
		"rank":           func(in, out []IOInfo) ([]IOInfo, []IOInfo) { out[0].Dims = []int64{-1}; return in, out },
		"fixed dim":      func(in, out []IOInfo) ([]IOInfo, []IOInfo) { out[0].Dims = []int64{-1, 16}; return in, out },
		"free in graph":  func(in, out []IOInfo) ([]IOInfo, []IOInfo) { out[0].Dims = []int64{-1, -1}; return in, out },
		"extra output":   func(in, out []IOInfo) ([]IOInfo, []IOInfo) { return in, append(out, IOInfo{Name: "present.0"}) },
		"missing output": func(in, out []IOInfo) ([]IOInfo, []IOInfo) { return in, nil },
	}
	for name, mut := range mutations {
		in, out := good()
		in, out = mut(in, out)
		err := b.CheckIO(RoleEncoder, in, out)
		if !errors.Is(err, ErrIOMismatch) || !strings.Contains(err.Error(), "encoder.bin") {
			t.Errorf("%s: got %v", name, err)
		}
	}
}
