package device

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/autoui/autoui/device/adbhost"
)

// Defaults for the transport; Options override them.
const (
	defaultDialTimeout    = 5 * time.Second
	defaultCommandTimeout = 30 * time.Second
	defaultReadRetries    = 3
	retryBackoffStart     = 250 * time.Millisecond
)

// transport speaks the adb server's smart-socket protocol directly, one TCP
// connection per service, so that every command has a dial timeout, a
// deadline and is cancelled with its context (gadb has none of these).
type transport struct {
	addr        string // host:port of the adb server
	serial      string
	dialTimeout time.Duration
	cmdTimeout  time.Duration
}

// serverError is a FAIL answer of the adb server ("device offline", ...).
type serverError struct{ msg string }

func (e *serverError) Error() string { return e.msg }

// timeoutError says a command got no complete answer within its deadline.
type timeoutError struct {
	what  string
	limit time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s: no answer within %s (the device may be hung or the link stalled)", e.what, e.limit)
}

// dial connects to the adb server within the dial timeout.
func (t *transport) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: t.dialTimeout}
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("reach the adb server at %s: %w", t.addr, err)
	}
	return c, nil
}

// request sends one length-prefixed request and reads OKAY or FAIL.
func request(c net.Conn, r *bufio.Reader, req string) error {
	if err := adbhost.WriteRequest(c, req); err != nil {
		return err
	}
	status, err := adbhost.ReadStatus(r)
	if err != nil {
		return err
	}
	switch status {
	case "OKAY":
		return nil
	case "FAIL":
		msg, err := adbhost.ReadString(r)
		if err != nil {
			return &serverError{"adb server refused " + req}
		}
		return &serverError{strings.TrimSpace(msg)}
	}
	return fmt.Errorf("adb server answered %q to %s", status, req)
}

// withConn runs fn on a connection switched to the device, under the
// command deadline; cancelling ctx closes the connection so a blocked read
// returns at once.
func (t *transport) withConn(ctx context.Context, what string, fn func(c net.Conn, r *bufio.Reader) error) error {
	cmdCtx, cancel := context.WithTimeout(ctx, t.cmdTimeout)
	defer cancel()
	c, err := t.dial(cmdCtx)
	if err != nil {
		return t.classify(ctx, cmdCtx, what, err)
	}
	defer c.Close()
	stop := context.AfterFunc(cmdCtx, func() { _ = c.Close() })
	defer stop()
	if dl, ok := cmdCtx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	if err := request(c, r, "host:transport:"+t.serial); err != nil {
		return t.classify(ctx, cmdCtx, what, err)
	}
	if err := fn(c, r); err != nil {
		return t.classify(ctx, cmdCtx, what, err)
	}
	return nil
}

// classify turns a low-level error into the caller's cancellation, a
// timeout, or the error itself.
func (t *transport) classify(parent, cmdCtx context.Context, what string, err error) error {
	if parent.Err() != nil {
		return parent.Err() // the caller names the command
	}
	if cmdCtx.Err() != nil || isNetTimeout(err) {
		return &timeoutError{what: what, limit: t.cmdTimeout}
	}
	return err
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// service opens service on the device and returns everything it writes
// until it closes the stream.
func (t *transport) service(ctx context.Context, service string) ([]byte, error) {
	var out []byte
	err := t.withConn(ctx, service, func(c net.Conn, r *bufio.Reader) error {
		if err := request(c, r, service); err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		out = b
		return err
	})
	return out, err
}

// pull reads a file from the device with the sync protocol (RECV).
func (t *transport) pull(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	err := t.withConn(ctx, "pull "+path, func(c net.Conn, r *bufio.Reader) error {
		if err := request(c, r, "sync:"); err != nil {
			return err
		}
		if err := syncRequest(c, "RECV", path); err != nil {
			return err
		}
		if err := readSyncData(r, &buf); err != nil {
			return err
		}
		return syncRequest(c, "QUIT", "")
	})
	return buf.Bytes(), err
}

func syncRequest(w io.Writer, id, arg string) error {
	msg := make([]byte, 8+len(arg))
	copy(msg, id)
	binary.LittleEndian.PutUint32(msg[4:], uint32(len(arg)))
	copy(msg[8:], arg)
	_, err := w.Write(msg)
	return err
}

// readSyncData copies DATA chunks to w until DONE; FAIL is the device's
// error message.
func readSyncData(r io.Reader, w io.Writer) error {
	for {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint32(h[4:])
		switch string(h[:4]) {
		case "DATA":
			if n > 1<<20 {
				return fmt.Errorf("sync DATA chunk of %d bytes", n)
			}
			if _, err := io.CopyN(w, r, int64(n)); err != nil {
				return err
			}
		case "DONE":
			return nil
		case "FAIL":
			msg := make([]byte, min(n, 4096))
			_, _ = io.ReadFull(r, msg)
			return &serverError{strings.TrimSpace(string(msg))}
		default:
			return fmt.Errorf("sync: unexpected %q", h[:4])
		}
	}
}

// errTruncated says a command's output ended before its end marker (the
// exit-status echo, a PNG's IEND chunk): the link fell mid-transfer.
var errTruncated = errors.New("output cut short (the link dropped mid-transfer)")

// transient reports errors worth retrying for a read-only command: the
// device briefly offline or reconnecting, or the connection reset.
func transient(err error) bool {
	var te *timeoutError
	if err == nil || errors.Is(err, context.Canceled) || errors.As(err, &te) {
		return false
	}
	if errors.Is(err, errTruncated) {
		return true
	}
	var se *serverError
	if errors.As(err, &se) {
		m := strings.ToLower(se.msg)
		return strings.Contains(m, "offline") || strings.Contains(m, "not found") || strings.Contains(m, "connecting")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe") ||
		strings.Contains(err.Error(), "connection refused")
}

// retry runs fn up to attempts times while it fails transiently, doubling
// the pause between tries; ctx cancels the wait.
func retry(ctx context.Context, attempts int, fn func() error) error {
	pause := retryBackoffStart
	var err error
	for i := 0; i < max(attempts, 1); i++ {
		if err = fn(); err == nil || !transient(err) || i == attempts-1 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
	return err
}
