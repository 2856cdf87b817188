package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/api"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

// job is one decoded request waiting for, or in, a batch.
type job struct {
	ctx     context.Context
	req     predict.Request
	arrived time.Time
	done    chan answer // buffered: the batcher never blocks on it
}

type answer struct {
	res  *predict.Result
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

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
	if !s.authorized(r) {
		s.refuse(w, r, errUnauthorized)
		return
	}
	if r.Method != http.MethodPost {
		s.refuse(w, r, methodNotAllowed("POST"))
		return
	}
	s.mu.Lock()
	model, closing := s.model, s.closing
	s.mu.Unlock()
	switch {
	case closing:
		s.refuse(w, r, errShuttingDown)
		return
	case model == nil:
		s.refuse(w, r, errNotReady)
		return
	}
	if herr := s.early(r); herr != nil {
		s.refuse(w, r, herr)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	req, herr := s.readRequest(ctx, w, r, model)
	switch {
	case herr != nil && herr.unread:
		s.refuse(w, r, herr)
		return
	case herr != nil:
		s.answerError(w, r, herr)
		return
	}
	j := &job{ctx: ctx, req: req, arrived: start, done: make(chan answer, 1)}
	if herr := s.enqueue(j); herr != nil {
		s.answerError(w, r, herr)
		return
	}
	select {
	case a := <-j.done:
		if a.err != nil {
			s.answerError(w, r, errorOf(a.err))
			return
		}
		out := api.FromResult(a.res)
		info := a.info
		out.Serve = &info
		writeJSON(w, http.StatusOK, out)
	case <-ctx.Done():
		// The batcher drops the job if it has not run yet.
		s.answerError(w, r, errorOf(context.DeadlineExceeded))
	}
}

// answerError writes an error answer, or only counts the request when its
// client went away (nobody reads the answer).
func (s *Server) answerError(w http.ResponseWriter, r *http.Request, e *httpError) {
	if r.Context().Err() != nil {
		s.metrics.canceled.Inc()
		return
	}
	s.writeError(w, e)
}

// early refuses what the headers already decide, before any of the body is
// read: a body that is not JSON or is over MaxBody, or any body while the
// queue is full (so a busy server spends nothing on requests it refuses).
func (s *Server) early(r *http.Request) *httpError {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return &httpError{status: http.StatusUnsupportedMediaType, kind: KindUnsupportedType,
			msg: fmt.Sprintf("Content-Type %q: the body must be application/json", ct)}
	}
	if r.ContentLength > s.cfg.MaxBody {
		return s.tooLarge()
	}
	if len(s.slots) == cap(s.slots) {
		return s.queueFull()
	}
	return nil
}

// isJSON says whether a Content-Type is application/json or a +json type.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func (s *Server) tooLarge() *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, kind: KindTooLarge,
		msg: fmt.Sprintf("request body is over the limit of %d bytes", s.cfg.MaxBody)}
}

// readRequest reads the body, takes a queue slot, and checks and decodes
// the request into an engine request, so that the batcher only runs the
// engine. On success the request holds a slot until the batcher takes it.
func (s *Server) readRequest(ctx context.Context, w http.ResponseWriter, r *http.Request, m *Model) (predict.Request, *httpError) {
	raw, release, herr := s.readBody(w, r)
	defer release()
	if herr != nil {
		// net/http cancels the request's context on any read error from the
		// connection: a client that hung up mid-upload is counted as gone
		// (answerError), not refused as a bad request.
		herr.unread = r.Context().Err() == nil
		return predict.Request{}, herr
	}
	if herr := s.admit(); herr != nil {
		return predict.Request{}, herr
	}
	pr, herr := parseRequest(raw)
	raw = nil
	var req predict.Request
	if herr == nil {
		req, herr = s.check(ctx, pr, m)
	}
	if herr != nil {
		s.unadmit()
	}
	return req, herr
}

// readBody reads the whole body, holding the bytes it reads against the
// server's body budget until release, so that many clients sending big
// bodies at once get 429s rather than the server's memory. Slow clients
// hold only what they have sent.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (raw []byte, release func(), herr *httpError) {
	var held int64
	release = func() { s.bodies.give(held); held = 0 }
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			n := int64(max(2*cap(buf), 64<<10))
			if r.ContentLength >= 0 {
				n = min(n, r.ContentLength+1) // +1: room to read the EOF
			}
			n = min(n, s.cfg.MaxBody+1)
			// The growth is held (the old buffer is garbage once copied).
			grow := n - int64(cap(buf))
			if !s.bodies.take(grow) {
				return nil, release, &httpError{status: http.StatusTooManyRequests, kind: KindQueueFull,
					msg: fmt.Sprintf("request bodies being read fill the server's %d bytes for them; retry later", s.cfg.BodyMemory)}
			}
			held += grow
			buf = append(make([]byte, 0, n), buf...)
		}
		k, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		switch {
		case err == io.EOF:
			return buf, release, nil
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, release, s.tooLarge()
			}
			return nil, release, badRequest("read request body: %v", err)
		}
	}
}

// parseRequest decodes a body strictly: known fields only, one value.
func parseRequest(raw []byte) (api.PredictRequest, *httpError) {
	dec := json.NewDecoder(bytes.NewReader(raw))
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
		if errors.Is(err, io.EOF) {
			return api.PredictRequest{}, badRequest("request body: empty; want a JSON object (api.PredictRequest)")
		}
		return api.PredictRequest{}, badRequest("request body: %s", jsonProblem(err))
	}
	return wr.request(), nil
}

