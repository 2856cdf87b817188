module github.com/autoui/autoui

go 1.26.8

require (
	github.com/electricbubble/gadb v0.1.0
	github.com/nlpodyssey/gopickle v0.2.0
	github.com/prometheus/client_golang v1.21.1
	github.com/rivo/uniseg v0.4.7
	github.com/sugarme/tokenizer v0.3.0
	github.com/yalue/onnxruntime_go v1.36.0
	golang.org/x/image v0.23.0
	golang.org/x/sys v0.28.0
	golang.org/x/term v0.27.0
	golang.org/x/text v0.25.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
)

// onnxruntime_go v1.36.0 plus IoBinding.BindOutputToDevice and OwnedValue
// (ORT-owned outputs without a copy): third_party/onnxruntime_go/PATCH.md.
replace github.com/yalue/onnxruntime_go v1.36.0 => ./third_party/onnxruntime_go
