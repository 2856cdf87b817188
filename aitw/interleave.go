package aitw

import (
	"errors"
	"sync"
)

// interleaveTurnBytes bounds the pixels one file hands over in a turn
// (ReadOptions.Interleave): a longer episode is handed over in more turns.
// Each file being read holds about a turn ahead of the assembler.
var interleaveTurnBytes = 64 << 20 // a variable for tests

// fileTurn is what one file hands over in its turn: records in reading
// order, and, with end, how the file ended (err nil: read to its end).
type fileTurn struct {
	records []fileRecord
	end     bool
	err     error
}

// errQuit ends a file's reader when the read it feeds is over.
var errQuit = errors.New("read over")

// interleave reads the record files opts.Interleave at a time and takes
// their records in turns (ReadOptions.Interleave).
func (a *assembler) interleave(files []string, fn func(Episode) error) error {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(quit)
		wg.Wait()
	}()
	begin := func(path string) <-chan fileTurn {
		a.st.Files++
		turns := make(chan fileTurn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			readTurns(path, a.opts, turns, quit)
		}()
		return turns
	}
	var open []<-chan fileTurn // by place in the turns
	next := 0
	for ; next < len(files) && len(open) < a.opts.Interleave; next++ {
		open = append(open, begin(files[next]))
	}
	for k := 0; len(open) > 0; {
		t := <-open[k]
		for _, r := range t.records {
			if err := a.take(r, fn); err != nil {
				return err
			}
		}
		if t.end {
			if err := a.fileDone(t.err); err != nil {
				return err
			}
			if next < len(files) {
				open[k] = begin(files[next])
				next++
			} else {
				open = append(open[:k], open[k+1:]...)
				k-- // the next place is now k
			}
		}
		if len(open) > 0 {
			k = (k + 1) % len(open)
		}
	}
	return nil
}

// readTurns reads one record file into turns: a turn ends before a record
// of another episode than its steps', or once it holds
// interleaveTurnBytes of pixels. The last turn carries the file's end.
func readTurns(path string, opts ReadOptions, turns chan<- fileTurn, quit <-chan struct{}) {
	var (
		t        fileTurn
		episode  string // of t's steps, once hasSteps
		hasSteps bool
		bytes    int
	)
	send := func() bool {
		select {
		case turns <- t:
			t, hasSteps, bytes = fileTurn{}, false, 0
			return true
		case <-quit:
			return false
		}
	}
	err := readRecordFile(path, opts.subsetOf(path), opts, func(r fileRecord) error {
		isStep := r.skip == "" && r.warn == ""
		if isStep && hasSteps && (r.step.EpisodeID != episode || bytes >= interleaveTurnBytes) {
			if !send() {
				return errQuit
			}
		}
		if isStep && !hasSteps {
			episode, hasSteps = r.step.EpisodeID, true
		}
		bytes += len(r.step.Pixels)
		t.records = append(t.records, r)
		return nil
	})
	if errors.Is(err, errQuit) {
		return
	}
	t.end, t.err = true, err
	send()
}
