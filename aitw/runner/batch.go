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
// ~1 GB at 512-token prompts).
//
// CUDA: 8, not measured (no GPU was at hand). A GPU decoder call costs
// about the same for 8 rows as for 1, so fewer sequential calls per step
// pay; but PredictBatch keeps its KV caches in host memory (docs/cuda.md),
// so each call moves B items' self- and cross-attention K/V over the bus,
// which grows with B. 8 cuts the sequential calls per step from 21 (B=1,
// speculative) to about 13 with half the traffic per call of 16. Measure with
// AUTOUI_BENCH_PROVIDER=cuda go test ./aitw/runner -bench RunBatch.
const (
	DefaultBatchCPU  = 4
	DefaultBatchCUDA = 8
)

// DefaultBatch is the batch size `eval run` uses on a provider (the
// --provider value: "cpu", "cuda"; anything else is taken as cpu).
func DefaultBatch(provider string) int {
	if strings.EqualFold(provider, string(engine.ProviderCUDA)) {
		return DefaultBatchCUDA
	}
	return DefaultBatchCPU
}
