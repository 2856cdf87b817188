// Package probe measures what this machine can do at best — memory read
// bandwidth and ONNX Runtime's fp32 matrix-multiply throughput — and turns a
// bundle's shapes into lower bounds per pipeline stage: bytes read /
// bandwidth and FLOPs / throughput, whichever is larger.
package probe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/autoui/autoui/models"
)

// Machine is what the probes measured.
type Machine struct {
	Bandwidth float64 // bytes/s
	GEMM      float64 // FLOP/s, fp32
	GEMMInt8  float64 // FLOP/s of the int8 product (0: not measured)
	GEMMHalf  float64 // FLOP/s of the fp16 product (0: not measured)
}

// Cost is the work of one stage: arithmetic and bytes that must come from
// memory (weights and caches; activations that fit in cache are not counted).
type Cost struct {
	FLOPs float64 // all of it, ActFLOPs included
	// ActFLOPs are the activation x activation products (attention scores
	// and their weighted values): fp32 in every bundle, int8 ones included.
	ActFLOPs float64
	Bytes    float64
	Int8     bool // its weight products are int8 (an int8 bundle)
	Half     bool // its weight products are fp16 (the graphs an fp16 bundle converted)
}

// Plus is the work of both stages.
func (c Cost) Plus(o Cost) Cost {
	return Cost{FLOPs: c.FLOPs + o.FLOPs, ActFLOPs: c.ActFLOPs + o.ActFLOPs, Bytes: c.Bytes + o.Bytes, Int8: c.Int8 || o.Int8, Half: c.Half || o.Half}
}

// seconds is how long the cost's bytes take to stream in and its FLOPs to
// run, at best: weight products at the int8 (fp16) rate for int8 (fp16)
// weights when it was measured, everything else at the fp32 rate. 0 where a rate is unknown.
func (m Machine) seconds(c Cost) (read, compute float64) {
	if m.Bandwidth > 0 {
		read = c.Bytes / m.Bandwidth
	}
	weights, rate := c.FLOPs-c.ActFLOPs, m.GEMM
	if c.Int8 && m.GEMMInt8 > 0 {
		rate = m.GEMMInt8
	}
	if c.Half && m.GEMMHalf > 0 {
		rate = m.GEMMHalf
	}
	if rate > 0 && m.GEMM > 0 {
		compute = weights/rate + c.ActFLOPs/m.GEMM
	}
	return read, compute
}

// Bound is the stage's lower bound on this machine: it cannot finish faster
// than its bytes stream in or its FLOPs run at peak matmul rate.
func (m Machine) Bound(c Cost) time.Duration {
	read, compute := m.seconds(c)
	return time.Duration(max(read, compute) * float64(time.Second))
}

// ComputeBound reports whether the cost's FLOPs, not its bytes, set its
// bound (both rates measured).
func (m Machine) ComputeBound(c Cost) bool {
	read, compute := m.seconds(c)
	return m.Bandwidth > 0 && compute > read
}

// Shapes are the model dimensions the bounds need.
type Shapes struct {
	Model       models.ModelConfig
	Vision      models.VisionConfig
	WeightBytes float64 // bytes per weight: 4 for fp32, 1 for int8
	// VisionParams is the vision tower's parameter count. The manifest has no
	// MLP width for it, so it comes from the graph's file sizes.
	VisionParams float64
	// HalfVision and HalfText say that an fp16 bundle converted the vision
	// tower, and the encoder and decoders (2 bytes per weight, fp16 products).
	HalfVision, HalfText bool
	// CacheBytes is the bytes of one K/V element: 4 (float32, also when 0),
	// 2 for a bundle whose decoder graphs keep a float16 cache.
	CacheBytes float64
	// Batch is the number of screens per call (0 or 1: one). A batched call
	// does the arithmetic and reads the caches of every item, but streams
	// the weights once.
	Batch int
}

func (s Shapes) batch() float64 { return float64(max(s.Batch, 1)) }

// ShapesOf reads the shapes from a loaded bundle.
func ShapesOf(b *models.Bundle) Shapes {
	m := b.Manifest
	s := Shapes{Model: m.Model, Vision: m.Vision, WeightBytes: 4}
	if m.Precision == "int8" {
		s.WeightBytes = 1
	}
	s.CacheBytes = 4
	if dtype, err := m.CacheDType(); err == nil && dtype == "float16" { // a mixed one the engine refuses
		s.CacheBytes = 2
	}
	if m.Precision == "fp16" {
		graphs := halfGraphs(b.Dir)
		s.HalfVision = graphs[string(models.RoleVision)]
		s.HalfText = graphs[string(models.RoleEncoder)] && graphs[string(models.RoleDecoder)]
		if s.HalfText {
			s.WeightBytes = 2
		}
	}
	if f, ok := m.Files[models.RoleVision]; ok {
		size := f.Size
		for _, d := range f.ExternalData {
			size += d.Size
		}
		s.VisionParams = float64(size) / s.visionWeightBytes()
	}
	return s
}

