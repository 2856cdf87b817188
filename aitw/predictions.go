package aitw

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/autoui/autoui/action"
)

// Prediction is one line of a predictions JSONL file:
//
//	{"episode_id": "...", "step_id": 0, "action_type": 4 or "DUAL_POINT",
//	 "touch_point": [y, x], "lift_point": [y, x], "typed_text": "..."}
//
// `autoui eval run` also writes "subset", "raw" (the model text) and
// "parse_error" (when the text did not parse; action_type is then 0, which
// matches nothing). Unknown fields are ignored when reading.
type Prediction struct {
	EpisodeID  string
	StepID     int
	Action     action.Action
	Subset     string
	Raw        string
	ParseError string
}

// StepKey identifies a step across gold and predictions.
type StepKey struct {
	EpisodeID string
	StepID    int
}

type predictionJSON struct {
	EpisodeID  json.RawMessage `json:"episode_id"`
	StepID     int             `json:"step_id"`
	ActionType json.RawMessage `json:"action_type"`
	TouchPoint []float64       `json:"touch_point"`
	LiftPoint  []float64       `json:"lift_point"`
	TypedText  string          `json:"typed_text"`
	Subset     string          `json:"subset,omitempty"`
	Raw        string          `json:"raw,omitempty"`
	ParseError string          `json:"parse_error,omitempty"`
}

// MarshalJSON writes the predictions shape; action_type is the AITW name,
// or the number for a zero (unparsed) action.
func (p Prediction) MarshalJSON() ([]byte, error) {
	id, _ := json.Marshal(p.EpisodeID)
	var typ json.RawMessage
	if p.Action.Type.Valid() {
		typ, _ = json.Marshal(p.Action.Type.String())
	} else {
		typ = json.RawMessage(strconv.Itoa(int(p.Action.Type)))
	}
	return json.Marshal(predictionJSON{
		EpisodeID: id, StepID: p.StepID, ActionType: typ,
		TouchPoint: []float64{p.Action.Touch.Y, p.Action.Touch.X},
		LiftPoint:  []float64{p.Action.Lift.Y, p.Action.Lift.X},
		TypedText:  p.Action.Text, Subset: p.Subset, Raw: p.Raw, ParseError: p.ParseError,
	})
}

// UnmarshalJSON reads the predictions shape. episode_id may be a string or
// a number; action_type a number or a name; missing points are [-1, -1].
func (p *Prediction) UnmarshalJSON(b []byte) error {
	var j predictionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.EpisodeID) == 0 {
		return errors.New("no episode_id")
	}
	if s, ok := plainString(j.EpisodeID); ok {
		p.EpisodeID = s
	} else if j.EpisodeID[0] == '"' {
		if err := json.Unmarshal(j.EpisodeID, &p.EpisodeID); err != nil {
			return fmt.Errorf("episode_id: %w", err)
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(j.EpisodeID, &n); err != nil {
			return fmt.Errorf("episode_id: %w", err)
		}
		p.EpisodeID = n.String()
	}
	p.StepID = j.StepID
	if len(j.ActionType) == 0 {
		return errors.New("no action_type")
	}
	s, plain := plainString(j.ActionType)
	if !plain {
		s = string(j.ActionType)
	}
	if !plain && s[0] == '"' {
		if err := json.Unmarshal(j.ActionType, &s); err != nil {
			return fmt.Errorf("action_type: %w", err)
		}
	}
	t, err := action.ParseType(s)
	if err != nil {
		// An unknown type is a prediction that matches nothing, not a broken file.
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			return fmt.Errorf("action_type: %w", err)
		}
		t = action.Type(n)
	}
	pt := func(v []float64, name string) (action.Point, error) {
		switch len(v) {
		case 0:
			return action.NoPoint, nil
		case 2:
			return action.Point{Y: v[0], X: v[1]}, nil
		}
		return action.Point{}, fmt.Errorf("%s: want [y, x], have %d numbers", name, len(v))
	}
	touch, err := pt(j.TouchPoint, "touch_point")
	if err != nil {
		return err
	}
	lift, err := pt(j.LiftPoint, "lift_point")
	if err != nil {
		return err
	}
	p.Action = action.Action{Type: t, Touch: touch, Lift: lift, Text: j.TypedText}
	p.Subset, p.Raw, p.ParseError = j.Subset, j.Raw, j.ParseError
	return nil
}

