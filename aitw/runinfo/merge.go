package runinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/autoui/autoui/aitw"
)

// PredictionsFile is the predictions file's name in an output directory.
const PredictionsFile = "predictions.jsonl"

// Source is one predictions file and its provenance (nil without run.json).
type Source struct {
	Path string
	Info *Info
}

// Predictions are one or several predictions files read as one.
type Predictions struct {
	Sources []Source
	ByStep  map[aitw.StepKey]aitw.Prediction
	// Notes are things the user should know: torn last lines, repeats.
	Notes []string
}

// ReadPredictions reads predictions files or `eval run --out` directories
// (DIR/predictions.jsonl, with DIR/run.json). Several are shards of one
// evaluation: their run.json must agree on everything but the shard, and no
// step may be in two of them.
func ReadPredictions(paths []string) (*Predictions, error) {
	if len(paths) == 0 {
		return nil, errors.New("no predictions given")
	}
	out := &Predictions{ByStep: map[aitw.StepKey]aitw.Prediction{}}
	from := map[aitw.StepKey]string{}
	for _, p := range paths {
		src, err := openSource(p)
		if err != nil {
			return nil, err
		}
		if len(out.Sources) > 0 {
			if err := agree(out.Sources[0], src); err != nil {
				return nil, err
			}
		}
		out.Sources = append(out.Sources, src)
		ps, err := aitw.ReadPredictions(src.Path)
		if err != nil {
			return nil, err
		}
		if src.Info != nil && !src.Info.Complete {
			out.Notes = append(out.Notes, src.Path+": its eval run has not finished (still running, interrupted or cut by --limit): the steps it has not predicted count as missing")
		}
		if ps.TornTail {
			out.Notes = append(out.Notes, "ignored a torn last line in "+src.Path)
		}
		if ps.Duplicates > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("%s: %d predictions repeat a step; the last one counts", src.Path, ps.Duplicates))
		}
		for k, v := range ps.ByStep {
			if other, dup := from[k]; dup {
				return nil, fmt.Errorf("episode %s step %d is predicted in both %s and %s: overlapping shards, or one run given twice", k.EpisodeID, k.StepID, other, src.Path)
			}
			from[k] = src.Path
			out.ByStep[k] = v
		}
	}
	switch miss := missingShards(out.Sources); len(miss) {
	case 0:
	case 1:
		out.Notes = append(out.Notes, "not given: shard "+miss[0]+" of this evaluation; the steps in it count as missing")
	default:
		out.Notes = append(out.Notes, "not given: shards "+strings.Join(miss, ", ")+" of this evaluation; the steps in them count as missing")
	}
	return out, nil
}

// missingShards names the shards of a sharded evaluation that sources lack
// (the first few).
func missingShards(sources []Source) []string {
	have, n := map[int]bool{}, 0
	for _, src := range sources {
		if src.Info == nil {
			continue
		}
		if sh, err := aitw.ParseShard(src.Info.Data.Shard); err == nil && sh.N > 1 {
			have[sh.I], n = true, sh.N
		}
	}
	var miss []string
	for i := 0; i < n && len(miss) < 5; i++ {
		if !have[i] {
			miss = append(miss, fmt.Sprintf("%d/%d", i, n))
		}
	}
	if k := n - len(have) - len(miss); k > 0 {
		miss = append(miss, fmt.Sprintf("and %d more", k))
	}
	return miss
}

// openSource resolves a file or directory and reads its run.json: a
// directory's, or the one beside a file named predictions.jsonl.
func openSource(p string) (Source, error) {
	st, err := os.Stat(p)
	if err != nil {
		return Source{}, fmt.Errorf("predictions: %w", err)
	}
	src := Source{Path: p}
	dir := ""
	if st.IsDir() {
		dir, src.Path = p, filepath.Join(p, PredictionsFile)
		if _, err := os.Stat(src.Path); errors.Is(err, fs.ErrNotExist) {
			return Source{}, fmt.Errorf("predictions: %s has no %s (not an eval run --out directory?)", p, PredictionsFile)
		}
	} else if filepath.Base(p) == PredictionsFile {
		dir = filepath.Dir(p)
	}
	if dir != "" {
		if src.Info, err = Read(dir); err != nil {
			return Source{}, err
		}
	}
	return src, nil
}

// agree checks that b may be merged with a: both with provenance that
// matches but for the shard, or both without.
func agree(a, b Source) error {
	switch {
	case a.Info == nil && b.Info == nil:
		return nil
	case a.Info == nil || b.Info == nil:
		with, without := a, b
		if a.Info == nil {
			with, without = b, a
		}
		return fmt.Errorf("cannot merge %s (with run.json) and %s (without): their provenance cannot be compared", with.Path, without.Path)
	}
	if d := Diff(a.Info, b.Info, false); len(d) > 0 {
		return fmt.Errorf("cannot merge %s and %s: made differently (%s)", a.Path, b.Path, strings.Join(d, "; "))
	}
	return nil
}
