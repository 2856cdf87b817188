package main

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		r    sizeRange
		w, h int
		err  string
	}{
		{" 1080X2400 ", anySize, 1080, 2400, ""},
		{"1x1", anySize, 1, 1, ""},
		{"0x10", anySize, 0, 0, "in pixels"},
		{"wide", anySize, 0, 0, "in pixels"},
		{"90x160", simSizes, 90, 160, ""},
		{"1x1", simSizes, 0, 0, "from 90x160 to 4096x8192"},
		{"4097x200", simSizes, 0, 0, "from 90x160 to 4096x8192"},
	} {
		w, h, err := parseSize(c.in, c.r)
		if c.err == "" && (err != nil || w != c.w || h != c.h) {
			t.Errorf("parseSize(%q) = %d, %d, %v; want %dx%d", c.in, w, h, err, c.w, c.h)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || exitCode(err) != 2) {
			t.Errorf("parseSize(%q) error %v: want a usage error with %q", c.in, err, c.err)
		}
	}
}
