package engine

import (
	"fmt"
	"strings"

	"github.com/autoui/autoui/action"
)

// Truncation says what to do when the prompt exceeds the source token limit.
type Truncation int

const (
	// KeepGoal drops the oldest previous actions first, so the goal (at the
	// end of the prompt) survives; right-truncates only if the goal alone is
	// too long. The default.
	KeepGoal Truncation = iota
	// TruncateRight cuts tokens from the end like Auto-UI's training and
	// evaluation code, which can cut off the goal.
	TruncateRight
)

// ParseTruncation reads "keep-goal" or "right".
func ParseTruncation(s string) (Truncation, error) {
	switch s {
	case "", "keep-goal":
		return KeepGoal, nil
	case "right":
		return TruncateRight, nil
	}
	return 0, fmt.Errorf("unknown truncation %q (want keep-goal or right)", s)
}

func (t Truncation) String() string {
	if t == TruncateRight {
		return "right"
	}
	return "keep-goal"
}

// SourceText is Auto-UI's prompt: with a history window w > 0,
// "Previous Actions: " + the last w actions' texts joined by newlines +
// "\nGoal: " + goal; with w <= 0 just "Goal: " + goal. Whitespace runs are
// then collapsed as Python's " ".join(s.split()) does. History actions are
// normalized first (idempotent), as the model saw them in training.
func SourceText(goal string, history []action.Action, window int, m action.ScrollMap) string {
	var b strings.Builder
	if window > 0 {
		if len(history) > window {
			history = history[len(history)-window:]
		}
		b.WriteString("Previous Actions: ")
		for i, a := range history {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(action.Normalize(a, m).String())
		}
		b.WriteByte('\n')
	}
	b.WriteString("Goal: ")
	b.WriteString(goal)
	return CollapseSpace(b.String())
}

// CollapseSpace is Python's " ".join(s.split()).
func CollapseSpace(s string) string {
	return strings.Join(strings.FieldsFunc(s, action.IsPySpace), " ")
}

// encoder is the part of the tokenizer prompt building needs.
type encoder interface {
	Encode(text string) ([]int64, error)
}

// buildPrompt returns the source text and its token ids, within maxTokens.
// Ids end with </s> (eos) like Hugging Face's encode; right truncation keeps
// the first maxTokens-1 tokens and the </s>, as HF truncation does.
func buildPrompt(tok encoder, eos int64, goal string, history []action.Action, window, maxTokens int, m action.ScrollMap, policy Truncation) (string, []int64, error) {
	if window > 0 && len(history) > window {
		history = history[len(history)-window:]
	}
	keep := len(history)
	for {
		text := SourceText(goal, history[len(history)-keep:], window, m)
		ids, err := tok.Encode(text)
		if err != nil {
			return "", nil, fmt.Errorf("tokenize prompt: %w", err)
		}
		if len(ids) <= maxTokens {
			return text, ids, nil
		}
		if policy == KeepGoal && keep > 0 {
			keep--
			continue
		}
		ids = append(ids[:maxTokens-1:maxTokens-1], eos)
		return text, ids, nil
	}
}
