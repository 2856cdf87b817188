package fakephone

import (
	"encoding/binary"
	"fmt"
	"io"
)

// ADB transport commands: four ASCII bytes read as a little-endian uint32.
const (
	cmdSYNC uint32 = 0x434e5953
	cmdCNXN uint32 = 0x4e584e43
	cmdAUTH uint32 = 0x48545541
	cmdOPEN uint32 = 0x4e45504f
	cmdOKAY uint32 = 0x59414b4f
	cmdCLSE uint32 = 0x45534c43
	cmdWRTE uint32 = 0x45545257
	cmdSTLS uint32 = 0x534c5453
)

// Protocol versions. From versionSkipChecksum on, neither side fills in or
// checks data_check; before it, every message carries the byte sum of its
// payload.
const (
	versionMin          uint32 = 0x01000000
	versionSkipChecksum uint32 = 0x01000001
)

// maxPayloadV1 is what pre-2016 peers accept; a device may advertise more,
// and the effective limit is the smaller of both sides' CNXN values.
const maxPayloadV1 = 4 * 1024

const headerSize = 24

type message struct {
	command    uint32
	arg0, arg1 uint32
	payload    []byte
}

func commandName(c uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], c)
	for _, x := range b {
		if x < 'A' || x > 'Z' {
			return fmt.Sprintf("0x%08x", c)
		}
	}
	return string(b[:])
}

func (m message) String() string {
	return fmt.Sprintf("%s(%d, %d, %d bytes)", commandName(m.command), m.arg0, m.arg1, len(m.payload))
}

func checksum(p []byte) uint32 {
	var s uint32
	for _, b := range p {
		s += uint32(b)
	}
	return s
}

// encode frames m; withChecksum fills data_check as pre-0x01000001 peers expect.
func (m message) encode(withChecksum bool) []byte {
	buf := make([]byte, headerSize+len(m.payload))
	binary.LittleEndian.PutUint32(buf[0:], m.command)
	binary.LittleEndian.PutUint32(buf[4:], m.arg0)
	binary.LittleEndian.PutUint32(buf[8:], m.arg1)
	binary.LittleEndian.PutUint32(buf[12:], uint32(len(m.payload)))
	if withChecksum {
		binary.LittleEndian.PutUint32(buf[16:], checksum(m.payload))
	}
	binary.LittleEndian.PutUint32(buf[20:], m.command^0xffffffff)
	copy(buf[headerSize:], m.payload)
	return buf
}

// readMessage reads one message, checking the magic, the payload limit and,
// when verify is set, the checksum.
func readMessage(r io.Reader, maxPayload uint32, verify bool) (message, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return message{}, err
	}
	m := message{
		command: binary.LittleEndian.Uint32(h[0:]),
		arg0:    binary.LittleEndian.Uint32(h[4:]),
		arg1:    binary.LittleEndian.Uint32(h[8:]),
	}
	n := binary.LittleEndian.Uint32(h[12:])
	sum := binary.LittleEndian.Uint32(h[16:])
	magic := binary.LittleEndian.Uint32(h[20:])
	if magic != m.command^0xffffffff {
		return message{}, fmt.Errorf("bad magic 0x%08x for command %s", magic, commandName(m.command))
	}
	if n > maxPayload {
		return message{}, fmt.Errorf("%s payload of %d bytes exceeds the %d-byte limit", commandName(m.command), n, maxPayload)
	}
	m.payload = make([]byte, n)
	if _, err := io.ReadFull(r, m.payload); err != nil {
		return message{}, fmt.Errorf("read %s payload: %w", commandName(m.command), err)
	}
	if verify && checksum(m.payload) != sum {
		return message{}, fmt.Errorf("%s checksum 0x%08x, payload sums to 0x%08x", commandName(m.command), sum, checksum(m.payload))
	}
	return m, nil
}
