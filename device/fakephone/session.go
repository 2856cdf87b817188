package fakephone

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// session is one transport connection from the adb server.
type session struct {
	dev  *Device
	conn net.Conn
	done chan struct{}

	wmu sync.Mutex // serializes frames on the wire

	mu         sync.Mutex
	version    uint32 // negotiated; 0 before CNXN
	maxPayload uint32
	nextID     uint32
	streams    map[uint32]*stream
}

func newSession(d *Device, c net.Conn) *session {
	return &session{dev: d, conn: c, done: make(chan struct{}), nextID: 1, streams: map[uint32]*stream{}, maxPayload: maxPayloadV1}
}

func (s *session) checksummed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version != 0 && s.version < versionSkipChecksum
}

func (s *session) send(m message) error {
	frame := m.encode(s.checksummed() || m.command == cmdCNXN)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.conn.Write(frame)
	return err
}

func (s *session) serve() {
	defer func() {
		close(s.done)
		_ = s.conn.Close()
		s.mu.Lock()
		for _, st := range s.streams {
			st.closeInbound()
		}
		s.mu.Unlock()
	}()
	r := bufio.NewReader(s.conn)
	for {
		// Before CNXN the server still checksums (it starts at the minimum
		// version), but we accept whatever it sends for the handshake.
		limit := s.dev.opts.MaxPayload
		if limit < 1024*1024 {
			limit = 1024 * 1024 // the server may send up to its own maximum
		}
		m, err := readMessage(r, limit, s.checksummed())
		if err != nil {
			return
		}
		if err := s.handle(m); err != nil {
			return
		}
	}
}

func (s *session) handle(m message) error {
	switch m.command {
	case cmdCNXN:
		if s.dev.opts.Unauthorized {
			return s.sendAuthToken()
		}
		s.mu.Lock()
		s.version = min(m.arg0, s.dev.opts.ProtocolVersion)
		s.maxPayload = min(m.arg1, s.dev.opts.MaxPayload)
		if s.version < versionMin {
			s.version = versionMin
		}
		s.mu.Unlock()
		return s.send(message{command: cmdCNXN, arg0: s.dev.opts.ProtocolVersion, arg1: s.dev.opts.MaxPayload, payload: []byte(s.dev.banner())})
	case cmdOPEN:
		service := strings.TrimRight(string(m.payload), "\x00")
		exec := strings.HasPrefix(service, "exec:") && !s.dev.opts.NoExec
		v2 := strings.HasPrefix(service, "shell,") && s.dev.opts.ShellV2
		if !strings.HasPrefix(service, "shell:") && !exec && !v2 && service != "sync:" {
			// Like adbd: an unknown service is refused with CLSE instead of OKAY.
			return s.send(message{command: cmdCLSE, arg0: 0, arg1: m.arg0})
		}
		s.mu.Lock()
		id := s.nextID
		s.nextID++
		st := &stream{sess: s, local: id, remote: m.arg0, okay: make(chan struct{}, 1), closed: make(chan struct{})}
		st.cond = sync.NewCond(&st.mu)
		s.streams[id] = st
		s.mu.Unlock()
		if err := s.send(message{command: cmdOKAY, arg0: id, arg1: m.arg0}); err != nil {
			return err
		}
		go st.serve(service)
		return nil
	case cmdOKAY:
		if st := s.stream(m.arg1); st != nil {
			select {
			case st.okay <- struct{}{}:
			default:
			}
		}
		return nil
	case cmdWRTE:
		st := s.stream(m.arg1)
		if st == nil {
			// Unknown stream: tell the server it is gone.
			return s.send(message{command: cmdCLSE, arg0: 0, arg1: m.arg0})
		}
		st.push(m.payload)
		return s.send(message{command: cmdOKAY, arg0: st.local, arg1: st.remote})
	case cmdCLSE:
		s.mu.Lock()
		st := s.streams[m.arg1]
		delete(s.streams, m.arg1)
		s.mu.Unlock()
		if st != nil {
			st.remoteClosed()
		}
		return nil
	case cmdAUTH:
		if !s.dev.opts.Unauthorized {
			return fmt.Errorf("unexpected %s", commandName(m.command))
		}
		if m.arg0 == authSignature {
			return s.sendAuthToken() // no key is trusted: ask again
		}
		return nil // a public key: the user never answers the prompt
	case cmdSYNC, cmdSTLS:
		return fmt.Errorf("unexpected %s", commandName(m.command))
	default:
		return fmt.Errorf("unknown command %s", commandName(m.command))
	}
}

// AUTH message types.
const (
	authToken        = 1
	authSignature    = 2
	authRSAPublicKey = 3
)

