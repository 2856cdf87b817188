package engine

import (
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
	"github.com/autoui/autoui/engine/kv"
)

// fixedGraph runs a graph of one float32 input and one float32 output (the
// vision tower) on fixed device buffers, one set per batch size, and under
// capture has ORT capture each set's run as a CUDA graph and replay it
// (Options.CUDAGraph): at batch 1 the ViT-g tower is ~600 kernel launches.
// Each run copies its input up and its output down by kv.Ops' copy graphs.
// A batch runs on a set of staticRows(b) rows when bucket is set (under
// capture: a few captured sizes, not every one); the extra rows hold
// whatever the last run left there, and their outputs are dropped.
type fixedGraph struct {
	g       *graph // opened with capture under cuda
	ops     *kv.Ops
	mem     *ort.MemoryInfo
	capture bool
	bucket  bool
	in, out []int64 // one row's dims

	mu     sync.Mutex // one run at a time (under capture its runs are the capture thread's anyway)
	sets   map[int]*fixedSet
	graphs int // graph ids handed out
	// runHook, when set (tests), runs before each run of the graph.
	runHook func()
	// alone, when set (under capture), is held around each run's device
	// work: the graph's session has plain runs beside the capture thread
	// too, which must not share the memory a capture or replay uses.
	alone sync.Locker
}

// capturingRuns is how many runs of a set may capture its CUDA graph: ORT's
// CUDA provider captures a graph id at its third run on a thread, after
// two plain ones; one more in case a release captures on the second.
const capturingRuns = 3

// mayCapture reports whether a run of b rows may be one that captures (the
// set's first capturingRuns), when a capture must see no other CUDA work.
func (f *fixedGraph) mayCapture(b int) bool {
	if f == nil || !f.capture {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sets[f.rows(b)]
	return s == nil || s.runs < capturingRuns
}

// rows is how many rows the set that runs a batch of b has.
func (f *fixedGraph) rows(b int) int {
	if f.bucket {
		return staticRows(b)
	}
	return b
}

// maxFixedSets bounds the batch sizes a fixedGraph keeps buffers (and, under
// capture, a CUDA graph) for.
const maxFixedSets = 64

// fixedSet is one batch size's buffers and binding.
type fixedSet struct {
	in, out  []float32 // host sides
	host     [2]ortval.Pinned
	dev      [2]*ort.OwnedValue
	up, down *kv.Transfer
	bind     *ort.IoBinding
	opts     *ort.RunOptions // the graph id under capture, else nil
	shape    ort.Shape
	rows     int
	runs     int // runs made
}

// run runs the graph on b rows of input, which fill writes into the host
// side of the set's input buffer (no copy of a batch's pixels), into out;
// both row-major.
func (f *fixedGraph) run(b int, fill func(in []float32) error, out []float32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rows := f.rows(b)
	s, err := f.set(rows)
	if err != nil {
		return err
	}
	if len(out)*rows != len(s.out)*b {
		return fmt.Errorf("fixed %s graph: %d output values for %d rows (programmer error)", f.g.role, len(out), b)
	}
	if err := fill(s.in[:len(s.in)/rows*b]); err != nil {
		return err
	}
	if f.runHook != nil {
		f.runHook()
	}
	if f.alone != nil {
		f.alone.Lock()
		defer f.alone.Unlock()
	}
	if err := s.up.Run(); err != nil {
		return fmt.Errorf("%s input: %w", f.g.role, err)
	}
	s.runs++
	if err := f.g.sess.RunWithBindingOptions(s.bind, s.opts); err != nil {
		return fmt.Errorf("run %s graph %s: %w", f.g.role, f.g.path, err)
	}
	if err := s.down.Run(); err != nil {
		return fmt.Errorf("%s output: %w", f.g.role, err)
	}
	copy(out, s.out)
	return nil
}

// set returns the buffers of a batch of rows, made on first use.
func (f *fixedGraph) set(rows int) (*fixedSet, error) {
	if s := f.sets[rows]; s != nil {
		return s, nil
	}
	if len(f.sets) >= maxFixedSets {
		return nil, fmt.Errorf("fixed %s graph: buffers for %d batch sizes already, refusing another (batch fewer sizes)", f.g.role, len(f.sets))
	}
	s := &fixedSet{rows: rows}
	if err := f.makeSet(s); err != nil {
		s.close()
		return nil, fmt.Errorf("fixed %s graph, %d rows: %w", f.g.role, rows, err)
	}
	if f.sets == nil {
		f.sets = map[int]*fixedSet{}
	}
	f.sets[rows] = s
	return s, nil
}

func (f *fixedGraph) makeSet(s *fixedSet) error {
	for i, row := range [2][]int64{f.in, f.out} {
		dims := append([]int64{int64(s.rows)}, row...)
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		data := make([]float32, n)
		if i == 0 {
			s.in = data
		} else {
			s.out = data
		}
		var err error
		if s.host[i], err = ortval.NewTensor(&s.shape, data, dims...); err != nil {
			return err
		}
		if s.dev[i], err = f.ops.Zeros(dims, f.mem); err != nil {
			return fmt.Errorf("allocate: %w", err)
		}
	}
	var err error
	if s.up, err = f.ops.NewTransfer(true, []ort.Value{&s.host[0]}, []ort.Value{s.dev[0]}); err != nil {
		return err
	}
	if s.down, err = f.ops.NewTransfer(true, []ort.Value{s.dev[1]}, []ort.Value{&s.host[1]}); err != nil {
		return err
	}
	if s.bind, err = f.g.sess.CreateIoBinding(); err != nil {
		return err
	}
	if err := s.bind.BindInput(f.g.inputs[0], s.dev[0]); err != nil {
		return err
	}
	if err := s.bind.BindOutput(f.g.outputs[0], s.dev[1]); err != nil {
		return err
	}
	if f.capture {
		f.graphs++ // ids 1..; 0 is ORT's default
		if s.opts, err = ortval.GraphRunOptions(f.graphs); err != nil {
			return err
		}
	}
	return nil
}

func (s *fixedSet) close() {
	for _, t := range []*kv.Transfer{s.up, s.down} {
		if t != nil {
			t.Close()
		}
	}
	if s.bind != nil {
		s.bind.Destroy()
	}
	if s.opts != nil {
		s.opts.Destroy()
	}
	ortval.DestroyAll(s.dev[:])
	ortval.ReleaseAll(s.host[:])
}

func (f *fixedGraph) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sets {
		s.close()
	}
	f.sets = nil
}
