package engine

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/models"
)

// graph is one ONNX graph of a bundle, opened as a session whose inputs and
// outputs are bound by the manifest's names (never by position).
type graph struct {
	role    models.Role
	path    string
	inputs  []string
	outputs []string
	sess    *ort.DynamicAdvancedSession
}

// openGraph checks the graph's reported inputs and outputs against the
// manifest, then opens a session for it.
func openGraph(b *models.Bundle, role models.Role, so *ort.SessionOptions) (*graph, error) {
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
	var sess *ort.DynamicAdvancedSession
	sess, err = ort.NewDynamicAdvancedSession(path, g.inputs, g.outputs, so)
	g.sess = sess
	if err != nil {
		return nil, fmt.Errorf("load %s graph %s: %w", role, path, err)
	}
	return g, nil
}

func (g *graph) close() {
	if g != nil && g.sess != nil {
		g.sess.Destroy()
		g.sess = nil
	}
}

// run executes the graph. in and out are keyed by name; every input must
// be given, and an output left nil is allocated by ORT and returned in out.
func (g *graph) run(in map[string]ort.Value, out map[string]ort.Value) error {
	ins := make([]ort.Value, len(g.inputs))
	for i, n := range g.inputs {
		v, ok := in[n]
		if !ok || v == nil {
			return fmt.Errorf("run %s graph: input %q not provided (programmer error)", g.role, n)
		}
		ins[i] = v
	}
	outs := make([]ort.Value, len(g.outputs))
	for i, n := range g.outputs {
		outs[i] = out[n]
	}
	if err := g.sess.Run(ins, outs); err != nil {
		return fmt.Errorf("run %s graph %s: %w", g.role, g.path, err)
	}
	for i, n := range g.outputs {
		if out[n] == nil {
			out[n] = outs[i]
		}
	}
	return nil
}
