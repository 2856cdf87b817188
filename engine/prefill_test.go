package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/predict"
)

// groupsCost is what lengthGroups minimizes.
func groupsCost(lens []int, groups [][]int, whole, callCost int) int {
	c := 0
	for _, g := range groups {
		longest := 0
		for _, r := range g {
			longest = max(longest, lens[r])
		}
		if len(groups) == 1 {
			longest = max(longest, whole)
		}
		c += len(g)*longest + callCost
	}
	return c
}

// bestCost tries every split of the rows sorted by length into at most
// maxGroups runs.
func bestCost(lens []int, whole, callCost, maxGroups int) int {
	sorted := slices.Sorted(slices.Values(lens))
	var try func(from, groups int) int
	try = func(from, groups int) int {
		if from == len(sorted) {
			return 0
		}
		best := -1
		for to := from + 1; to <= len(sorted); to++ {
			if to < len(sorted) && groups == maxGroups {
				continue
			}
			n := sorted[to-1]
			if from == 0 && to == len(sorted) {
				n = max(n, whole) // a lone group
			}
			c := (to-from)*n + callCost
			if to < len(sorted) {
				c += try(to, groups+1)
			}
			if best < 0 || c < best {
				best = c
			}
		}
		return best
	}
	return try(0, 1)
}

