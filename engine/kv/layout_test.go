package kv

import (
	"slices"
	"testing"
)

// A fake decoder on the layout's Go memory, no ONNX Runtime: each call
// reads the past where a view would wrap it, writes past ++ k new positions
// whose values name the call and position into the other buffer, and the
// layout's bookkeeping (calls, truncation, also to nothing, finished rows
// dropped) must leave exactly the positions the script says.
func TestSelfLayoutBookkeeping(t *testing.T) {
	const B, layers, heads, dkv, maxLen = 3, 2, 2, 3, 12
	s := newSelfLayout(B, layers, heads, dkv, maxLen)
	want := make([][]float32, B*heads) // per (batch row, head): each position's first value
	calls := 0
	script := []struct {
		k, keep int
		rows    []int // rows kept after the call (nil: all)
	}{{1, -1, nil}, {4, 3, nil}, {1, -1, []int{0, 2}}, {5, 2, nil}, {2, 0, nil}, {3, -1, []int{1}}, {1, -1, nil}}
	for i, st := range script {
		k := int64(st.k)
		if err := s.fits(k); err != nil {
			t.Fatal(err)
		}
		calls++
		n, T := s.n, s.n+k
		for j := 0; j < 2*layers; j++ {
			past, pres := s.region(s.cur, j, n), s.region(1-s.cur, j, T)
			if n > 0 && &past[0] == &pres[0] {
				t.Fatal("past and present share a buffer")
			}
			for row := int64(0); row < s.b*s.heads; row++ {
				for pos := int64(0); pos < T; pos++ {
					for d := int64(0); d < dkv; d++ {
						v := marker(calls, int(pos)) + float32(row)/100
						if pos < n {
							v = past[(row*n+pos)*dkv+d]
						}
						pres[(row*T+pos)*dkv+d] = v
					}
				}
			}
		}
		s.advance(k)
		for row := range want {
			for j := 0; j < st.k; j++ {
				want[row] = append(want[row], marker(calls, len(want[row]))+float32(row)/100)
			}
			if st.keep >= 0 {
				want[row] = want[row][:st.keep]
			}
		}
		if st.keep >= 0 {
			s.Truncate(st.keep)
		}
		if st.rows != nil {
			s.keepRows(st.rows)
			var kept [][]float32
			for _, r := range st.rows {
				kept = append(kept, want[r*heads:(r+1)*heads]...)
			}
			want = kept
		}
		if s.Len() != len(want[0]) || int(s.b)*heads != len(want) {
			t.Fatalf("call %d: %d positions x %d rows, want %d x %d", i, s.Len(), s.b, len(want[0]), len(want)/heads)
		}
		n = int64(s.Len())
		for j := 0; j < 2*layers; j++ {
			buf := s.region(s.cur, j, n) // what the next call's past view wraps
			for row := range want {
				for pos, w := range want[row] {
					if got := buf[(int64(row)*n+int64(pos))*dkv]; got != w {
						t.Fatalf("call %d tensor %d: row %d position %d holds %v, want %v", i, j, row, pos, got, w)
					}
				}
			}
		}
	}
	if err := s.fits(maxLen); err == nil {
		t.Error("a call past the buffers' capacity fits")
	}
	if err := s.fits(0); err == nil {
		t.Error("a call on no positions fits")
	}
}

// KeepRows moves rows to the front in order (the cross part's mask and K/V,
// the self part's cached rows); KeepPositions packs each row's first n of T.
func TestKeepRowsAndPositions(t *testing.T) {
	bufs := [][]int64{{0, 0, 1, 1, 2, 2, 3, 3}, {10, 10, 11, 11, 12, 12, 13, 13}}
	KeepRows(bufs, []int{1, 3}, 2)
	if !slices.Equal(bufs[0][:4], []int64{1, 1, 3, 3}) || !slices.Equal(bufs[1][:4], []int64{11, 11, 13, 13}) {
		t.Fatalf("kept rows 1, 3: %v", bufs)
	}
	// 3 rows of T=4 positions of width 2 -> n=2
	buf := []float32{0, 0, 1, 1, 2, 2, 3, 3, 10, 10, 11, 11, 12, 12, 13, 13, 20, 20, 21, 21, 22, 22, 23, 23}
	KeepPositions([][]float32{buf}, 3, 4, 2, 2)
	if want := []float32{0, 0, 1, 1, 10, 10, 11, 11, 20, 20, 21, 21}; !slices.Equal(buf[:12], want) {
		t.Fatalf("kept 2 of 4 positions: %v, want %v", buf[:12], want)
	}
}

func TestFindSlotsErrors(t *testing.T) {
	names := DecoderNames(1)
	crossIn, crossOut := []string{names.CrossStates}, names.CrossKV[0][:]
	if _, err := FindSlots(names, []string{"input_ids"}, []string{"logits"}, crossIn, crossOut); err == nil {
		t.Error("missing inputs accepted")
	}
	ins := append([]string{names.IDs, names.EncoderMask}, names.Past[0][:]...)
	outs := append([]string{names.Logits}, names.Present[0][:]...)
	if _, err := FindSlots(names, ins, outs, crossIn, crossOut); err != nil {
		t.Fatalf("a whole decoder refused: %v", err)
	}
	for what, c := range map[string][4][]string{
		"an input without a role":   {append(ins, "extra"), outs, crossIn, crossOut},
		"a merged decoder's inputs": {append(ins, "encoder_hidden_states", "use_cache_branch"), outs, crossIn, crossOut},
		"a cross graph without K/V": {ins, outs, crossIn, nil},
	} {
		if _, err := FindSlots(names, c[0], c[1], c[2], c[3]); err == nil {
			t.Errorf("%s accepted", what)
		}
	}
}