// sendAuthToken asks the server to sign a token, as a phone that has not
// authorized this computer does.
func (s *session) sendAuthToken() error {
	token := make([]byte, 20)
	for i := range token {
		token[i] = byte(i*7 + 3)
	}
	return s.send(message{command: cmdAUTH, arg0: authToken, payload: token})
}

func (s *session) stream(id uint32) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// stream is one service connection (a shell command or a sync session).
type stream struct {
	sess          *session
	local, remote uint32
	okay          chan struct{}
	closed        chan struct{}
	closeOnce     sync.Once

	mu       sync.Mutex
	cond     *sync.Cond
	inbound  bytes.Buffer
	inClosed bool
}

var errStreamClosed = errors.New("stream closed")

func (st *stream) push(p []byte) {
	st.mu.Lock()
	st.inbound.Write(p)
	st.mu.Unlock()
	st.cond.Broadcast()
}

func (st *stream) closeInbound() {
	st.mu.Lock()
	st.inClosed = true
	st.mu.Unlock()
	st.cond.Broadcast()
	st.closeOnce.Do(func() { close(st.closed) })
}

func (st *stream) remoteClosed() { st.closeInbound() }

// Read reads what the server wrote to the stream.
func (st *stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.inbound.Len() == 0 && !st.inClosed {
		st.cond.Wait()
	}
	if st.inbound.Len() == 0 {
		return 0, errStreamClosed
	}
	return st.inbound.Read(p)
}

// Write sends p in WRTE messages of at most the negotiated payload, waiting
// for the server's OKAY after each, as the legacy flow control requires.
func (st *stream) Write(p []byte) (int, error) {
	st.sess.mu.Lock()
	max := int(st.sess.maxPayload)
	st.sess.mu.Unlock()
	written := 0
	for len(p) > 0 {
		n := min(len(p), max)
		if err := st.sess.send(message{command: cmdWRTE, arg0: st.local, arg1: st.remote, payload: p[:n]}); err != nil {
			return written, err
		}
		select {
		case <-st.okay:
		case <-st.closed:
			return written, errStreamClosed
		case <-st.sess.done:
			return written, errStreamClosed
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// finish closes the stream from the device side.
func (st *stream) finish() {
	st.sess.mu.Lock()
	_, open := st.sess.streams[st.local]
	delete(st.sess.streams, st.local)
	st.sess.mu.Unlock()
	if open {
		_ = st.sess.send(message{command: cmdCLSE, arg0: st.local, arg1: st.remote})
	}
	st.closeInbound()
}

func (st *stream) serve(service string) {
	defer st.finish()
	dev := st.sess.dev
	switch {
	case strings.HasPrefix(service, "shell:"):
		line := strings.TrimPrefix(service, "shell:")
		if line == "" {
			_, _ = st.Write([]byte("interactive shells are not supported by the fake device\n"))
			return
		}
		if out, _, ok := dev.serve(line, dev.opts.PTY); ok {
			st.writeOutput(line, out)
		}
	case strings.HasPrefix(service, "shell,"):
		// shell,v2,raw:CMD (or pty): options, then the command line.
		opts, line, _ := strings.Cut(strings.TrimPrefix(service, "shell,"), ":")
		if out, exit, ok := dev.serve(line, strings.Contains(","+opts+",", ",pty,")); ok {
			st.writeOutput(line, shellV2Packets(out, exit))
		}
	case strings.HasPrefix(service, "exec:"):
		// adbd runs exec: raw (never on a pty) on every version.
		line := strings.TrimPrefix(service, "exec:")
		if out, _, ok := dev.serve(line, false); ok {
			st.writeOutput(line, out)
		}
	case service == "sync:":
		dev.serveSync(st)
	}
}

// writeOutput sends what the stream carries for line, only its first half
// when CutWhen cuts it (the stream then ends like a whole one).
func (st *stream) writeOutput(line string, b []byte) {
	if st.sess.dev.cut(line) {
		b = b[:len(b)/2]
	}
	if len(b) > 0 {
		_, _ = st.Write(b)
	}
}

// Shell protocol v2 packet ids (adb's shell_protocol.h).
const (
	shellStdout = 1
	shellExit   = 3
)

// shellV2Packets frames out as stdout packets (the fake merges stderr into
// it) followed by the exit packet: id byte, little-endian length, data.
func shellV2Packets(out []byte, exit int) []byte {
	var b bytes.Buffer
	packet := func(id byte, data []byte) {
		var h [5]byte
		h[0] = id
		binary.LittleEndian.PutUint32(h[1:], uint32(len(data)))
		b.Write(h[:])
		b.Write(data)
	}
	if len(out) > 0 {
		packet(shellStdout, out)
	}
	packet(shellExit, []byte{byte(exit)})
	return b.Bytes()
}
