package kv

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
)

// Self is the self-attention part of the cache: its layout in Go memory and
// the ORT values over it.
//
// ORT values over the first n positions of a buffer ("views") are kept while
// n stays the same: the present of one call is the past of the next, so a
// one-token step makes only the new present's views.
type Self struct {
	selfLayout
	views [2]viewSet
	shape ort.Shape // scratch: ORT copies a tensor's shape
}

// selfLayout is where the cached positions are: per layer a key and a value
// buffer [B, heads, maxLen, d_kv], twice. A call reads its past from one
// buffer and writes past+new (the graph's present) into the other, so the
// cache grows without copying and without allocating. Plain Go memory, so
// its bookkeeping is tested without ONNX Runtime.
type selfLayout struct {
	b, heads, dkv, maxLen int64
	n                     int64 // cached positions
	cur                   int   // the buffer that holds them
	buf                   [2][][]float32
}

type viewSet struct {
	n int64 // -1: none made
	t []ortval.Pinned
}

func newSelf(b, layers, heads, dkv, maxLen int) *Self {
	s := &Self{selfLayout: newSelfLayout(b, layers, heads, dkv, maxLen), shape: make(ort.Shape, 0, 4)}
	for i := range s.views {
		s.views[i] = viewSet{n: -1, t: make([]ortval.Pinned, 2*layers)}
	}
	return s
}

func newSelfLayout(b, layers, heads, dkv, maxLen int) selfLayout {
	s := selfLayout{b: int64(b), heads: int64(heads), dkv: int64(dkv), maxLen: int64(maxLen)}
	for i := range s.buf {
		s.buf[i] = make([][]float32, 2*layers)
		for j := range s.buf[i] {
			s.buf[i][j] = make([]float32, s.b*s.heads*s.maxLen*s.dkv)
		}
	}
	return s
}

// Len is the number of cached positions (of every batch row).
func (s *selfLayout) Len() int { return int(s.n) }

// Cap is the most positions the buffers hold.
func (s *selfLayout) Cap() int { return int(s.maxLen) }

// region is buffer i's tensor j ([2*layer + k/v]) over its first n
// positions, [B, heads, n, d_kv]: what a view wraps.
func (s *selfLayout) region(i, j int, n int64) []float32 { return s.buf[i][j][:s.b*s.heads*n*s.dkv] }

// fits refuses a call on k new positions that the buffers cannot hold.
func (s *selfLayout) fits(k int64) error {
	if k <= 0 || s.n+k > s.maxLen {
		return fmt.Errorf("decoder call on %d positions after %d exceeds the cache's %d (programmer error)", k, s.n, s.maxLen)
	}
	return nil
}

// view returns the tensors over the first n positions of buffer i.
func (s *Self) view(i int, n int64) ([]ortval.Pinned, error) {
	v := &s.views[i]
	if v.n == n {
		return v.t, nil
	}
	ortval.ReleaseAll(v.t)
	v.n = -1
	for j := range s.buf[i] {
		t, err := ortval.NewTensor(&s.shape, s.region(i, j, n), s.b, s.heads, n, s.dkv)
		if err != nil {
			return nil, fmt.Errorf("self-attention cache: %w", err)
		}
		v.t[j] = t
	}
	v.n = n
	return v.t, nil
}

// bind binds the past and the present of a call on k new positions.
func (s *Self) bind(ins, outs []ort.Value, sl *Slots, k int64) error {
	if err := s.fits(k); err != nil {
		return err
	}
	past, err := s.view(s.cur, s.n)
	if err != nil {
		return err
	}
	pres, err := s.view(1-s.cur, s.n+k)
	if err != nil {
		return err
	}
	for l := range sl.Past {
		for kv := SelfKey; kv <= SelfValue; kv++ {
			ins[sl.Past[l][kv]] = &past[2*l+kv]
			outs[sl.Present[l][kv]] = &pres[2*l+kv]
		}
	}
	return nil
}

// advance records a call on k positions: the other buffer holds the cache.
func (s *selfLayout) advance(k int64) {
	s.n += k
	s.cur = 1 - s.cur
}

// Truncate keeps the first n cached positions of every row (the rest were
// rejected drafts or padding).
func (s *selfLayout) Truncate(n int) {
	m := max(int64(n), 0)
	if m >= s.n {
		return
	}
	KeepPositions(s.buf[s.cur], s.b*s.heads, s.n, m, s.dkv)
	s.n = m
}

// keepRows keeps the given batch rows (ascending) of the cached positions.
func (s *selfLayout) keepRows(rows []int) {
	KeepRows(s.buf[s.cur], rows, s.heads*s.n*s.dkv)
	s.b = int64(len(rows))
}

// keepRows keeps the given batch rows and drops the views of the old rows.
func (s *Self) keepRows(rows []int) {
	s.selfLayout.keepRows(rows)
	for i := range s.views {
		ortval.ReleaseAll(s.views[i].t)
		s.views[i].n = -1
	}
}

// KeepPositions keeps the first n of T positions in each buffer, laid out
// [rows, T, d_kv], as [rows, n, d_kv]: each row moves down, in order, and
// never overwrites a row not yet moved.
func KeepPositions(bufs [][]float32, rows, T, n, dkv int64) {
	for _, buf := range bufs {
		for row := int64(1); row < rows; row++ {
			copy(buf[row*n*dkv:(row+1)*n*dkv], buf[row*T*dkv:row*T*dkv+n*dkv])
		}
	}
}

func (s *Self) close() {
	ortval.ReleaseAll(s.views[0].t)
	ortval.ReleaseAll(s.views[1].t)
}
