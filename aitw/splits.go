package aitw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Splits maps a split name to its episode ids. Both AITW's standard split
// files ({"train", "validation", "test"}) and Auto-UI's
// ({"train", "val", "test"}) read into it; ids may be JSON strings or numbers.
type Splits map[string][]string

// ReadSplits reads a split JSON file.
func ReadSplits(path string) (Splits, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read splits: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // AITW ids are 19-20 digits: keep them exact
	var raw map[string][]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("read splits %s: want {\"train\": [ids], ...}: %w", path, err)
	}
	sp := Splits{}
	for name, ids := range raw {
		out := make([]string, len(ids))
		for i, id := range ids {
			switch v := id.(type) {
			case string:
				out[i] = v
			case json.Number:
				out[i] = v.String()
			default:
				return nil, fmt.Errorf("read splits %s: %s[%d] is %T, want an episode id", path, name, i, id)
			}
		}
		sp[name] = out
	}
	return sp, nil
}

var splitAliases = map[string][]string{
	"validation": {"validation", "val", "valid", "dev"},
	"val":        {"val", "validation", "valid", "dev"},
	"train":      {"train"},
	"test":       {"test"},
}

// IDs returns the set of episode ids of a split; "val" and "validation"
// name the same split in either file format.
func (sp Splits) IDs(name string) (map[string]bool, error) {
	cands := splitAliases[name]
	if cands == nil {
		cands = []string{name}
	}
	for _, c := range cands {
		if ids, ok := sp[c]; ok {
			set := make(map[string]bool, len(ids))
			for _, id := range ids {
				set[id] = true
			}
			return set, nil
		}
	}
	names := make([]string, 0, len(sp))
	for n := range sp {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no split %q (the file has %s)", name, strings.Join(names, ", "))
}

// Shard is a slice I of N of the episodes (0 <= I < N), chosen by a hash of
// the episode id so it does not depend on file order. The zero value (N=0)
// selects everything.
type Shard struct{ I, N int }

// ParseShard reads "I/N".
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("bad shard %q: want I/N with 0 <= I < N", s)
	}
	return Shard{I: i, N: n}, nil
}

// Has reports whether the episode belongs to this shard.
func (s Shard) Has(episodeID string) bool {
	if s.N <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(episodeID))
	return int(h.Sum64()%uint64(s.N)) == s.I
}

func (s Shard) String() string {
	if s.N == 0 {
		return "all"
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}
