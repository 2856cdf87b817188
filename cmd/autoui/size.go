package main

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeRange bounds a --size WIDTHxHEIGHT value in pixels.
type sizeRange struct{ minW, minH, maxW, maxH int }

var (
	// anySize is a real device's screen: any positive size.
	anySize = sizeRange{1, 1, 1 << 30, 1 << 30}
	// simSizes are the screens the simulator draws.
	simSizes = sizeRange{90, 160, 4096, 8192}
)

// parseSize reads "WIDTHxHEIGHT" within r; a bad value is a usage error.
func parseSize(s string, r sizeRange) (w, h int, err error) {
	ws, hs, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if ok && err1 == nil && err2 == nil && w >= r.minW && h >= r.minH && w <= r.maxW && h <= r.maxH {
		return w, h, nil
	}
	want := "in pixels"
	if r != anySize {
		want = fmt.Sprintf("from %dx%d to %dx%d", r.minW, r.minH, r.maxW, r.maxH)
	}
	return 0, 0, usageErrorf("--size %q: want WIDTHxHEIGHT %s, e.g. 1080x2400", s, want)
}
