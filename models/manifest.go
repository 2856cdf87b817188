// Package models defines the autoui model bundle: a directory of ONNX graphs,
// a tokenizer and a manifest that says what they are. Load validates a bundle
// against its manifest before anything runs, so a missing, corrupted or
// mismatched file is reported by name instead of failing deep inside a session.
package models

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Format identifies a bundle manifest; FormatVersion is the version this
// code reads. Version 1 had one merged decoder (optimum's If on
// use_cache_branch); 2 has the with-past decoder and a cross-attention graph
// (docs/bundle-format.md), and scripts.upgrade_bundle converts 1 to 2.
const (
	Format        = "autoui-bundle"
	FormatVersion = 2
)

// Role names a file of the bundle.
type Role string

// The roles of a bundle's files.
const (
	RoleVision  Role = "vision"
	RoleEncoder Role = "encoder"
	RoleFusion  Role = "fusion"
	RoleDecoder Role = "decoder"
	// RoleDecoderCross projects the fused states to every decoder layer's
	// cross-attention K/V, once per request.
	RoleDecoderCross Role = "decoder_cross"
	// RoleDecoderStatic is the decoder over a fixed-length self-attention
	// cache written at a position input (optional; CUDA-graph capture needs
	// fixed shapes and addresses).
	RoleDecoderStatic Role = "decoder_static"
	RoleTokenizer     Role = "tokenizer"
)

// GraphRoles are the ONNX graphs every bundle has, in pipeline order.
var GraphRoles = []Role{RoleVision, RoleEncoder, RoleFusion, RoleDecoderCross, RoleDecoder}

// OptionalGraphRoles are graphs a bundle may have (older exports lack them);
// Load checks each one the manifest lists.
var OptionalGraphRoles = []Role{RoleDecoderStatic}

// Manifest is manifest.json.
type Manifest struct {
	Format        string            `json:"format"`
	FormatVersion int               `json:"format_version"`
	Name          string            `json:"name"`
	Model         ModelConfig       `json:"model"`
	Vision        VisionConfig      `json:"vision"`
	Files         map[Role]FileSpec `json:"files"`
	Tokens        TokenIDs          `json:"tokens"`
	Preprocess    Preprocess        `json:"preprocess"`
	Prompt        PromptConfig      `json:"prompt"`
	Action        ActionConfig      `json:"action"`
	Precision     string            `json:"precision"`
	Exporter      Exporter          `json:"exporter"`
}

// ModelConfig is the T5 text model with its fusion modules.
type ModelConfig struct {
	Size                         string  `json:"size"`
	DModel                       int     `json:"d_model"`
	DKV                          int     `json:"d_kv"`
	DFF                          int     `json:"d_ff"`
	NumLayers                    int     `json:"num_layers"`
	NumDecoderLayers             int     `json:"num_decoder_layers"`
	NumHeads                     int     `json:"num_heads"`
	VocabSize                    int     `json:"vocab_size"`
	FeedForwardProj              string  `json:"feed_forward_proj"`
	ImageDim                     int     `json:"image_dim"`
	RelativeAttentionNumBuckets  int     `json:"relative_attention_num_buckets"`
	RelativeAttentionMaxDistance int     `json:"relative_attention_max_distance"`
	LayerNormEpsilon             float64 `json:"layer_norm_epsilon"`
}

// VisionConfig is the vision tower.
type VisionConfig struct {
	ImageSize  int `json:"image_size"`
	PatchSize  int `json:"patch_size"`
	HiddenSize int `json:"hidden_size"`
	NumLayers  int `json:"num_layers"`
	NumHeads   int `json:"num_heads"`
	OutputDim  int `json:"output_dim"`
}

// FileSpec describes one file of the bundle. Inputs and Outputs are empty for
// non-graph files.
type FileSpec struct {
	Path         string       `json:"path"`
	SHA256       string       `json:"sha256"`
	Size         int64        `json:"size"`
	ExternalData []DataFile   `json:"external_data,omitempty"`
	Inputs       []TensorSpec `json:"inputs,omitempty"`
	Outputs      []TensorSpec `json:"outputs,omitempty"`
	// CaptureSafe, on the vision graph, says that ONNX Runtime may capture
	// it as a CUDA graph and replay it beside other runs of its session: no
	// kernel of it stages arguments in host memory (scripts/cuda_capture.py).
	CaptureSafe bool `json:"capture_safe,omitempty"`
}

// DataFile is an ONNX external-data file that belongs to a graph.
type DataFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// TensorSpec is a graph input or output.
type TensorSpec struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Dims  []Dim  `json:"dims"`
}

// Dim is a fixed size or a symbolic (dynamic) name; in JSON an integer or a string.
type Dim struct {
	Size int64  // fixed size, when Name is empty
	Name string // symbolic dimension name
}

// Dynamic reports whether the dimension is symbolic.
func (d Dim) Dynamic() bool { return d.Name != "" }

func (d Dim) String() string {
	if d.Dynamic() {
		return d.Name
	}
	return strconv.FormatInt(d.Size, 10)
}

// MarshalJSON writes an integer or a string.
func (d Dim) MarshalJSON() ([]byte, error) {
	if d.Dynamic() {
		return json.Marshal(d.Name)
	}
	return json.Marshal(d.Size)
}

// UnmarshalJSON reads an integer or a string.
func (d *Dim) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*d = Dim{Size: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || s == "" {
		return fmt.Errorf("dimension %s: want an integer or a non-empty name", b)
	}
	*d = Dim{Name: s}
	return nil
}

// TokenIDs are the special token ids the decoder loop needs.
type TokenIDs struct {
	PadID          int64 `json:"pad_id"`
	EOSID          int64 `json:"eos_id"`
	UnkID          int64 `json:"unk_id"`
	DecoderStartID int64 `json:"decoder_start_id"`
}

// Preprocess is the image preprocessing of the vision tower.
type Preprocess struct {
	Height        int     `json:"height"`
	Width         int     `json:"width"`
	Resample      string  `json:"resample"`
	RescaleFactor float64 `json:"rescale_factor"`
	Mean          RGB     `json:"mean"`
	Std           RGB     `json:"std"`
}

// RGB is one value per colour channel. JSON's arrays of another length are
// refused: Go would drop the extra values or leave the missing ones 0.
type RGB [3]float64

func (c *RGB) UnmarshalJSON(b []byte) error {
	var v []float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 3 {
		return fmt.Errorf("%d values, want one per channel (3)", len(v))
	}
	copy(c[:], v)
	return nil
}

// PromptConfig holds the prompt options the model was trained with.
type PromptConfig struct {
	HistoryWindow   int `json:"history_window"`
	MaxSourceTokens int `json:"max_source_tokens"`
	// MaxTargetTokens caps generated tokens; absent, DefaultMaxTargetTokens.
	MaxTargetTokens int `json:"max_target_tokens"`
}

// DefaultMaxTargetTokens is Auto-UI's generation cap: its reference
// generate(max_length=128) counts the decoder start token, so it generates
// at most 127 new tokens.
const DefaultMaxTargetTokens = 127

// ActionConfig says how the model's training data normalized swipes.
type ActionConfig struct {
	ScrollMap string `json:"scroll_map"` // "fixed" or "legacy"
}

// Exporter records what produced the bundle.
type Exporter struct {
	Tool     string            `json:"tool"`
	Source   string            `json:"source"`
	Opset    int               `json:"opset"`
	Versions map[string]string `json:"versions"`
	// TokenizerSource says where tokenizer.json came from: the checkpoint's
	// own, or converted from its spiece.model by the transformers converter.
	TokenizerSource string `json:"tokenizer_source,omitempty"`
}
