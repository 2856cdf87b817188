package ortval

import (
	"fmt"
	"strconv"

	ort "github.com/yalue/onnxruntime_go"
)

// RunOnDevice runs sess with ins bound to the inputs inNames and every
// output in outNames left where ORT computes it (mem: the device under cuda),
// never copied to Go memory. The outputs come back in outNames' order.
func RunOnDevice(sess *ort.DynamicAdvancedSession, inNames []string, ins []ort.Value, outNames []string, mem *ort.MemoryInfo) ([]*ort.OwnedValue, error) {
	b, err := sess.CreateIoBinding()
	if err != nil {
		return nil, err
	}
	defer b.Destroy()
	for i, v := range ins {
		if v == nil {
			return nil, fmt.Errorf("input %q not provided (programmer error)", inNames[i])
		}
		if err := b.BindInput(inNames[i], v); err != nil {
			return nil, err
		}
	}
	for _, name := range outNames {
		if err := b.BindOutputToDevice(name, mem); err != nil {
			return nil, err
		}
	}
	if err := sess.RunWithBinding(b); err != nil {
		return nil, err
	}
	return b.GetBoundOutputOwnedValues() // in binding order
}

// GraphRunOptions are run options that have a session with CUDA-graph
// capture on capture the run as graph id, or replay it once captured (ORT's
// gpu_graph_id; -1: a plain run). The caller destroys them.
func GraphRunOptions(id int) (*ort.RunOptions, error) {
	o, err := ort.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("run options: %w", err)
	}
	if err := o.AddRunConfigEntry("gpu_graph_id", strconv.Itoa(id)); err != nil {
		o.Destroy()
		return nil, fmt.Errorf("run options: %w", err)
	}
	return o, nil
}
