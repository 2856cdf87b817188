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
	// inSlot and outSlot give each name's position in inputs and outputs,
	// for callers that bind by slot (runSlices) on hot paths.
	inSlot, outSlot map[string]int
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
	g := &graph{role: role, path: path, inSlot: map[string]int{}, outSlot: map[string]int{}}
	for _, t := range spec.Inputs {
		g.inSlot[t.Name] = len(g.inputs)
		g.inputs = append(g.inputs, t.Name)
	}
	for _, t := range spec.Outputs {
		g.outSlot[t.Name] = len(g.outputs)
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

// run executes the graph. in and out are keyed by name; an output left nil
// is allocated by ORT and returned in out.
func (g *graph) run(in map[string]ort.Value, out map[string]ort.Value) error {
	ins := make([]ort.Value, len(g.inputs))
	for i, n := range g.inputs {
		v, ok := in[n]
		if !ok {
			return fmt.Errorf("run %s graph: input %q not provided (programmer error)", g.role, n)
		}
		ins[i] = v
	}
	outs := make([]ort.Value, len(g.outputs))
	for i, n := range g.outputs {
		outs[i] = out[n]
	}
	if err := g.runSlices(ins, outs); err != nil {
		return err
	}
	for i, n := range g.outputs {
		if out[n] == nil {
			out[n] = outs[i]
		}
	}
	return nil
}

// runSlices executes the graph on values bound by slot (see slot): ins and
// outs are in the order of g.inputs and g.outputs. A nil output is allocated
// by ORT and stored into outs. The caller keeps both slices across calls,
// so a decode loop binds without building maps.
func (g *graph) runSlices(ins, outs []ort.Value) error {
	if len(ins) != len(g.inputs) || len(outs) != len(g.outputs) {
		return fmt.Errorf("run %s graph: %d inputs and %d outputs bound, want %d and %d (programmer error)",
			g.role, len(ins), len(outs), len(g.inputs), len(g.outputs))
	}
	for i, v := range ins {
		if v == nil {
			return fmt.Errorf("run %s graph: input %q not provided (programmer error)", g.role, g.inputs[i])
		}
	}
	if err := g.sess.Run(ins, outs); err != nil {
		return fmt.Errorf("run %s graph %s: %w", g.role, g.path, err)
	}
	return nil
}

// slots returns the input and output positions of the given names, for
// runSlices.
func (g *graph) slots(inputs, outputs []string) (ins, outs []int, err error) {
	for _, n := range inputs {
		i, ok := g.inSlot[n]
		if !ok {
			return nil, nil, fmt.Errorf("%s graph has no input %q", g.role, n)
		}
		ins = append(ins, i)
	}
	for _, n := range outputs {
		i, ok := g.outSlot[n]
		if !ok {
			return nil, nil, fmt.Errorf("%s graph has no output %q", g.role, n)
		}
		outs = append(outs, i)
	}
	return ins, outs, nil
}

func ioInfos(in []ort.InputOutputInfo) []models.IOInfo {
	out := make([]models.IOInfo, len(in))
	for i, x := range in {
		out[i] = models.IOInfo{Name: x.Name, DType: dtypeName(x.DataType), Dims: []int64(x.Dimensions)}
	}
	return out
}

func dtypeName(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "float32"
	case ort.TensorElementDataTypeFloat16:
		return "float16"
	case ort.TensorElementDataTypeDouble:
		return "float64"
	case ort.TensorElementDataTypeInt64:
		return "int64"
	case ort.TensorElementDataTypeInt32:
		return "int32"
	case ort.TensorElementDataTypeInt8:
		return "int8"
	case ort.TensorElementDataTypeUint8:
		return "uint8"
	case ort.TensorElementDataTypeBool:
		return "bool"
	}
	return t.String()
}

// destroyAll releases ORT values, ignoring nils.
// callTensors are the tensors made for one decoder call, destroyed together
// when it returns.
type callTensors []ort.Value

// float32s wraps data as a tensor of shape owned by the call.
func (c *callTensors) float32s(shape ort.Shape, data []float32) (ort.Value, error) {
	t, err := ort.NewTensor(shape, data)
	if err != nil {
		return nil, fmt.Errorf("decoder tensor %v: %w", shape, err)
	}
	*c = append(*c, t)
	return t, nil
}

func (c *callTensors) destroy() { destroyAll(*c...) }

func destroyAll(vs ...ort.Value) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
}

// release destroys the values of vs and clears them, so a slice of cached
// values can be refilled or released twice safely.
func release(vs []ort.Value) {
	for i, v := range vs {
		if v != nil {
			v.Destroy()
			vs[i] = nil
		}
	}
}
