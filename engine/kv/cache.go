package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// Shape is a decoder's geometry.
type Shape struct {
	Layers, Heads, DKV, DModel int
}

// Placement says where the cross part lives.
type Placement int

const (
	// Host keeps the encoder mask and cross-attention K/V in Go memory,
	// bound to every call.
	Host Placement = iota
	// Adapter holds them in ORT LoRA adapters: in device memory with a
	// device allocator, else in ORT's host memory (the same code path, which
	// is how it is tested without a GPU).
	Adapter
)

// Config describes one decode's cache.
type Config struct {
	Shape
	Batch  int // rows
	MaxLen int // decoder positions the self-attention part holds
	Names  Names
	Slots  *Slots
	Place  Placement
	// Alloc is the device allocator for Adapter (nil: ORT host memory).
	// The cache owns it and destroys it on Close.
	Alloc *ort.Allocator
}

type dims struct{ b, layers, heads, dkv, model, enc int64 }

// Cache is a decode's state: the self-attention part x the cross part.
type Cache struct {
	self  *Self
	cross cross
	slots *Slots
	alloc *ort.Allocator
}

// New makes the cache of a decode over states [Batch, E, DModel] with
// mask [Batch, E]: run projects the states to the cross-attention K/V.
func New(cfg Config, states []float32, mask []int64, run CrossRun) (*Cache, error) {
	if cfg.Batch <= 0 || len(mask)%cfg.Batch != 0 || len(states) != len(mask)*cfg.DModel {
		return nil, fmt.Errorf("decoder cache: %d states and %d mask values for %d rows of width %d (programmer error)", len(states), len(mask), cfg.Batch, cfg.DModel)
	}
	d := dims{b: int64(cfg.Batch), layers: int64(cfg.Layers), heads: int64(cfg.Heads), dkv: int64(cfg.DKV),
		model: int64(cfg.DModel), enc: int64(len(mask) / cfg.Batch)}
	c := &Cache{slots: cfg.Slots, alloc: cfg.Alloc}
	var err error
	switch cfg.Place {
	case Host:
		var h *hostCross
		if h, err = newHostCross(d, cfg.Slots, states, mask, run); err == nil {
			c.cross = h
		}
	case Adapter:
		var a *deviceCross
		if a, err = newDeviceCross(d, cfg.Names, cfg.Slots, cfg.Alloc, states, mask, run); err == nil {
			c.cross = a
		}
	default:
		err = fmt.Errorf("unknown placement %d (programmer error)", cfg.Place)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.self = newSelf(cfg.Batch, cfg.Layers, cfg.Heads, cfg.DKV, cfg.MaxLen)
	return c, nil
}

// Bind binds everything of the next call but its ids and logits, for k new
// positions per row.
func (c *Cache) Bind(ins, outs []ort.Value, k int) error {
	if len(ins) != c.slots.Inputs || len(outs) != c.slots.Outputs {
		return fmt.Errorf("decoder call binds %d inputs and %d outputs, want %d and %d (programmer error)", len(ins), len(outs), c.slots.Inputs, c.slots.Outputs)
	}
	if err := c.self.bind(ins, outs, c.slots, int64(k)); err != nil {
		return err
	}
	c.cross.bind(ins, c.slots)
	return nil
}

// RunOptions are the calls' run options (nil: none).
func (c *Cache) RunOptions() *ort.RunOptions { return c.cross.runOptions() }

// Advance records a successful call on k positions per row: the cache
// holds them.
func (c *Cache) Advance(k int) { c.self.advance(int64(k)) }

// Len is the number of cached positions per row.
func (c *Cache) Len() int { return c.self.Len() }

// Cap is the most positions per row the cache holds.
func (c *Cache) Cap() int { return c.self.Cap() }

// Truncate keeps the first n cached positions of every row.
func (c *Cache) Truncate(n int) { c.self.Truncate(n) }

// Close releases the cache's ORT values; closing twice is safe.
func (c *Cache) Close() {
	if c.self != nil {
		c.self.close()
	}
	if c.cross != nil {
		c.cross.close()
		c.cross = nil
	}
	// The adapters referred to the allocator.
	if c.alloc != nil {
		c.alloc.Destroy()
		c.alloc = nil
	}
}
