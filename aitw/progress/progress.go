// Package progress reports a long job's progress (`eval run`, `dataset`): on
// a terminal one line redrawn at most 5 times a second, with a bar and an
// ETA when the total is known; otherwise a plain line every Every (default
// 30 s).
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Options say where and how progress is shown.
type Options struct {
	W     io.Writer // nil: nothing is shown
	TTY   bool      // W is a terminal: redraw one line
	Every time.Duration
}

// Bar counts finished units (episodes) out of a total; Detail adds the
// caller's figures (steps, rate) to each line. Safe for concurrent use.
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	every  time.Duration
	total  int // units, 0 if unknown
	unit   string
	detail func(elapsed time.Duration) string
	start  time.Time
	last   time.Time
	done   int
	drawn  bool // a redrawn line is on the terminal
}

// New starts a bar over total units (0: unknown, no bar or ETA). detail may
// be nil.
func New(o Options, total int, unit string, detail func(elapsed time.Duration) string) *Bar {
	every := o.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	if o.TTY {
		every = 200 * time.Millisecond
	}
	now := time.Now()
	return &Bar{w: o.W, tty: o.TTY, every: every, total: total, unit: unit, detail: detail, start: now, last: now}
}

// Tick shows the line if it is due (the detail changed).
func (b *Bar) Tick() { b.Add(0) }

// Add counts n more finished units and shows the line if it is due.
func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if b.w == nil {
		return
	}
	if now := time.Now(); now.Sub(b.last) >= b.every {
		b.last = now
		b.print(now)
	}
}

// Println prints one line on its own (a warning, a note), above the bar on
// a terminal.
func (b *Bar) Println(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return
	}
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
	fmt.Fprintln(b.w, msg)
}

// Finish shows the final line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return
	}
	b.print(time.Now())
	if b.tty {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}

func (b *Bar) print(now time.Time) {
	el := now.Sub(b.start)
	var s strings.Builder
	if b.total > 0 {
		frac := min(float64(b.done)/float64(b.total), 1)
		if b.tty {
			const width = 24
			n := int(frac * width)
			s.WriteString("[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "] ")
		}
		fmt.Fprintf(&s, "%d/%d %s", b.done, b.total, b.unit)
	} else {
		fmt.Fprintf(&s, "%d %s", b.done, b.unit)
	}
	if b.detail != nil {
		s.WriteString(", " + b.detail(el))
	}
	if b.total > 0 && b.done > 0 && b.done < b.total && el > 0 {
		eta := time.Duration(float64(el) / float64(b.done) * float64(b.total-b.done))
		fmt.Fprintf(&s, ", ETA %s", eta.Round(time.Second))
	}
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", s.String())
		b.drawn = true
	} else {
		fmt.Fprintln(b.w, s.String())
	}
}

// Rate is n per second over el, 0 before any time has passed.
func Rate(n int, el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return float64(n) / el.Seconds()
}