// halfGraphs are the graphs scripts.half converted (the manifest's
// half.graphs; none when unreadable: the bounds then count fp32).
func halfGraphs(dir string) map[string]bool {
	var m struct {
		Half struct {
			Graphs []string `json:"graphs"`
		} `json:"half"`
	}
	out := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil && json.Unmarshal(b, &m) == nil {
		for _, g := range m.Half.Graphs {
			out[g] = true
		}
	}
	return out
}

func (s Shapes) visionWeightBytes() float64 {
	if s.HalfVision {
		return 2
	}
	if s.WeightBytes == 2 {
		return 4 // fp16 text graphs beside an fp32 tower
	}
	return s.WeightBytes
}

func (s Shapes) inner() float64 { return float64(s.Model.NumHeads * s.Model.DKV) }

// ffnMats is 3 for gated FFNs (wi_0, wi_1, wo), 2 otherwise.
func (s Shapes) ffnMats() float64 {
	if len(s.Model.FeedForwardProj) >= 6 && s.Model.FeedForwardProj[:6] == "gated-" {
		return 3
	}
	return 2
}

// Encoder is one encoder pass over n tokens.
func (s Shapes) Encoder(n int) Cost {
	d, dff, in, N := float64(s.Model.DModel), float64(s.Model.DFF), s.inner(), float64(n)
	L := float64(s.Model.NumLayers)
	params := L * (4*d*in + s.ffnMats()*d*dff)
	attn := s.batch() * L * 2 * 2 * N * N * in
	return Cost{FLOPs: s.batch()*2*N*params + attn, ActFLOPs: attn, Bytes: params * s.WeightBytes, Int8: s.Int8(), Half: s.HalfText}
}

// Int8 reports whether the weight products are int8 (scripts.quantize
// quantizes the vision, encoder and decoder MatMuls; fusion stays fp32).
func (s Shapes) Int8() bool { return s.WeightBytes == 1 }

// Fusion is the image fusion over n encoder states: the image projection,
// the attention value/output projections and the gate over 2d inputs.
func (s Shapes) Fusion(n int) Cost {
	d, img, N := float64(s.Model.DModel), float64(s.Model.ImageDim), float64(n)
	params := img*d + 2*d*d + 2*d*d
	return Cost{FLOPs: s.batch() * (2*(img*d+2*d*d) + 2*N*2*d*d), Bytes: params * s.WeightBytes}
}

// DecodeStep is one decoder call producing one token after past tokens,
// attending to encLen encoder states. The first call (past = 0) also projects
// the encoder states to cross-attention K/V; later calls read them from the
// cache, of CacheBytes per element.
func (s Shapes) DecodeStep(past, encLen int) Cost {
	d, dff, in := float64(s.Model.DModel), float64(s.Model.DFF), s.inner()
	L, V := float64(s.Model.NumDecoderLayers), float64(s.Model.VocabSize)
	P, E := float64(past+1), float64(encLen)
	B := s.batch()
	params := L*(4*d*in+2*d*in+s.ffnMats()*d*dff) + V*d
	attn := B * L * 2 * 2 * in * (P + E)
	flops := B*2*params + attn
	cb := s.CacheBytes
	if cb == 0 {
		cb = 4
	}
	kv := B * L * 2 * in * (P + E) * cb
	if past == 0 {
		params += L * 2 * d * in
		flops += B * L * 2 * 2 * E * d * in
		kv = B * L * 2 * in * P * cb // the cross K/V are written, not read
	}
	return Cost{FLOPs: flops, ActFLOPs: attn, Bytes: params*s.WeightBytes + kv, Int8: s.Int8(), Half: s.HalfText}
}

// Image is one image through the ViT: every parameter is applied to every
// token (patches + CLS), plus attention, except in the last layer. The pooled
// feature reads only the CLS token of the last layer's output, so there the
// other tokens need only their keys and values (2 hd^2 of the layer's
// parameters), and attention one query: the work the output needs, whether
// or not a graph (exported before graphs revision 5) does more.
func (s Shapes) Image() Cost {
	if s.Vision.PatchSize == 0 || s.Vision.NumLayers < 1 {
		return Cost{}
	}
	side := float64(s.Vision.ImageSize / s.Vision.PatchSize)
	T := side*side + 1
	hd, L, p := float64(s.Vision.HiddenSize), float64(s.Vision.NumLayers), float64(s.Vision.PatchSize)
	B := s.batch()
	attn := B * 2 * 2 * T * hd * ((L-1)*T + 1)
	// A layer's parameters: the tower's less the patch projection, the
	// class and position embeddings and the final norm (a third of a small
	// tower's, with 32-pixel patches).
	embed := 3*p*p*hd + hd + hd + T*hd + 2*hd
	skipped := (T - 1) * 2 * max(0, (s.VisionParams-embed)/L-2*hd*hd)
	return Cost{FLOPs: B*(2*s.VisionParams*T-skipped) + attn, ActFLOPs: attn, Bytes: s.VisionParams * s.visionWeightBytes(), Int8: s.Int8(), Half: s.HalfVision}
}
