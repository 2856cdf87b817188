package aitw

import (
	"strings"
	"testing"
)

// env is a fake environment: "K=V K=V".
func env(kv string) func(string) string {
	m := map[string]string{}
	for _, f := range strings.Fields(kv) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

const slurm3 = "SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=2 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=1 "

func TestResolveShard(t *testing.T) {
	for _, c := range []struct {
		spec   string
		shards int
		env    string
		want   Shard
	}{
		{"", 0, "SLURM_ARRAY_TASK_ID=1 " + slurm3, Shard{}},
		{"1/4", 0, "", Shard{1, 4}},
		{"1/4", 4, "", Shard{1, 4}},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=0 " + slurm3, Shard{0, 3}},
		{"auto", 3, "SLURM_ARRAY_TASK_ID=2 " + slurm3, Shard{2, 3}},
		// Arrays need not start at 0: --array=5-7.
		{"auto", 0, "SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=3", Shard{1, 3}},
		// Without COUNT (or STEP) the range gives the count.
		{"auto", 0, "SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_MAX=7", Shard{2, 3}},
		// --array=0-10:5 is tasks 0, 5, 10 (what Slurm 22.05 sets, seen on this machine).
		{"auto", 0, "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=10 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=5", Shard{1, 3}},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=10 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=10 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=5", Shard{2, 3}},
		// A one-task array is no sharding at all.
		{"auto", 0, "SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=4 SLURM_ARRAY_TASK_COUNT=1", Shard{0, 1}},
		{"auto", 8, "JOB_COMPLETION_INDEX=0", Shard{0, 8}},
		{"auto", 8, "JOB_COMPLETION_INDEX=7", Shard{7, 8}},
	} {
		got, err := ResolveShard(c.spec, c.shards, env(c.env))
		if err != nil || got != c.want {
			t.Errorf("ResolveShard(%q, %d, %s) = %v, %v; want %v", c.spec, c.shards, c.env, got, err, c.want)
		}
	}
}

func TestResolveShardErrors(t *testing.T) {
	for _, c := range []struct {
		spec   string
		shards int
		env    string
		want   string // in the error
	}{
		{"auto", 0, "", "no SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX in the environment"},
		{"auto", 3, "", "no SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX"},
		{"", 3, "", "--shards 3 needs --shard auto"},
		{"auto", -1, "JOB_COMPLETION_INDEX=0", "--shards -1"},
		{"1/4", 3, "", "--shard 1/4 has 4 shards but --shards is 3"},
		{"4/4", 0, "", "bad shard"},
		{"au", 0, "JOB_COMPLETION_INDEX=0", "bad shard"},
		{"auto", 4, "SLURM_ARRAY_TASK_ID=0 " + slurm3, "has 3 tasks but --shards is 4"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MAX=2", "SLURM_ARRAY_TASK_MIN is not"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX is not"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=x " + slurm3, `SLURM_ARRAY_TASK_ID="x" is not a task number`},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=-1 " + slurm3, "is not a task number"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=9223372036854775807", `SLURM_ARRAY_TASK_MAX="9223372036854775807" is not a task number`},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=3 " + slurm3, "SLURM_ARRAY_TASK_ID=3 is not in the array 0-2:1"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=10 SLURM_ARRAY_TASK_STEP=5", "not in the array 0-10:5"},
		{"auto", 0, "SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=2 SLURM_ARRAY_TASK_STEP=0", "not in the array"},
		// --array=1,3,7 (what Slurm 22.05 sets): no 0..N-1 numbering.
		{"auto", 0, "SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=1", "SLURM_ARRAY_TASK_COUNT=3 but the range 1-7:1 holds 7 tasks"},
		{"auto", 0, "JOB_COMPLETION_INDEX=0", "JOB_COMPLETION_INDEX is set but --shards is not"},
		{"auto", 4, "JOB_COMPLETION_INDEX=4", `JOB_COMPLETION_INDEX="4": want 0 <= index < --shards 4`},
		{"auto", 4, "JOB_COMPLETION_INDEX=a", "JOB_COMPLETION_INDEX"},
		{"auto", 3, "JOB_COMPLETION_INDEX=0 SLURM_ARRAY_TASK_ID=0 " + slurm3, "both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX"},
	} {
		got, err := ResolveShard(c.spec, c.shards, env(c.env))
		if err == nil {
			t.Errorf("ResolveShard(%q, %d, %s) = %v; want an error", c.spec, c.shards, c.env, got)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("ResolveShard(%q, %d, %s): error %q; want one line with %q", c.spec, c.shards, c.env, msg, c.want)
		}
	}
}