// lengthGroups covers every row once, in at most maxGroups groups of rows
// sorted by length, at the least cost; one group keeps request order.
func TestLengthGroups(t *testing.T) {
	for _, c := range []struct {
		lens                       []int
		whole, callCost, maxGroups int
		want                       [][]int
	}{
		{[]int{5}, 5, 0, 4, [][]int{{0}}},
		{[]int{474, 32, 286}, 474, 1 << 30, 4, [][]int{{0, 1, 2}}},      // calls dear: one group, request order
		{[]int{474, 32, 286}, 474, 0, 1, [][]int{{0, 1, 2}}},            // one group asked for
		{[]int{474, 32, 286, 32}, 474, 0, 4, [][]int{{1, 3}, {2}, {0}}}, // ties stay in request order
		{[]int{474, 32, 286, 32}, 474, 0, 2, [][]int{{1, 3}, {2, 0}}},
		{[]int{40, 41, 42, 43}, 43, 24, 4, [][]int{{0, 1, 2, 3}}},   // near lengths: not worth a call
		{[]int{40, 41, 42, 43}, 64, 24, 4, [][]int{{0, 1}, {2, 3}}}, // unless one group is padded to a bucket
		{[]int{32, 474, 32, 474, 32, 474}, 474, 900, 4, [][]int{{0, 2, 4}, {1, 3, 5}}},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8}, 8, 0, 4, [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
	} {
		if got := lengthGroups(c.lens, c.whole, c.callCost, c.maxGroups); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("lengthGroups(%v, %d, %d, %d) = %v, want %v", c.lens, c.whole, c.callCost, c.maxGroups, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		lens := make([]int, 1+rng.IntN(9))
		for i := range lens {
			lens[i] = 1 + rng.IntN(512)
		}
		callCost := []int{0, 22, 900}[rng.IntN(3)]
		maxGroups := 1 + rng.IntN(kv.MergeParts)
		whole := slices.Max(lens) + []int{0, 0, 30}[rng.IntN(3)]
		groups := lengthGroups(lens, whole, callCost, maxGroups)
		var seen []int
		for _, g := range groups {
			if len(g) == 0 || (len(groups) > 1 && !slices.IsSortedFunc(g, func(a, b int) int { return lens[a] - lens[b] })) {
				t.Fatalf("lengthGroups(%v, %d) = %v: a group empty or unsorted", lens, callCost, groups)
			}
			seen = append(seen, g...)
		}
		slices.Sort(seen)
		if len(groups) > maxGroups || !slices.Equal(seen, rangeInts(len(lens))) {
			t.Fatalf("lengthGroups(%v, %d) = %v: not a split of the rows", lens, callCost, groups)
		}
		if got, want := groupsCost(lens, groups, whole, callCost), bestCost(lens, whole, callCost, maxGroups); got != want {
			t.Fatalf("lengthGroups(%v, %d) = %v costs %d, the best split %d", lens, callCost, groups, got, want)
		}
	}
}

func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Prompts encoded in groups give the golden ids and the single-request
// results on every cache placement, with as many groups as can be and with
// one, and the merged fused states equal one group's on every prompt
// position.
func TestPrefillGroups(t *testing.T) {
	cases := loadGolden(t)
	for _, place := range []placement{placeHost, placeDevice, placeStatic} {
		p := placed(t, place, Options{})
		if place == placeStatic {
			p.promptBucket = capturePromptBucket // groups merged to a longer length
		}
		for _, cost := range []int{0, 1 << 30} {
			p.groupCost = cost
			label := fmt.Sprintf("placement %d, group cost %d", place, cost)
			res := goldenBatches(t, p, cases, 8, label)
			grouped := 0
			for lo := 0; lo < len(res); lo += 8 {
				batch := res[lo:min(lo+8, len(res))]
				var lens []int
				for _, r := range batch {
					lens = append(lens, r.SourceTokens)
				}
				whole := slices.Max(lens)
				if b := p.promptBucket; b > 0 {
					whole = min((whole+b-1)/b*b, p.bundle.Manifest.Prompt.MaxSourceTokens)
				}
				groups := lengthGroups(lens, whole, cost, kv.MergeParts)
				if len(groups) > 1 {
					grouped++
				}
				for _, g := range groups { // the calls' shapes, for bench's bounds
					for _, i := range g {
						tm := batch[i].Timings
						if tm.EncoderRows != len(g) || tm.EncoderLength < lens[g[len(g)-1]] || tm.EncoderLength < lens[i] ||
							(len(groups) > 1 && tm.EncoderLength != lens[g[len(g)-1]]) {
							t.Errorf("%s, item %d: encoded %d rows of %d tokens, its group %v of lengths %v",
								label, lo+i, tm.EncoderRows, tm.EncoderLength, g, lens)
						}
					}
				}
			}
			if (cost == 0) != (grouped > 0) {
				t.Errorf("%s: %d batches encoded in groups", label, grouped)
			}
		}
	}

	// the states themselves, host and device placements
	var reqs []predict.Request
	for _, c := range cases[:8] {
		reqs = append(reqs, c.featureRequest(t))
	}
	for _, place := range []placement{placeHost, placeDevice} {
		p := placed(t, place, Options{})
		states := map[int][]float32{}
		var mask []int64
		for _, cost := range []int{0, 1 << 30} {
			p.groupCost = cost
			res := make([]*predict.Result, len(reqs))
			for i, r := range reqs {
				res[i] = &predict.Result{Features: r.Features}
			}
			noErr := func(err error) error { return err }
			text, err := p.prefillText(context.Background(), reqs, res, func(_ int, err error) error { return err }, noErr)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[int]int{0: 4, 1 << 30: 1}[cost]; len(text.groups) != want {
				t.Fatalf("group cost %d: %d groups, want %d", cost, len(text.groups), want)
			}
			fused, err := p.fuse(text, res)
			text.release()
			if err != nil {
				t.Fatal(err)
			}
			states[cost], mask = hostStates(t, fused), text.mask
			fused.release()
		}
		d := p.cfg.DModel
		worst := 0.0
		for i, m := range mask {
			if m == 1 { // padding differs: masked, it never reaches an output
				worst = max(worst, maxAbsDiff(t, "fused", states[0][i*d:(i+1)*d], states[1<<30][i*d:(i+1)*d]))
			}
		}
		if worst > tolerance(t, "fused_hidden_states") {
			t.Errorf("placement %d: merged fused states differ from one group's by %g", place, worst)
		}
		t.Logf("placement %d: merged fused states within %g of one group's", place, worst)
	}
}

// hostStates reads e's values, wherever they are (ORT's CPU memory stands
// in for the device on the cpu provider).
func hostStates(t *testing.T, e encoded) []float32 {
	t.Helper()
	if e.dev == nil {
		return e.host
	}
	raw, err := e.dev.HostData()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(raw)/4))
}
