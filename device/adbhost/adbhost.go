// Package adbhost is the framing of the adb server's host protocol, shared
// by the device client and the test server helpers: a request is its length
// as 4 hex digits then its bytes; the server answers OKAY or FAIL, and
// strings (FAIL messages, host query payloads) come length-prefixed the same
// way.
package adbhost

import (
	"fmt"
	"io"
	"strconv"
)

// WriteRequest sends one length-prefixed request.
func WriteRequest(w io.Writer, req string) error {
	_, err := fmt.Fprintf(w, "%04x%s", len(req), req)
	return err
}

// ReadStatus reads the server's 4-byte answer: "OKAY", "FAIL" or anything
// else (a protocol error the caller reports).
func ReadStatus(r io.Reader) (string, error) {
	var status [4]byte
	if _, err := io.ReadFull(r, status[:]); err != nil {
		return "", err
	}
	return string(status[:]), nil
}

// ReadString reads one length-prefixed string.
func ReadString(r io.Reader) (string, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", err
	}
	n, err := strconv.ParseUint(string(l[:]), 16, 32)
	if err != nil {
		return "", fmt.Errorf("adb host protocol: bad length %q", l[:])
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return string(b), err
}
