package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ManifestFile is the manifest's name inside a bundle directory.
const ManifestFile = "manifest.json"

// Errors a bundle check can wrap; test with errors.Is.
var (
	ErrNoManifest    = errors.New("no manifest")
	ErrBadManifest   = errors.New("invalid manifest")
	ErrFormatVersion = errors.New("unsupported bundle format version")
	ErrMissingFile   = errors.New("missing file")
	ErrSizeMismatch  = errors.New("size mismatch")
	ErrChecksum      = errors.New("checksum mismatch")
	ErrIOMismatch    = errors.New("graph inputs/outputs do not match the manifest")
)

// Verify says how much of each file Load checks.
type Verify int

const (
	// VerifyChecksums checks existence, size and SHA-256 of every file (default).
	VerifyChecksums Verify = iota
	// VerifySizes checks existence and size only: for multi-GB bundles
	// already verified once.
	VerifySizes
)

// LoadOptions tune Load.
type LoadOptions struct {
	Verify Verify
}

// Bundle is a validated bundle directory.
type Bundle struct {
	Dir      string
	Manifest Manifest
}

// Load reads dir/manifest.json and checks the bundle against it.
func Load(dir string, opts LoadOptions) (*Bundle, error) {
	mpath := filepath.Join(dir, ManifestFile)
	raw, err := os.ReadFile(mpath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
				return nil, fmt.Errorf("model bundle %s: not a directory: %w", dir, ErrNoManifest)
			}
			return nil, fmt.Errorf("model bundle %s: %s not found (is this an exported bundle? see docs/bundle-format.md): %w", dir, ManifestFile, ErrNoManifest)
		}
		return nil, fmt.Errorf("model bundle %s: read %s: %w", dir, ManifestFile, err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("model bundle %s: parse %s: %v: %w", dir, ManifestFile, err, ErrBadManifest)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("model bundle %s: %s: %w", dir, ManifestFile, err)
	}
	b := &Bundle{Dir: dir, Manifest: m}
	for _, role := range fileRoles() {
		spec, ok := m.Files[role]
		if !ok {
			continue // an optional graph (validate requires the others)
		}
		if err := b.checkFile(spec.Path, spec.Size, spec.SHA256, opts.Verify); err != nil {
			return nil, err
		}
		for _, d := range spec.ExternalData {
			if err := b.checkFile(d.Path, d.Size, d.SHA256, opts.Verify); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// Path returns the absolute-or-relative path of a role's file.
func (b *Bundle) Path(role Role) string {
	return filepath.Join(b.Dir, b.Manifest.Files[role].Path)
}

// fileRoles are every role a manifest may list, required and optional.
func fileRoles() []Role {
	return slices.Concat(GraphRoles, OptionalGraphRoles, []Role{RoleTokenizer})
}

// Has says whether the bundle has a file for the role (optional graphs).
func (b *Bundle) Has(role Role) bool {
	_, ok := b.Manifest.Files[role]
	return ok
}

func (m *Manifest) validate() error {
	if m.Format != Format {
		return fmt.Errorf("format %q, want %q: %w", m.Format, Format, ErrBadManifest)
	}
	switch {
	case m.FormatVersion == 1:
		return fmt.Errorf("format_version 1 (one merged decoder): this autoui reads %d; convert the bundle in place with `python -m scripts.upgrade_bundle DIR`: %w",
			FormatVersion, ErrFormatVersion)
	case m.FormatVersion != FormatVersion:
		return fmt.Errorf("format_version %d, this autoui reads %d (upgrade autoui or re-export the bundle): %w",
			m.FormatVersion, FormatVersion, ErrFormatVersion)
	}
	for _, role := range fileRoles() {
		spec, ok := m.Files[role]
		if !ok && slices.Contains(OptionalGraphRoles, role) {
			continue
		}
		if !ok || spec.Path == "" {
			return fmt.Errorf("files.%s missing: %w", role, ErrBadManifest)
		}
		if filepath.IsAbs(spec.Path) || strings.Contains(filepath.ToSlash(spec.Path), "..") {
			return fmt.Errorf("files.%s path %q must be relative to the bundle: %w", role, spec.Path, ErrBadManifest)
		}
		if role != RoleTokenizer && (len(spec.Inputs) == 0 || len(spec.Outputs) == 0) {
			return fmt.Errorf("files.%s (%s) lists no inputs or outputs: %w", role, spec.Path, ErrBadManifest)
		}
	}
	c := m.Model
	switch {
	case c.DModel <= 0, c.NumHeads <= 0, c.DKV <= 0, c.NumDecoderLayers <= 0, c.VocabSize <= 0, c.ImageDim <= 0:
		return fmt.Errorf("model config incomplete (d_model %d, num_heads %d, d_kv %d, num_decoder_layers %d, vocab_size %d, image_dim %d): %w",
			c.DModel, c.NumHeads, c.DKV, c.NumDecoderLayers, c.VocabSize, c.ImageDim, ErrBadManifest)
	}
	p := m.Preprocess
	if p.Height <= 0 || p.Width <= 0 || p.RescaleFactor <= 0 || p.Std[0] == 0 || p.Std[1] == 0 || p.Std[2] == 0 {
		return fmt.Errorf("preprocess config incomplete (height %d, width %d, rescale_factor %v, std %v: each must be set, and positive but std): %w",
			p.Height, p.Width, p.RescaleFactor, p.Std, ErrBadManifest)
	}
	if p.Resample != "" && p.Resample != "bicubic" {
		return fmt.Errorf("preprocess resample %q: only bicubic is supported: %w", p.Resample, ErrBadManifest)
	}
	if m.Prompt.MaxTargetTokens == 0 {
		m.Prompt.MaxTargetTokens = DefaultMaxTargetTokens
	}
	if m.Prompt.MaxSourceTokens <= 0 || m.Prompt.MaxTargetTokens <= 0 || m.Prompt.HistoryWindow < 0 {
		return fmt.Errorf("prompt config incomplete (max_source_tokens %d and max_target_tokens %d must be positive, history_window %d not negative): %w",
			m.Prompt.MaxSourceTokens, m.Prompt.MaxTargetTokens, m.Prompt.HistoryWindow, ErrBadManifest)
	}
	switch m.Precision {
	case "", "fp32", "fp16", "int8":
	default:
		return fmt.Errorf("precision %q, want fp32, fp16 or int8: %w", m.Precision, ErrBadManifest)
	}
	switch m.Action.ScrollMap {
	case "", "fixed", "legacy":
	default:
		return fmt.Errorf("action scroll_map %q, want fixed or legacy: %w", m.Action.ScrollMap, ErrBadManifest)
	}
	return m.checkConsistency()
}

func (b *Bundle) checkFile(rel string, size int64, sum string, v Verify) error {
	path := filepath.Join(b.Dir, rel)
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("model bundle %s: %s: %w", b.Dir, rel, ErrMissingFile)
		}
		return fmt.Errorf("model bundle %s: %s: %w", b.Dir, rel, err)
	}
	if size > 0 && st.Size() != size {
		return fmt.Errorf("model bundle %s: %s is %d bytes, manifest says %d (truncated or replaced?): %w",
			b.Dir, rel, st.Size(), size, ErrSizeMismatch)
	}
	if v != VerifyChecksums || sum == "" {
		return nil
	}
	got, err := fileSHA256(path)
	if err != nil {
		return fmt.Errorf("model bundle %s: hash %s: %w", b.Dir, rel, err)
	}
	if !strings.EqualFold(got, sum) {
		return fmt.Errorf("model bundle %s: %s has sha256 %s, manifest says %s: %w", b.Dir, rel, got, sum, ErrChecksum)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// IOInfo is what a runtime reports for a graph input or output. Dynamic
// dimensions are negative.
type IOInfo struct {
	Name  string
	DType string
	Dims  []int64
}

// CheckIO compares a graph's reported inputs and outputs with the manifest:
// the same names, element types, ranks and fixed sizes. Order does not
// matter, since sessions bind by name.
func (b *Bundle) CheckIO(role Role, inputs, outputs []IOInfo) error {
	spec := b.Manifest.Files[role]
	if err := matchIO("input", spec.Inputs, inputs); err != nil {
		return fmt.Errorf("model bundle %s: %s: %w", b.Dir, spec.Path, err)
	}
	if err := matchIO("output", spec.Outputs, outputs); err != nil {
		return fmt.Errorf("model bundle %s: %s: %w", b.Dir, spec.Path, err)
	}
	return nil
}

func matchIO(kind string, want []TensorSpec, got []IOInfo) error {
	byName := make(map[string]IOInfo, len(got))
	for _, g := range got {
		byName[g.Name] = g
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("%s %q in the manifest is not in the graph (graph has %s): %w", kind, w.Name, names(got), ErrIOMismatch)
		}
		delete(byName, w.Name)
		if g.DType != "" && w.DType != "" && g.DType != w.DType {
			return fmt.Errorf("%s %q is %s in the graph, %s in the manifest: %w", kind, w.Name, g.DType, w.DType, ErrIOMismatch)
		}
		if len(g.Dims) != len(w.Dims) {
			return fmt.Errorf("%s %q has rank %d in the graph, %d in the manifest: %w", kind, w.Name, len(g.Dims), len(w.Dims), ErrIOMismatch)
		}
		for i, d := range w.Dims {
			switch {
			case d.Dynamic():
			case g.Dims[i] < 0:
				// the manifest's size would go unchecked, and it sizes buffers
				return fmt.Errorf("%s %q dimension %d is free in the graph, %d in the manifest: %w", kind, w.Name, i, d.Size, ErrIOMismatch)
			case g.Dims[i] != d.Size:
				return fmt.Errorf("%s %q dimension %d is %d in the graph, %d in the manifest: %w", kind, w.Name, i, g.Dims[i], d.Size, ErrIOMismatch)
			}
		}
	}
	if len(byName) > 0 {
		extra := make([]IOInfo, 0, len(byName))
		for _, g := range byName {
			extra = append(extra, g)
		}
		sort.Slice(extra, func(i, j int) bool { return extra[i].Name < extra[j].Name })
		return fmt.Errorf("graph %ss %s are not in the manifest: %w", kind, names(extra), ErrIOMismatch)
	}
	return nil
}

func names(ios []IOInfo) string {
	s := make([]string, len(ios))
	for i, io := range ios {
		s[i] = io.Name
	}
	return "[" + strings.Join(s, ", ") + "]"
}
