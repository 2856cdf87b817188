package runner

import (
	"strings"

	"github.com/autoui/autoui/engine"
)

// Default batch sizes (Options.Batch) for `eval run`.
//
// CPU: 4. BenchmarkRunBatch (T5-base, features given, a replayed 104-token
// action, 2 threads, gold history) on the 2-vCPU EPYC, four interleaved
// rounds: B=1 0.31-0.90 steps/s, B=4 0.36-1.01 (fastest in every round,
// 1.13-1.55x B=1), B=8 0.30-0.84 (about B=1), B=16 0.33-0.98. From 7
// items the engine decodes greedily (13 decoder calls per step at B=8
// against 11 at B=4, whose calls still verify 3 drafted tokens per item),
// and a gold batch pads every prompt to the longest of several episodes'
// steps. Predicted history, whose batches hold one step number of several
// episodes (similar lengths), gained more at 16 (1.6x) than at 4 (1.3x).
// B=4 also keeps the batched decoder's buffers small (a quarter of B=16's
// ~1 GB at 512-token prompts). Since prompts are encoded in groups of
// similar length, B=16 is 12-18% faster than B=4 on that benchmark in
// both modes (docs/eval.md); 4 stays the default for its memory.
//
// CUDA: 64, measured on one H200 (docs/cuda.md, "Batches"): the smallest
// batch within 10% of the best screens/s of `autoui bench --batch` on
// base-vitg (fp32 8: 30, 32: 65, 64: 76 screens/s; fp16 vision 31, 68, 85),
// and `eval run` of models/default went from 110 steps/s at 8 to 220 at
// 64. The decoder's state stays on the device and every row drafts in full
// (engine.DefaultVerifyPositions), so a wider batch costs little per call.
const (
	DefaultBatchCPU  = 4
	DefaultBatchCUDA = 64
)

// DefaultBatch is the batch size `eval run` uses on a provider (the
// --provider value: "cpu", "cuda"; anything else is taken as cpu).
func DefaultBatch(provider string) int {
	return forProvider(provider, DefaultBatchCPU, DefaultBatchCUDA)
}

// forProvider is cuda's value under the cuda provider, else cpu's.
func forProvider(provider string, cpu, cuda int) int {
	if strings.EqualFold(provider, string(engine.ProviderCUDA)) {
		return cuda
	}
	return cpu
}

// How many record files `eval run` reads at once (aitw.ReadOptions.Interleave).
// One gzip stream inflates 250-290 full-size AITW steps/s on one core
// (docs/eval.md, reading ahead), under the 329 screens/s the engine takes
// on an H200 at batch 64; four at once read about four times as many on a
// host with the cores. On the cpu the engine takes a few steps/s: one file
// at a time, in the files' order.
const (
	DefaultReadFilesCPU  = 1
	DefaultReadFilesCUDA = 4
)

// DefaultReadFiles is the files `eval run` reads at once on a provider.
func DefaultReadFiles(provider string) int {
	return forProvider(provider, DefaultReadFilesCPU, DefaultReadFilesCUDA)
}
