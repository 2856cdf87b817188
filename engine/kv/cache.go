package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// Shape is a decoder's geometry.
type Shape struct {
	Layers, Heads, DKV, DModel int
}

// Config describes one host-resident decode's cache.
type Config struct {
	Shape
	Batch  int // rows
	MaxLen int // decoder positions the self-attention part holds
	Names  Names
	Slots  *Slots
}

type dims struct{ b, layers, heads, dkv, model, enc int64 }

// Cache is a decode's state in Go memory: the self-attention part x the
// cross part, bound to every call (the reference path, and the cpu
// provider's default; Device keeps the same state where ORT computes it).
type Cache struct {
	self  *Self
	cross *hostCross
	slots *Slots
}

// New makes the cache of a decode over states [Batch, E, DModel] with
// mask [Batch, E]: run projects the states to the cross-attention K/V.
func New(cfg Config, states []float32, mask []int64, run CrossRun) (*Cache, error) {
	if cfg.Batch <= 0 || len(mask)%cfg.Batch != 0 || len(states) != len(mask)*cfg.DModel {
		return nil, fmt.Errorf("decoder cache: %d states and %d mask values for %d rows of width %d (programmer error)", len(states), len(mask), cfg.Batch, cfg.DModel)
	}
	d := dims{b: int64(cfg.Batch), layers: int64(cfg.Layers), heads: int64(cfg.Heads), dkv: int64(cfg.DKV),
		model: int64(cfg.DModel), enc: int64(len(mask) / cfg.Batch)}
	cross, err := newHostCross(d, cfg.Slots, states, mask, run)
	if err != nil {
		return nil, err
	}
	return &Cache{self: newSelf(cfg.Batch, cfg.Layers, cfg.Heads, cfg.DKV, cfg.MaxLen), cross: cross, slots: cfg.Slots}, nil
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

// Advance records a successful call on k positions per row: the cache
// holds them.
func (c *Cache) Advance(k int) { c.self.advance(int64(k)) }

// Len is the number of cached positions per row.
func (c *Cache) Len() int { return c.self.Len() }

// Cap is the most positions per row the cache holds.
func (c *Cache) Cap() int { return c.self.Cap() }

// Truncate keeps the first n cached positions of every row.
func (c *Cache) Truncate(n int) { c.self.Truncate(n) }

// Rows is the number of batch rows.
func (c *Cache) Rows() int { return int(c.self.b) }

// KeepRows keeps the given batch rows (ascending indices), in that order.
func (c *Cache) KeepRows(rows []int) error {
	if err := CheckRows(rows, c.Rows()); err != nil {
		return err
	}
	if len(rows) == c.Rows() {
		return nil
	}
	c.self.keepRows(rows)
	return c.cross.keepRows(rows)
}

// Close releases the cache's ORT values; closing twice is safe.
func (c *Cache) Close() {
	if c.self != nil {
		c.self.close()
	}
	if c.cross != nil {
		c.cross.close()
		c.cross = nil
	}
}
