package ortval

import (
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
