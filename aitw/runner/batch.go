package runner

import (
	"strings"

	"github.com/autoui/autoui/engine"
)

// DefaultBatch is the batch size `eval run` uses on a provider ("cpu",
// "cuda"; anything else is taken as cpu).
func DefaultBatch(provider string) int {
	if strings.EqualFold(provider, string(engine.ProviderCUDA)) {
		return 16
	}
	return 8
}
