package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/autoui/autoui/action"
)

// PeerInputs is the inputs file the peer runners (scripts/peers) read, so that
// every runner sees the same screens, prompts and generated length.
type PeerInputs struct {
	Tokens int         `json:"tokens"`
	Cases  []PeerInput `json:"cases"`
}

// PeerInput is one case with its prompt as our engine built it; peers
// tokenize SourceText themselves (timed) and check the token count.
type PeerInput struct {
	ID           string          `json:"id"`
	Screen       string          `json:"screen"`
	Goal         string          `json:"goal"`
	History      []action.Action `json:"history"`
	SourceText   string          `json:"source_text"`
	SourceTokens int             `json:"source_tokens"`
}

// WritePeerInputs writes the cases and the prompts of the measured actions to
// path. Screens without a file (the synthetic one) are written beside it.
func WritePeerInputs(path string, cases []Case, actions []Action, tokens int) error {
	dir := filepath.Dir(path)
	in := PeerInputs{Tokens: tokens}
	for _, c := range cases {
		pi := PeerInput{ID: c.ID, Screen: c.Screen, Goal: c.Goal, History: c.History}
		if pi.History == nil {
			pi.History = []action.Action{}
		}
		if pi.Screen == "" {
			pi.Screen = filepath.Join(dir, "screen_"+c.ID+".png")
			if err := os.WriteFile(pi.Screen, c.ScreenBytes, 0o644); err != nil {
				return fmt.Errorf("write peer screen: %w", err)
			}
		}
		abs, err := filepath.Abs(pi.Screen)
		if err != nil {
			return fmt.Errorf("peer screen %s: %w", pi.Screen, err)
		}
		pi.Screen = abs
		found := false
		for _, a := range actions {
			if a.Case == c.ID {
				pi.SourceText, pi.SourceTokens, found = a.SourceText, a.SourceTokens, true
				break
			}
		}
		if !found {
			return fmt.Errorf("case %s has no measured action to take its prompt from", c.ID)
		}
		in.Cases = append(in.Cases, pi)
	}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return fmt.Errorf("encode peer inputs: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write peer inputs %s: %w", path, err)
	}
	return nil
}
