package aitw_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/aitwtest"
)

// BenchmarkStreamEpisodes reads 48 full-size AITW steps (aitwtest's: ~2.7
// MB a record) in 4 files, one file after another and 2 or 4 at once
// (Interleave): inflating a gzip stream is one core's work, so steps/s
// should grow with the files read at once up to the cores.
//
//	go test ./aitw -run '^$' -bench StreamEpisodes -benchtime 4x
func BenchmarkStreamEpisodes(b *testing.B) {
	const files, episodes, perEpisode = 4, 2, 6
	var paths []string
	for f := range files {
		paths = append(paths, filepath.Join(b.TempDir(), fmt.Sprintf("general-%d.tfrecord.gz", f)))
		if _, err := aitwtest.WriteFullSize(paths[f], f*episodes, episodes, perEpisode); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("files%d", n), func(b *testing.B) {
			for range b.N {
				st, err := aitw.StreamEpisodes(paths, aitw.ReadOptions{KeepPixels: true, Interleave: n}, func(aitw.Episode) error { return nil })
				if err != nil || st.Records != files*episodes*perEpisode {
					b.Fatal(st, err)
				}
			}
			b.ReportMetric(float64(b.N*files*episodes*perEpisode)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
