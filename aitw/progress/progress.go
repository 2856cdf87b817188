package runner

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress prints steps/s and, when the number of episodes is known, a bar
// and an ETA. On a terminal it redraws one line at most 5 times a second;
// otherwise it prints a plain line every ProgressEvery (default 30 s).
type progress struct {
	w        io.Writer
	tty      bool
	every    time.Duration
	total    int // episodes, 0 if unknown
	start    time.Time
	last     time.Time
	episodes int // finished: every step predicted or already done
}

func newProgress(opts Options, total int) *progress {
	every := opts.ProgressEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	if opts.TTY {
		every = 200 * time.Millisecond
	}
	now := time.Now()
	return &progress{w: opts.Progress, tty: opts.TTY, every: every, total: total, start: now, last: now}
}

func (p *progress) step(sum *Summary) { p.maybe(sum, false) }

// episodeDone counts an episode whose steps are all written; with batches
// that can be well after it was read.
func (p *progress) episodeDone(sum *Summary) {
	p.episodes++
	p.maybe(sum, false)
}

func (p *progress) maybe(sum *Summary, force bool) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if !force && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	p.print(sum, now)
}

func (p *progress) print(sum *Summary, now time.Time) {
	el := now.Sub(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(sum.Predicted) / el
	}
	var b strings.Builder
	if p.total > 0 {
		frac := float64(p.episodes) / float64(p.total)
		if frac > 1 {
			frac = 1
		}
		if p.tty {
			const width = 24
			n := int(frac * width)
			b.WriteString("[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "] ")
		}
		fmt.Fprintf(&b, "%d/%d episodes, ", p.episodes, p.total)
	} else {
		fmt.Fprintf(&b, "%d episodes, ", p.episodes)
	}
	fmt.Fprintf(&b, "%d steps predicted (%d already done), %.2f steps/s", sum.Predicted, sum.AlreadyDone, rate)
	if p.total > 0 && p.episodes > 0 && p.episodes < p.total && el > 0 {
		eta := time.Duration(el / float64(p.episodes) * float64(p.total-p.episodes) * float64(time.Second))
		fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", b.String())
	} else {
		fmt.Fprintln(p.w, b.String())
	}
}

func (p *progress) finish(sum *Summary) {
	if p.w == nil {
		return
	}
	p.print(sum, time.Now())
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
