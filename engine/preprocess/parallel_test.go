package preprocess

import (
	"fmt"
	"sync/atomic"
	"testing"
)

func TestParallelCallsEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 64} {
		seen := make([]int32, n)
		if err := Parallel(n, func(i int) error { atomic.AddInt32(&seen[i], 1); return nil }); err != nil {
			t.Fatal(err)
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: index %d called %d times", n, i, c)
			}
		}
	}
}

func TestParallelReturnsLowestError(t *testing.T) {
	err := Parallel(50, func(i int) error {
		if i%7 == 3 {
			return fmt.Errorf("item %d", i)
		}
		return nil
	})
	if err == nil || err.Error() != "item 3" {
		t.Fatalf("got %v, want item 3", err)
	}
}
