package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/predict"
)

// A batch's prompts are encoded and fused in groups of similar length, each
// right-padded to its own longest, and the groups' fused states merged into
// the batch's [B, n, d], zero-padded to the batch's longest n, in request
// order (kv.Ops.Merge), for the decoder. A batch of prompts of 32, 286 and
// 474 tokens would otherwise encode every one at 474. A group costs its rows
// times its longest prompt, in tokens, plus a fixed cost per group for the
// calls themselves (groupCost).
const (
	// groupCostCPU: the T5-base encoder on the 2-vCPU VM took 23.7 ms for
	// 32 tokens and 216 ms for 474, 0.435 ms per token over a fixed 9.8 ms
	// (reading its weights once per call): 22 tokens' worth.
	groupCostCPU = 22
	// groupCostCUDA: on the H200, the base encoder and fusion took 4.4 ms
	// at batch 1 whatever the prompt (the host launching kernels) and
	// 149 ms for 64 prompts of 474 tokens, 4.9 µs per token.
	groupCostCUDA = 900
)

// textGroup is some of a batch's prompts, encoded together.
type textGroup struct {
	rows []int   // request indexes, in the group's row order
	n    int     // the group's length: its prompts right-padded to it
	mask []int64 // [len(rows), n]
	enc  encoded // [len(rows), n, d]
}

// prefilled is a batch's encoded text.
type prefilled struct {
	n      int     // the batch's length: its longest prompt (or promptBucket's)
	mask   []int64 // [B, n], in request order
	groups []textGroup
}

func (t prefilled) release() {
	for _, g := range t.groups {
		g.enc.release()
	}
}

// lengthGroups splits rows of prompts of the given lengths into at most
// maxGroups (<= kv.MergeParts) groups, at the least cost: a group costs its
// rows times its longest prompt plus callCost, except that a lone group is
// padded to whole (>= the longest: the bucketed length under CUDA graphs).
// One group keeps the request order; more are runs of the rows sorted by
// length (ties in request order).
func lengthGroups(lens []int, whole, callCost, maxGroups int) [][]int {
	B := len(lens)
	order := make([]int, B)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lens[a], lens[b]) })
	// best[k][j]: the least cost of the j shortest rows in k+1 groups;
	// cut[k][j]: where the last of those groups starts
	groups := max(1, min(B, maxGroups, kv.MergeParts))
	best := make([][]int, groups)
	cut := make([][]int, groups)
	for k := range best {
		best[k], cut[k] = make([]int, B+1), make([]int, B+1)
		for j := 1; j <= B; j++ {
			best[k][j] = -1
			if k == 0 {
				n := lens[order[j-1]]
				if j == B {
					n = max(n, whole)
				}
				best[k][j] = j*n + callCost
				continue
			}
			for i := k; i < j; i++ { // the last group is order[i:j]
				if prev := best[k-1][i]; prev >= 0 {
					if c := prev + (j-i)*lens[order[j-1]] + callCost; best[k][j] < 0 || c < best[k][j] {
						best[k][j], cut[k][j] = c, i
					}
				}
			}
		}
	}
	k := 0
	for g := 1; g < groups; g++ {
		if best[g][B] >= 0 && best[g][B] < best[k][B] {
			k = g
		}
	}
	if k == 0 {
		return [][]int{slices.Sorted(slices.Values(order))}
	}
	out := make([][]int, k+1)
	for j := B; k >= 0; k-- {
		i := cut[k][j]
		out[k] = order[i:j]
		j = i
	}
	return out
}

// prefillText builds and tokenizes the prompts and runs the encoder on them
// in groups of similar length (lengthGroups); its errors are wrapped as
// PredictBatch returns them. A lone group is padded to the batch's length.
func (p *Predictor) prefillText(ctx context.Context, reqs []predict.Request, res []*predict.Result,
	itemErr func(int, error) error, batchErr func(error) error) (prefilled, error) {
	B := len(reqs)
	prompts := make([][]int64, B)
	lens := make([]int, B)
	n := 0
	for i, r := range reqs {
		t := time.Now()
		var err error
		res[i].SourceText, prompts[i], err = buildPrompt(p.tok, p.bundle.Manifest.Tokens.EOSID, r.Goal, r.History,
			p.window, p.bundle.Manifest.Prompt.MaxSourceTokens, p.scrollMap, p.opts.Truncation)
		if err != nil {
			return prefilled{}, itemErr(i, err)
		}
		res[i].SourceIDs, res[i].SourceTokens = prompts[i], len(prompts[i])
		res[i].Timings.Tokenize = time.Since(t)
		lens[i] = len(prompts[i])
		n = max(n, lens[i])
	}
	if b := p.promptBucket; b > 0 && p.fixedRows(B) {
		// captured CUDA graphs are per shape: a few prompt lengths, not each
		n = max(n, min((n+b-1)/b*b, p.bundle.Manifest.Prompt.MaxSourceTokens))
	}
	pad := p.bundle.Manifest.Tokens.PadID
	text := prefilled{n: n}
	rowGroups := lengthGroups(lens, n, p.groupCost, p.promptGroups)
	if len(rowGroups) > 1 { // a lone group's mask is the batch's
		text.mask = promptMask(prompts, n)
	}
	for _, rows := range rowGroups {
		if err := ctx.Err(); err != nil {
			text.release()
			return prefilled{}, err
		}
		g := textGroup{rows: rows, n: n}
		if len(rowGroups) > 1 {
			g.n = lens[rows[len(rows)-1]] // the longest: rows are sorted
		}
		ps := make([][]int64, len(rows))
		for j, r := range rows {
			ps[j] = prompts[r]
		}
		var ids []int64
		ids, g.mask = padPrompts(ps, g.n, pad)
		if len(rowGroups) == 1 {
			text.mask = g.mask
		}
		t := time.Now()
		var err error
		if g.enc, err = p.runEncoder(len(rows), g.n, ids, g.mask); err != nil {
			text.release()
			return prefilled{}, batchErr(err)
		}
		text.groups = append(text.groups, g)
		dt := time.Since(t)
		for _, r := range rows {
			tm := &res[r].Timings
			tm.Encoder, tm.EncoderRows, tm.EncoderLength = dt, len(rows), g.n
		}
	}
	if p.prefillHook != nil {
		p.prefillHook()
	}
	return text, nil
}

