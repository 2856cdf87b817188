package preprocess

import (
	"runtime"
	"sync"
)

// Parallel calls fn(i) for every i in [0, n) on up to GOMAXPROCS goroutines:
// decoding and resizing many screenshots is plain Go work that scales with
// the cores. It returns the error of the lowest failing index, so the
// message does not depend on scheduling.
func Parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < min(runtime.GOMAXPROCS(0), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				errs[i] = fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