// jsonProblem says what is wrong with a body in JSON's terms, not Go's
// (encoding/json names the Go struct and field types).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := map[reflect.Kind]string{reflect.String: "a string", reflect.Int: "an integer", reflect.Bool: "true or false",
			reflect.Float32: "a number", reflect.Float64: "a number", reflect.Struct: "an object", reflect.Slice: "an array"}[te.Type.Kind()]
		switch {
		case te.Type.Kind() == reflect.Float32 && strings.HasPrefix(te.Value, "number "):
			// A number read as a float32 fails only by being too large
			// (said without naming Go's type, as the rest).
			return fmt.Sprintf("%s: %s is outside the range of a 32-bit float (±3.4e38)", te.Field, strings.TrimPrefix(te.Value, "number "))
		case te.Type == reflect.TypeOf([]byte(nil)):
			want = "a base64 string"
		case te.Type.Kind() == reflect.Slice && te.Type.Elem().Kind() == reflect.Float32:
			want = "an array of numbers"
		case want == "":
			want = "another type"
		}
		if te.Field == "" {
			return fmt.Sprintf("want a JSON object (api.PredictRequest), got %s", te.Value)
		}
		return fmt.Sprintf("%s: want %s, got %s", te.Field, want, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// wireRequest is api.PredictRequest with its history actions read strictly
// too (action.Action's own UnmarshalJSON ignores unknown fields). A test
// keeps the two types' fields the same.
type wireRequest struct {
	Goal     string          `json:"goal"`
	Screen   []byte          `json:"screen,omitempty"`
	Features []float32       `json:"features,omitempty"`
	History  []action.Strict `json:"history,omitempty"`
	Options  api.Options     `json:"options"`
}

func (w wireRequest) request() api.PredictRequest {
	pr := api.PredictRequest{Goal: w.Goal, Screen: w.Screen, Features: w.Features, Options: w.Options}
	for _, a := range w.History {
		pr.History = append(pr.History, a.Action)
	}
	return pr
}

// check validates a request's wire form, passes it through the model's
// own check, and decodes its screen: a request the model refuses costs no
// decode.
func (s *Server) check(ctx context.Context, pr api.PredictRequest, m *Model) (predict.Request, *httpError) {
	if strings.TrimSpace(pr.Goal) == "" {
		return predict.Request{}, badRequest("goal is required")
	}
	hasScreen, hasFeatures := len(pr.Screen) > 0, len(pr.Features) > 0
	switch {
	case hasScreen && hasFeatures:
		return predict.Request{}, badRequest("give screen or features, not both")
	case !hasScreen && !hasFeatures:
		return predict.Request{}, badRequest("screen (base64 PNG or JPEG) or features is required")
	}
	if pr.Options.MaxNewTokens < 0 {
		return predict.Request{}, badRequest("options.max_new_tokens %d: must be >= 0", pr.Options.MaxNewTokens)
	}
	req := predict.Request{Goal: pr.Goal, History: pr.History, MaxNewTokens: pr.Options.MaxNewTokens, Constrained: pr.Options.Constrain}
	if hasFeatures {
		req.Features = pr.Features
	} else {
		req.Screen = standIn // the check reads no pixels
	}
	if m.Check != nil {
		if err := m.Check(req); err != nil {
			return predict.Request{}, badRequest("%v", err)
		}
	}
	if hasScreen {
		img, herr := s.decode(ctx, pr.Screen, m.Shrink)
		if herr != nil {
			return predict.Request{}, herr
		}
		req.Screen = img
	}
	return req, nil
}

// standIn is the screen a request is checked with before its own is decoded.
var standIn = image.NewGray(image.Rect(0, 0, 1, 1))

// decode decodes a screen once one of the Decoders is free, and shrinks it
// to the model's input size there (shrink nil: kept whole), so only the
// Decoders ever hold a whole screenshot.
func (s *Server) decode(ctx context.Context, b []byte, shrink func(image.Image) image.Image) (image.Image, *httpError) {
	select {
	case s.decoders <- struct{}{}:
	case <-ctx.Done():
		return nil, errorOf(context.DeadlineExceeded)
	}
	defer func() { <-s.decoders }()
	if s.beforeDecode != nil {
		s.beforeDecode()
	}
	img, err := preprocess.DecodeWith(bytes.NewReader(b), s.cfg.Decode)
	if err != nil {
		if errors.Is(err, preprocess.ErrTooLarge) {
			return nil, &httpError{status: http.StatusRequestEntityTooLarge, kind: KindTooLarge, msg: "screen: " + err.Error()}
		}
		return nil, badRequest("screen: %v", err)
	}
	if shrink != nil {
		img = shrink(img)
	}
	return img, nil
}

// refuse answers an error given before the body is read, and closes the
// connection. The answer goes out at once; then what the client still
// sends is read and dropped, for at most linger and MaxBody bytes, so that
// a client that writes its whole body before reading sees the answer, not
// a reset. Connection: close keeps net/http from reading the body before
// the answer.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *httpError) {
	w.Header().Set("Connection", "close")
	s.writeError(w, e)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || rc.SetReadDeadline(time.Now().Add(s.linger)) != nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, s.cfg.MaxBody))
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