// padPrompts lays prompts out as rows of n tokens, each prompt's ids then
// pad, and returns them with their mask (promptMask).
func padPrompts(prompts [][]int64, n int, pad int64) (ids, mask []int64) {
	ids = make([]int64, len(prompts)*n)
	for i, pr := range prompts {
		row := ids[i*n : (i+1)*n]
		copy(row, pr)
		for j := len(pr); j < n; j++ {
			row[j] = pad
		}
	}
	return ids, promptMask(prompts, n)
}

// promptMask is the mask of prompts laid out as rows of n tokens: 1 on each
// prompt's ids, 0 on padding. The encoder, fusion and the decoder's
// cross-attention all read it, so padded positions never reach an output.
func promptMask(prompts [][]int64, n int) []int64 {
	mask := make([]int64, len(prompts)*n)
	for i, pr := range prompts {
		for j := range pr {
			mask[i*n+j] = 1
		}
	}
	return mask
}

// fuse runs the fusion graph on each group of text with its rows' image
// features (res[i].Features), releasing the group's encoder states, and
// returns the batch's fused states [B, n,
// d]: a lone group's as they are, else the groups' merged (kv.Ops.Merge),
// where the states are.
func (p *Predictor) fuse(text prefilled, res []*predict.Result) (encoded, error) {
	parts := make([]encoded, 0, len(text.groups))
	defer func() {
		for _, f := range parts {
			f.release()
		}
	}()
	for i := range text.groups {
		g := &text.groups[i]
		feats := make([]float32, 0, len(g.rows)*p.cfg.ImageDim)
		for _, r := range g.rows {
			feats = append(feats, res[r].Features...)
		}
		t := time.Now()
		f, err := p.runFusion(len(g.rows), g.n, g.enc, feats, g.mask)
		if err != nil {
			return encoded{}, err
		}
		g.enc.release() // not needed past here (device memory, under cuda)
		g.enc = encoded{}
		parts = append(parts, f)
		dt := time.Since(t)
		for _, r := range g.rows {
			res[r].Timings.Fusion = dt
		}
	}
	if len(parts) == 1 {
		f := parts[0]
		parts = nil
		return f, nil
	}
	// The merge (copies on the device, microseconds) is in no stage's
	// time: each item's Encoder and Fusion stay its group's calls.
	return p.merge(len(res), text, parts)
}

// merge puts the groups' fused states parts back together as one batch's,
// in request order, zero-padded to text.n.
func (p *Predictor) merge(B int, text prefilled, parts []encoded) (encoded, error) {
	d := p.cfg.DModel
	vals := make([]ort.Value, len(parts))
	rows := make([]int64, B) // request i is row rows[i] of the groups' rows in turn
	at := int64(0)
	for gi, g := range text.groups {
		v, done, err := parts[gi].value(len(g.rows), g.n, d)
		if err != nil {
			return encoded{}, fmt.Errorf("merge fused states: %w", err)
		}
		defer done()
		vals[gi] = v
		for _, r := range g.rows {
			rows[r] = at
			at++
		}
	}
	if parts[0].dev != nil {
		dev, err := p.kvOps.Merge(vals, rows, text.n, p.deviceMem)
		if err != nil {
			return encoded{}, fmt.Errorf("merge fused states: %w", err)
		}
		return encoded{dev: dev}, nil
	}
	host := make([]float32, B*text.n*d)
	out, err := ort.NewTensor(ort.NewShape(int64(B), int64(text.n), int64(d)), host)
	if err != nil {
		return encoded{}, fmt.Errorf("merge fused states: %w", err)
	}
	defer out.Destroy()
	if err := p.kvOps.MergeInto(vals, rows, text.n, out); err != nil {
		return encoded{}, fmt.Errorf("merge fused states: %w", err)
	}
	return encoded{host: host}, nil
}
