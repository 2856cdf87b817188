package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
)

// job is one decoded request waiting for, or in, a batch.
type job struct {
	ctx     context.Context
	req     engine.Request
	arrived time.Time
	done    chan answer // buffered: the batcher never blocks on it
}

type answer struct {
	res  *engine.Result
	info api.ServeInfo
	err  error
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (s *Server) handlePredict(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.predict(sw, r, start)
	code := "499" // the client went away: nothing was written
	if sw.code != 0 {
		code = strconv.Itoa(sw.code)
	}
	s.metrics.requestDuration.WithLabelValues(code).Observe(time.Since(start).Seconds())
}

func (s *Server) predict(w http.ResponseWriter, r *http.Request, start time.Time) {
	if r.Method != http.MethodPost {
		s.writeError(w, methodNotAllowed("POST"))
		return
	}
	if !s.authorized(r) {
		s.writeError(w, &httpError{status: http.StatusUnauthorized, kind: KindUnauthorized,
			msg: "missing or wrong bearer token (Authorization: Bearer TOKEN)"})
		return
	}
	s.mu.Lock()
	model, closing := s.model, s.closing
	s.mu.Unlock()
	switch {
	case closing:
		s.writeError(w, errShuttingDown)
		return
	case model == nil:
		s.writeError(w, errNotReady)
		return
	}
	req, herr := s.readRequest(w, r, model)
	if herr != nil {
		s.writeError(w, herr)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	j := &job{ctx: ctx, req: req, arrived: start, done: make(chan answer, 1)}
	if herr := s.enqueue(j); herr != nil {
		s.writeError(w, herr)
		return
	}
	select {
	case a := <-j.done:
		if a.err != nil {
			if r.Context().Err() != nil {
				s.metrics.errors.WithLabelValues(kindCanceled).Inc()
				return
			}
			s.writeError(w, errorOf(a.err))
			return
		}
		out := api.FromResult(a.res)
		info := a.info
		out.Serve = &info
		writeJSON(w, http.StatusOK, out)
	case <-ctx.Done():
		if r.Context().Err() != nil {
			s.metrics.errors.WithLabelValues(kindCanceled).Inc()
			return // the client went away; the batcher drops the job
		}
		s.writeError(w, errorOf(context.DeadlineExceeded))
	}
}

// readRequest reads, checks and decodes a request body into an engine
// request, so that the batcher only runs the engine.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, m *Model) (engine.Request, *httpError) {
	tooLarge := &httpError{status: http.StatusRequestEntityTooLarge, kind: KindTooLarge,
		msg: fmt.Sprintf("request body is over the limit of %d bytes", s.cfg.MaxBody)}
	if r.ContentLength > s.cfg.MaxBody {
		return engine.Request{}, tooLarge
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var wr wireRequest
	err := dec.Decode(&wr)
	if err == nil {
		// One JSON value, nothing after it.
		var extra json.RawMessage
		if err2 := dec.Decode(&extra); err2 != io.EOF {
			if err2 == nil {
				err = errors.New("more than one JSON value in the body")
			} else {
				err = err2
			}
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return engine.Request{}, tooLarge
		}
		if errors.Is(err, io.EOF) {
			return engine.Request{}, badRequest("request body: empty; want a JSON object (api.PredictRequest)")
		}
		return engine.Request{}, badRequest("request body: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return s.check(wr.request(), m)
}

// wireRequest is api.PredictRequest with its history actions read strictly
// too (action.Action's own UnmarshalJSON ignores unknown fields). A test
// keeps the two types' fields the same.
type wireRequest struct {
	Goal     string         `json:"goal"`
	Screen   []byte         `json:"screen,omitempty"`
	Features []float32      `json:"features,omitempty"`
	History  []strictAction `json:"history,omitempty"`
	Options  api.Options    `json:"options"`
}

func (w wireRequest) request() api.PredictRequest {
	pr := api.PredictRequest{Goal: w.Goal, Screen: w.Screen, Features: w.Features, Options: w.Options}
	for _, a := range w.History {
		pr.History = append(pr.History, a.Action)
	}
	return pr
}

// strictAction is an action.Action whose JSON may hold only its four fields.
type strictAction struct{ action.Action }

func (a *strictAction) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("history action: %w", err)
	}
	for k := range fields {
		switch k {
		case "action_type", "touch_point", "lift_point", "typed_text":
		default:
			return fmt.Errorf("history action: unknown field %q", k)
		}
	}
	return a.Action.UnmarshalJSON(data)
}

// check validates a request's wire form, decodes its screen, and passes
// the engine request through the model's own check.
func (s *Server) check(pr api.PredictRequest, m *Model) (engine.Request, *httpError) {
	if strings.TrimSpace(pr.Goal) == "" {
		return engine.Request{}, badRequest("goal is required")
	}
	hasScreen, hasFeatures := len(pr.Screen) > 0, len(pr.Features) > 0
	switch {
	case hasScreen && hasFeatures:
		return engine.Request{}, badRequest("give screen or features, not both")
	case !hasScreen && !hasFeatures:
		return engine.Request{}, badRequest("screen (base64 PNG or JPEG) or features is required")
	}
	if pr.Options.MaxNewTokens < 0 {
		return engine.Request{}, badRequest("options.max_new_tokens %d: must be >= 0", pr.Options.MaxNewTokens)
	}
	req := engine.Request{Goal: pr.Goal, History: pr.History, MaxNewTokens: pr.Options.MaxNewTokens, Constrained: pr.Options.Constrain}
	if hasFeatures {
		req.Features = pr.Features
	} else {
		img, err := preprocess.DecodeWith(bytes.NewReader(pr.Screen), s.cfg.Decode)
		if err != nil {
			if errors.Is(err, preprocess.ErrTooLarge) {
				return engine.Request{}, &httpError{status: http.StatusRequestEntityTooLarge, kind: KindTooLarge, msg: "screen: " + err.Error()}
			}
			return engine.Request{}, badRequest("screen: %v", err)
		}
		req.Screen = img
	}
	if m.Check != nil {
		if err := m.Check(req); err != nil {
			return engine.Request{}, badRequest("%v", err)
		}
	}
	return req, nil
}

func (s *Server) writeError(w http.ResponseWriter, e *httpError) {
	switch e.status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="autoui"`)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", s.retryAfter())
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", e.allow)
	}
	s.metrics.errors.WithLabelValues(e.kind).Inc()
	writeJSON(w, e.status, api.ErrorBody{Error: e.msg, Kind: e.kind})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(api.ErrorBody{Error: "encode answer: " + err.Error(), Kind: KindInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
