package fakephone

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/autoui/autoui/device/adbhost"
)

// InstallHint is what to do when no adb binary is found.
const InstallHint = "the device tests need Debian's adb server: apt-get install adb (as root; `make setup-adb` does it)"

// Server is an adb server started for tests on its own loopback port, with
// its own HOME so its key and log stay out of the user's ~/.android.
type Server struct {
	Host string // "127.0.0.1"
	Port int
	bin  string
	home string
	cmd  *exec.Cmd
	exit chan error
}

// Addr is host:port of the server's smart socket.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// StartServer runs `adb -P PORT nodaemon server` on a free port as a child
// process, with home as its HOME (where it keeps its key and log), and waits
// until it answers host:version. The caller stops it with Stop (kill-server,
// then the child itself if needed); phonetest.StartServer does that when the
// test ends. A missing adb binary is an error that carries InstallHint.
func StartServer(home string) (*Server, error) {
	bin, err := exec.LookPath("adb")
	if err != nil {
		return nil, fmt.Errorf("adb not found on PATH: %s", InstallHint)
	}
	var lastErr error
	// The free port may be taken between probing and the server's bind;
	// a few attempts make that race irrelevant.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Host: "127.0.0.1", Port: port, bin: bin, home: home, exit: make(chan error, 1)}
		if err := s.start(); err != nil {
			lastErr = err
			continue
		}
		return s, nil
	}
	return nil, fmt.Errorf("start adb server: %w", lastErr)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) env() []string {
	env := os.Environ()
	env = append(env, "HOME="+s.home, "ANDROID_SDK_HOME="+s.home, "ANDROID_ADB_SERVER_PORT="+strconv.Itoa(s.Port))
	return env
}

func (s *Server) start() error {
	var stderr bytes.Buffer
	cmd := exec.Command(s.bin, "-P", strconv.Itoa(s.Port), "nodaemon", "server")
	cmd.Env = s.env()
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr // read only after Wait returned
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	s.cmd = cmd
	go func() { s.exit <- cmd.Wait() }()
	// Readiness: poll host:version with bounded retries (~10 s at most).
	for i := 0; i < 200; i++ {
		select {
		case err := <-s.exit:
			s.exit <- err
			return fmt.Errorf("adb server on port %d exited (%v): %s", s.Port, err, stderr.String())
		default:
		}
		if _, err := s.Query("host:version"); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	return fmt.Errorf("adb server on port %d did not answer host:version", s.Port)
}

// Stop asks the server to exit and kills the child if it does not.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_, _ = s.Query("host:kill")
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
}

// Query sends one host request on the smart socket and returns its payload
// ("OKAY" + 4-hex length + data), or the server's FAIL message as an error.
func (s *Server) Query(req string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := adbhost.WriteRequest(c, req); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	status, err := adbhost.ReadStatus(r)
	if err != nil {
		if req == "host:kill" {
			return "", nil
		}
		return "", err
	}
	if req == "host:kill" {
		return "", nil
	}
	payload, err := adbhost.ReadString(r)
	if status != "OKAY" {
		if err != nil {
			return "", fmt.Errorf("adb server: %s", status)
		}
		return "", fmt.Errorf("adb server: %s", payload)
	}
	return payload, err
}

// State returns the server's state for serial ("device", "offline", ...) or
// "" when it does not list it.
func (s *Server) State(serial string) (string, error) {
	out, err := s.Query("host:devices")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == serial {
			return f[1], nil
		}
	}
	return "", nil
}

// ConnectAddr runs `adb connect addr` (a Device's Addr, or a port forwarded
// to one) and waits until the server lists it as "device" (bounded polling,
// no fixed sleeps).
//
// A closed device's port can be handed to a new one by the kernel; the server
// then still holds the old transport, offline and backing off, and `adb
// connect` only says "already connected". That stale entry is dropped first.
// The server may also drop the new transport just after connecting it (seen
// on a loaded machine: "connected to", then no longer listed): connecting is
// then tried again, three times in all.
func (s *Server) ConnectAddr(addr string) error {
	var st string
	for range 3 {
		var err error
		if st, err = s.connectOnce(addr); err != nil || st == "device" {
			return err
		}
	}
	return fmt.Errorf("device %s did not come online (state %q)", addr, st)
}

// connectOnce connects addr and polls its state until it is "device",
// gone from the list after having been listed, or 5 s have passed; it
// returns the last state.
func (s *Server) connectOnce(addr string) (string, error) {
	out, err := s.Adb("connect", addr)
	if err == nil && strings.Contains(out, "already connected") {
		if st, _ := s.State(addr); st != "device" {
			if _, err := s.Adb("disconnect", addr); err != nil {
				return "", err
			}
			out, err = s.Adb("connect", addr)
		}
	}
	if err != nil || !strings.Contains(out, "connected to") {
		return "", fmt.Errorf("adb connect %s: %v: %s", addr, err, out)
	}
	listed := false
	for i := 0; i < 200; i++ {
		st, err := s.State(addr)
		if err != nil {
			return "", fmt.Errorf("adb devices: %w", err)
		}
		switch {
		case st == "device":
			return st, nil
		case st != "":
			listed = true
		case listed:
			return st, nil // dropped after connecting
		}
		time.Sleep(25 * time.Millisecond)
	}
	return s.State(addr)
}

// WaitGone polls until the server no longer lists serial as "device".
func (s *Server) WaitGone(serial string) error {
	for i := 0; i < 400; i++ {
		st, err := s.State(serial)
		if err != nil {
			return err
		}
		if st != "device" {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return errors.New("device " + serial + " still online")
}

// Adb runs the adb command line against this server (e.g. "-s", serial,
// "pull", ...) and returns its combined output.
func (s *Server) Adb(args ...string) (string, error) {
	cmd := exec.Command(s.bin, append([]string{"-P", strconv.Itoa(s.Port)}, args...)...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("adb %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
