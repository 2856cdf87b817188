package tokenizer

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// unkPenalty is how much worse than the worst piece an unknown character scores
// (SentencePiece's kUnkPenalty, also Hugging Face's).
const unkPenalty = 10.0

// unigram is a SentencePiece Unigram model segmented by Viterbi exactly as Hugging Face
// tokenizers' encode_optimized does: every vocabulary piece that prefixes the text at a
// character boundary is a candidate, ties keep the first path found, characters no piece
// covers become <unk>, and consecutive <unk>s fuse into one.
//
// sugarme/tokenizer's Unigram is not used: it adds a per-byte length bonus to scores,
// ignores pieces longer than 20 bytes, and so picks different segmentations.
type unigram struct {
	pieces   []string
	scores   []float64
	ids      map[string]int32
	unkID    int32
	unkScore float64

	// A byte trie over the pieces. The root's children are a dense table; other nodes
	// keep their edges sorted by byte in edges[edgeStart[n]:edgeStart[n+1]].
	// terminal[n] is the id of the piece ending at node n, or -1.
	root      [256]int32
	edgeStart []int32
	edges     []trieEdge
	terminal  []int32
}

type trieEdge struct {
	label byte
	child int32
}

// child returns the node reached from node n over byte c, or -1.
func (u *unigram) child(n int32, c byte) int32 {
	if n == 0 {
		return u.root[c]
	}
	for _, e := range u.edges[u.edgeStart[n]:u.edgeStart[n+1]] {
		if e.label >= c {
			if e.label == c {
				return e.child
			}
			break
		}
	}
	return -1
}

func newUnigram(pieces []string, scores []float64, unkID int) (*unigram, error) {
	if len(pieces) == 0 {
		return nil, fmt.Errorf("unigram: empty vocab")
	}
	if len(pieces) >= 1<<24 {
		return nil, fmt.Errorf("unigram: vocab of %d pieces is too large", len(pieces))
	}
	if unkID < 0 || unkID >= len(pieces) {
		return nil, fmt.Errorf("unigram: unk_id %d outside the vocab of %d", unkID, len(pieces))
	}
	u := &unigram{
		pieces:   pieces,
		scores:   scores,
		ids:      make(map[string]int32, len(pieces)),
		unkID:    int32(unkID),
		terminal: []int32{-1},
	}
	minScore := math.Inf(1)
	for i, p := range pieces {
		u.ids[p] = int32(i) // a duplicated piece maps to its last id, as in Hugging Face
		if scores[i] < minScore {
			minScore = scores[i]
		}
	}
	u.unkScore = minScore - unkPenalty
	// Build with a map, then flatten (the map is slow to query on the hot path).
	children := make(map[uint32]int32, len(pieces)*4)
	for p, id := range u.ids {
		if p == "" {
			continue
		}
		node := int32(0)
		for i := 0; i < len(p); i++ {
			key := uint32(node)<<8 | uint32(p[i])
			child, ok := children[key]
			if !ok {
				if len(u.terminal) >= 1<<24 {
					return nil, fmt.Errorf("unigram: trie too large")
				}
				child = int32(len(u.terminal))
				u.terminal = append(u.terminal, -1)
				children[key] = child
			}
			node = child
		}
		u.terminal[node] = id
	}
	perNode := make([][]trieEdge, len(u.terminal))
	for key, child := range children {
		n := key >> 8
		perNode[n] = append(perNode[n], trieEdge{label: byte(key), child: child})
	}
	for c := range u.root {
		u.root[c] = -1
	}
	for _, e := range perNode[0] {
		u.root[e.label] = e.child
	}
	u.edgeStart = make([]int32, len(u.terminal)+1)
	u.edges = make([]trieEdge, 0, len(children))
	for n, es := range perNode {
		u.edgeStart[n] = int32(len(u.edges))
		if n == 0 {
			continue
		}
		slices.SortFunc(es, func(a, b trieEdge) int { return int(a.label) - int(b.label) })
		u.edges = append(u.edges, es...)
	}
	u.edgeStart[len(perNode)] = int32(len(u.edges))
	return u, nil
}

type latticeNode struct {
	score float64
	start int32 // -1: not reached yet
	id    int32
}

// viterbiScratch is reused across the words of one encode call.
type viterbiScratch struct {
	nodes []latticeNode
	spans []int32
}

// encode appends the ids of one pre-tokenized word to out.
func (u *unigram) encode(word string, out []int64, v *viterbiScratch) []int64 {
	n := len(word)
	if n == 0 {
		return out
	}
	if cap(v.nodes) < n+1 {
		v.nodes = make([]latticeNode, n+1)
	}
	best := v.nodes[:n+1]
	for i := range best {
		best[i] = latticeNode{start: -1}
	}
	for i := 0; i < n; {
		_, charLen := utf8.DecodeRuneInString(word[i:])
		base := best[i].score
		hasSingle := false
		node := int32(0)
		for j := i; j < n; j++ {
			node = u.child(node, word[j])
			if node < 0 {
				break
			}
			id := u.terminal[node]
			if id < 0 {
				continue
			}
			end := j + 1
			cand := base + u.scores[id]
			if t := &best[end]; t.start < 0 || cand > t.score {
				*t = latticeNode{score: cand, start: int32(i), id: id}
			}
			if end-i == charLen {
				hasSingle = true
			}
		}
		if !hasSingle {
			end := i + charLen
			cand := base + u.unkScore
			if t := &best[end]; t.start < 0 || cand > t.score {
				*t = latticeNode{score: cand, start: int32(i), id: u.unkID}
			}
		}
		i += charLen
	}

	// Walk back collecting pieces as (start, end, id) triples, last piece first;
	// consecutive <unk> pieces fuse into one.
	spans := v.spans[:0]
	prevUnk := false
	for end := n; end > 0; {
		node := best[end]
		isUnk := node.id == u.unkID
		if isUnk && prevUnk {
			spans[len(spans)-3] = node.start
		} else {
			spans = append(spans, node.start, int32(end), node.id)
		}
		prevUnk = isUnk
		end = int(node.start)
	}
	for k := len(spans) - 3; k >= 0; k -= 3 {
		id := spans[k+2]
		if id == u.unkID {
			// A fused run is looked up as text, as Hugging Face does; it is <unk>
			// unless the run happens to spell a piece.
			if known, ok := u.ids[word[spans[k]:spans[k+1]]]; ok {
				id = known
			}
		}
		out = append(out, int64(id))
	}
	v.spans = spans
	return out
}

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }
