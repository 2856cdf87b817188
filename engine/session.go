package engine

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/internal/ortval"
	"github.com/autoui/autoui/models"
)

// graph is one ONNX graph of a bundle, opened as a session whose inputs and
// outputs are the manifest's, in its order. Every call binds values by slot
// (a position in those lists), the slots found by name once (never by
// position in the file): in and out here, kv.Slots for the decoder.
type graph struct {
	role    models.Role
	path    string
	inputs  []string
	outputs []string
	in, out map[string]int // slot by name
	sess    *ort.DynamicAdvancedSession
	// runOpts, when set, go with every run (a session with CUDA-graph
	// capture on runs plainly only when told: ortval.GraphRunOptions(-1)).
	runOpts *ort.RunOptions
}

// openGraph checks the graph's reported inputs and outputs against the
// manifest, then opens a session for it.
func openGraph(b *models.Bundle, role models.Role, so *ort.SessionOptions, profile string) (*graph, error) {
	g, err := readGraph(b, role)
	if err != nil {
		return nil, err
	}
	if profile != "" {
		// one file per graph, named by its role (ORT names a profile only by
		// the time it started)
		if err := so.EnableProfiling(profile + "-" + string(role)); err != nil {
			return nil, fmt.Errorf("load %s graph: profiling: %w", role, err)
		}
		defer so.DisableProfiling()
	}
	if g.sess, err = ort.NewDynamicAdvancedSession(g.path, g.inputs, g.outputs, so); err != nil {
		return nil, fmt.Errorf("load %s graph %s: %w", role, g.path, err)
	}
	return g, nil
}

// readGraph is openGraph without the session: the graph's checked inputs and
// outputs only (a graph whose weights need not be loaded).
func readGraph(b *models.Bundle, role models.Role) (*graph, error) {
	path := b.Path(role)
	// Read the declared IO from the file: asking ORT would build a throwaway
	// session with all the weights.
	ins, outs, err := models.ReadGraphIO(path)
	if err != nil {
		return nil, fmt.Errorf("load %s graph: %w", role, err)
	}
	if err := b.CheckIO(role, ins, outs); err != nil {
		return nil, err
	}
	spec := b.Manifest.Files[role]
	g := &graph{role: role, path: path}
	for _, t := range spec.Inputs {
		g.inputs = append(g.inputs, t.Name)
	}
	for _, t := range spec.Outputs {
		g.outputs = append(g.outputs, t.Name)
	}
	g.in, g.out = slots(g.inputs), slots(g.outputs)
	if err := g.hasNamed(); err != nil {
		return nil, err
	}
	return g, nil
}

// boundByName are the inputs and outputs the engine binds by name, per
// graph (the decoders' are kv.Names, checked by kv.FindSlots; the vision
// tower has one of each, bound by position).
var boundByName = map[models.Role][2][]string{
	models.RoleEncoder: {{"input_ids", "attention_mask"}, {"last_hidden_state"}},
	models.RoleFusion:  {{"encoder_hidden_states", "attention_mask", "image_features"}, {"fused_hidden_states"}},
}

// hasNamed refuses a graph that lacks an input or output the engine binds
// by name: a missing name would be slot 0's.
func (g *graph) hasNamed() error {
	want := boundByName[g.role]
	for i, m := range []map[string]int{g.in, g.out} {
		for _, n := range want[i] {
			if _, ok := m[n]; !ok {
				return fmt.Errorf("load %s graph %s: it has no %s %q, which the engine feeds (bundle-format.md)",
					g.role, g.path, [2]string{"input", "output"}[i], n)
			}
		}
	}
	return nil
}

// runOnDevice runs g on inputs bound by slot and leaves its output out
// where ORT computes it (mem: the device under cuda), never copied to Go
// memory.
func (g *graph) runOnDevice(ins []ort.Value, out string, mem *ort.MemoryInfo) (*ort.OwnedValue, error) {
	vs, err := ortval.RunOnDevice(g.sess, g.inputs, ins, []string{out}, mem)
	if err != nil {
		return nil, fmt.Errorf("run %s graph %s: %w", g.role, g.path, err)
	}
	return vs[0], nil
}

func (g *graph) close() {
	if g != nil && g.sess != nil {
		g.sess.Destroy()
		g.sess = nil
	}
	if g != nil && g.runOpts != nil {
		g.runOpts.Destroy()
		g.runOpts = nil
	}
}

func slots(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// values returns a call's input and output slices, empty.
func (g *graph) values() (ins, outs []ort.Value) {
	return make([]ort.Value, len(g.inputs)), make([]ort.Value, len(g.outputs))
}

// run executes the graph on values bound by slot. Every input must be
// given; an output left nil is allocated by ORT and set in outs.
func (g *graph) run(ins, outs []ort.Value) error {
	for i, v := range ins {
		if v == nil {
			return fmt.Errorf("run %s graph: input %q not provided (programmer error)", g.role, g.inputs[i])
		}
	}
	if err := g.sess.RunWithOptions(ins, outs, g.runOpts); err != nil {
		return fmt.Errorf("run %s graph %s: %w", g.role, g.path, err)
	}
	return nil
}
