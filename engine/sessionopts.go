package engine

import ort "github.com/yalue/onnxruntime_go"

// ORT returns new ONNX Runtime session options with these settings, the
// provider included, for sessions outside a predictor (bench's device
// probe). The caller destroys them.
func (o SessionOptions) ORT() (*ort.SessionOptions, error) { return o.build() }
