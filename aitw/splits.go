package aitw

import (
	"bytes"
	"encoding/json"
	"errors"
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
	digits := func(v string) bool { return strings.Trim(v, "0123456789") == "" } // no sign: it would be saved without
	if !ok || err1 != nil || err2 != nil || !digits(a) || !digits(b) || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("bad shard %q: want I/N with 0 <= I < N", s)
	}
	return Shard{I: i, N: n}, nil
}

// ResolveShard turns the --shard and --shards flags into a Shard. spec is ""
// (no sharding), "I/N", or "auto": the shard comes from the environment of a
// Slurm array task (SLURM_ARRAY_TASK_*) or a Kubernetes Indexed Job pod
// (JOB_COMPLETION_INDEX). shards is --shards (0: not given); a Kubernetes pod
// does not see its Job's completion count, so there it is required, and
// elsewhere it must agree with N when given.
func ResolveShard(spec string, shards int, getenv func(string) string) (Shard, error) {
	if shards < 0 {
		return Shard{}, fmt.Errorf("--shards %d: must be >= 1", shards)
	}
	var sh Shard
	var err error
	switch spec {
	case "":
		if shards > 0 {
			return Shard{}, fmt.Errorf("--shards %d needs --shard auto (or --shard I/%d)", shards, shards)
		}
		return Shard{}, nil
	case "auto":
		sh, err = shardFromEnv(shards, getenv)
	default:
		sh, err = ParseShard(spec)
		if err == nil && shards > 0 && shards != sh.N {
			err = fmt.Errorf("--shard %s has %d shards but --shards is %d", spec, sh.N, shards)
		}
	}
	if err != nil {
		return Shard{}, err
	}
	return sh, nil
}

func shardFromEnv(shards int, getenv func(string) string) (Shard, error) {
	slurm, k8s := getenv("SLURM_ARRAY_TASK_ID"), getenv("JOB_COMPLETION_INDEX")
	switch {
	case slurm != "" && k8s != "":
		return Shard{}, errors.New("--shard auto: both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX are set; pass --shard I/N")
	case slurm != "":
		return slurmShard(shards, getenv)
	case k8s != "":
		return indexedJobShard(k8s, shards)
	}
	return Shard{}, errors.New("--shard auto: no SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX in the environment")
}

// maxSlurmTask bounds Slurm's task numbers (its MaxArraySize is at most
// 4000001).
const maxSlurmTask = 1 << 31

// slurmShard numbers the tasks of an array MIN-MAX[:STEP] from 0. Arrays
// that are lists (--array=1,3,7) have no such numbering and are rejected.
func slurmShard(shards int, getenv func(string) string) (Shard, error) {
	num := func(name string, def int) (int, error) {
		v := getenv(name)
		if v == "" {
			if def >= 0 {
				return def, nil
			}
			return 0, fmt.Errorf("--shard auto: SLURM_ARRAY_TASK_ID is set but %s is not", name)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxSlurmTask { // bounded: their differences do not overflow
			return 0, fmt.Errorf("--shard auto: %s=%q is not a task number (0 to %d)", name, v, maxSlurmTask)
		}
		return n, nil
	}
	id, err := num("SLURM_ARRAY_TASK_ID", -1)
	if err != nil {
		return Shard{}, err
	}
	lo, err := num("SLURM_ARRAY_TASK_MIN", -1)
	if err != nil {
		return Shard{}, err
	}
	hi, err := num("SLURM_ARRAY_TASK_MAX", -1)
	if err != nil {
		return Shard{}, err
	}
	step, err := num("SLURM_ARRAY_TASK_STEP", 1) // absent before Slurm 17.11
	if err != nil {
		return Shard{}, err
	}
	if step < 1 || lo > hi || id < lo || id > hi || (id-lo)%step != 0 {
		return Shard{}, fmt.Errorf("--shard auto: SLURM_ARRAY_TASK_ID=%d is not in the array %d-%d:%d", id, lo, hi, step)
	}
	n := (hi-lo)/step + 1
	count, err := num("SLURM_ARRAY_TASK_COUNT", n)
	if err != nil {
		return Shard{}, err
	}
	if count != n {
		return Shard{}, fmt.Errorf("--shard auto: SLURM_ARRAY_TASK_COUNT=%d but the range %d-%d:%d holds %d tasks (a list like --array=1,3,7?): use --array=MIN-MAX[:STEP] or --shard I/N", count, lo, hi, step, n)
	}
	if shards > 0 && shards != n {
		return Shard{}, fmt.Errorf("--shard auto: the Slurm array %d-%d:%d has %d tasks but --shards is %d", lo, hi, step, n, shards)
	}
	return Shard{I: (id - lo) / step, N: n}, nil
}

// indexedJobShard reads a Kubernetes Indexed Job's 0-based completion index;
// the completion count comes from --shards.
func indexedJobShard(index string, shards int) (Shard, error) {
	if shards == 0 {
		return Shard{}, errors.New("--shard auto: JOB_COMPLETION_INDEX is set but --shards is not (pass the Job's completions as --shards N)")
	}
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= shards {
		return Shard{}, fmt.Errorf("--shard auto: JOB_COMPLETION_INDEX=%q: want 0 <= index < --shards %d", index, shards)
	}
	return Shard{I: i, N: shards}, nil
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