// plainString unquotes a JSON string without escapes (the common case,
// cheaper than a second json.Unmarshal).
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	return string(inner), true
}

// PredictionSet holds a predictions file by step.
type PredictionSet struct {
	ByStep map[StepKey]Prediction
	// Lines is the number of prediction lines read; Duplicates counts lines
	// for a step already seen (the last one wins, as a re-run appends).
	Lines, Duplicates int
	// TornTail is set when the last line was cut off mid-write and ignored.
	TornTail bool
}

// ReadPredictions reads a predictions JSONL file. A final line without a
// newline that does not parse is a torn write (the process was killed) and
// is ignored; any other bad line is an error with its line number.
func ReadPredictions(path string) (*PredictionSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read predictions: %w", err)
	}
	defer f.Close()
	ps := &PredictionSet{ByStep: map[StepKey]Prediction{}}
	err = scanPredictions(f, path, ps.add, &ps.TornTail)
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// scanPredictions parses lines; it returns the byte length of the valid
// prefix through good (for truncating a torn tail before appending).
func scanPredictions(r io.Reader, name string, fn func(Prediction), torn *bool) error {
	_, err := scanPredictionsPrefix(r, name, fn, torn)
	return err
}

func scanPredictionsPrefix(r io.Reader, name string, fn func(Prediction), torn *bool) (int64, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var good int64
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return good, nil
		}
		if err != nil && err != io.EOF {
			return good, fmt.Errorf("read predictions %s: %w", name, err)
		}
		complete := err == nil
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 {
			var p Prediction
			if perr := p.UnmarshalJSON(trimmed); perr != nil {
				if !complete {
					*torn = true
					return good, nil
				}
				return good, fmt.Errorf("read predictions %s line %d: %w", name, lineNo, perr)
			}
			fn(p)
		}
		if !complete {
			// A last line without a newline that parses is kept; appending
			// must add the newline first.
			return good, nil
		}
		good += int64(len(line))
	}
}

// PredictionWriter appends predictions to a JSONL file, one write per line,
// syncing to disk every SyncEvery lines and on Close, so an interrupted run
// keeps every line written before it.
type PredictionWriter struct {
	f         *os.File
	SyncEvery int
	pending   int
}

// OpenPredictionWriter opens path for appending and reads what it already
// holds. A torn last line (from a killed process) is cut off first, so the
// file stays valid JSONL.
func OpenPredictionWriter(path string) (*PredictionWriter, *PredictionSet, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open predictions: %w", err)
	}
	ps := &PredictionSet{ByStep: map[StepKey]Prediction{}}
	good, err := scanPredictionsPrefix(f, path, ps.add, &ps.TornTail)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err == nil && end != good {
		if ps.TornTail {
			err = f.Truncate(good)
		} else {
			// The last line parsed but lacks its newline: add it.
			_, err = f.Write([]byte{'\n'})
		}
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open predictions %s: %w", path, err)
	}
	return &PredictionWriter{f: f, SyncEvery: 16}, ps, nil
}

// Write appends one prediction line.
func (w *PredictionWriter) Write(p Prediction) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("write predictions: %w", err)
	}
	w.pending++
	if w.SyncEvery > 0 && w.pending >= w.SyncEvery {
		return w.Sync()
	}
	return nil
}

// Sync flushes written lines to disk.
func (w *PredictionWriter) Sync() error {
	w.pending = 0
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync predictions: %w", err)
	}
	return nil
}

// Close syncs and closes the file; later calls do nothing.
func (w *PredictionWriter) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// add records one prediction line; a later line for the same step wins.
func (ps *PredictionSet) add(p Prediction) {
	k := StepKey{p.EpisodeID, p.StepID}
	if _, dup := ps.ByStep[k]; dup {
		ps.Duplicates++
	}
	ps.ByStep[k] = p
	ps.Lines++
}
