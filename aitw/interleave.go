package aitw

import (
	"errors"
	"slices"
	"sync"
)

// interleaveTurnBytes bounds the pixels one file hands over in a turn
// (ReadOptions.Interleave): a longer episode is handed over in more turns.
// Each file being read holds about a turn ahead of the assembler.
var interleaveTurnBytes = 64 << 20 // a variable for tests

// fileTurn is what one file hands over in its turn: records in reading
// order, and, with end, how the file ended (err nil: read to its end).
// A turn cut at interleaveTurnBytes inside an episode keeps the file's
// turn: an episode's records are never split by another file's, so that
// duplicates and conflicts are judged as one file after another judges
// them.
type fileTurn struct {
	records []fileRecord
	cut     bool
	end     bool
	err     error
}

// errQuit ends a file's reader when the read it feeds is over.
var errQuit = errors.New("read over")

// FilesAtOnce is how many of files a read with ReadOptions.Interleave n
// reads at once: 1 (one after another) with pickles among them, never more
// than there are files. The order of the episodes depends on it alone.
func FilesAtOnce(files []string, n int) int {
	if slices.ContainsFunc(files, IsPickle) {
		return 1
	}
	return max(1, min(n, len(files)))
}

// place is a file being read, in its place in the turns.
type place struct {
	index int // in the files
	turns <-chan fileTurn
	drop  chan struct{} // closed to stop this file's reader
}

// interleave reads the record files opts.Interleave at a time and takes
// their records in turns (ReadOptions.Interleave).
//
// A file that fails ends the read, as one file after another does, but
// for what came before the failure: the files before it are read to their
// end and their last episode handed over; the failed file's episode held
// complete is not (it may be the one its error names); files after it read
// no further, but what their turns before the failure held is handed over.
func (a *assembler) interleave(files []string, fn func(Episode) error) error {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(quit)
		wg.Wait()
	}()
	next := 0
	begin := func() place {
		p := place{index: next, drop: make(chan struct{})}
		turns := make(chan fileTurn)
		p.turns = turns
		path := files[next]
		next++
		a.st.Files++
		wg.Add(1)
		go func() {
			defer wg.Done()
			readTurns(path, a.opts, turns, quit, p.drop)
		}()
		return p
	}
	var stopped error // fn's: it ends the read at once
	emit := func(ep Episode) error {
		stopped = fn(ep)
		return stopped
	}
	var open []place // in the order of their turns
	for next < len(files) && len(open) < a.opts.Interleave {
		open = append(open, begin())
	}
	var failed error // of the first file in the list that failed
	failedAt := len(files)
	var held *Episode // a.held as heldFrom's records left it
	heldFrom := -1
	for k := 0; len(open) > 0; k %= max(len(open), 1) {
		p := open[k]
		t := <-p.turns
		var err error
		for _, r := range t.records {
			if err = a.take(r, emit); err != nil {
				break
			}
			if a.held != held {
				held, heldFrom = a.held, p.index
			}
		}
		if err == nil && t.end {
			err = a.fileDone(t.err)
		}
		switch {
		case stopped != nil:
			return stopped
		case err != nil && p.index < failedAt:
			failed, failedAt, next = err, p.index, len(files)
			if a.held != nil && heldFrom >= failedAt {
				a.held = nil
			}
			var dropped []place
			open, dropped, k = placesBefore(open, k, failedAt)
			for _, d := range dropped {
				close(d.drop)
			}
		case t.end:
			open = slices.Delete(open, k, k+1)
			if next < len(files) {
				open = slices.Insert(open, k, begin())
				k++
			}
		case !t.cut:
			k++
		}
	}
	if failed != nil {
		if err := a.emitHeld(fn); err != nil {
			return err
		}
	}
	return failed
}

// placesBefore splits open into the places of the files before index i and
// the others. k, a position in open, moves to the first place kept at or
// after it.
func placesBefore(open []place, k, i int) (kept, dropped []place, nk int) {
	for j, p := range open {
		switch {
		case p.index >= i:
			dropped = append(dropped, p)
		case j < k:
			nk++
			fallthrough
		default:
			kept = append(kept, p)
		}
	}
	return kept, dropped, nk
}

// readTurns reads one record file into turns: a turn ends before a record
// of another episode than its steps', or once it holds
// interleaveTurnBytes of pixels (cut). The last turn carries the file's
// end. It stops at the next record once quit or drop is closed.
func readTurns(path string, opts ReadOptions, turns chan<- fileTurn, quit, drop <-chan struct{}) {
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
		case <-drop:
		}
		return false
	}
	err := readRecordFile(path, opts.subsetOf(path), opts, func(r fileRecord) error {
		select {
		case <-quit: // not a turn later: a turn may be an episode of a thousand records
			return errQuit
		case <-drop:
			return errQuit
		default:
		}
		isStep := r.skip == "" && r.warn == ""
		if isStep && hasSteps && (r.step.EpisodeID != episode || bytes >= interleaveTurnBytes) {
			t.cut = r.step.EpisodeID == episode
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
