package fakephone

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
)

// syncChunk is the largest DATA block adbd sends in a RECV.
const syncChunk = 64 * 1024

// serveSync answers the file-sync protocol on st: requests are a 4-byte id,
// a little-endian uint32 length and that many bytes; RECV answers with DATA
// blocks and DONE, STAT with mode/size/mtime, LIST with DENT entries, SEND
// takes DATA blocks until DONE, QUIT ends the session.
func (d *Device) serveSync(st *stream) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(st, hdr[:]); err != nil {
			return
		}
		id := string(hdr[:4])
		n := binary.LittleEndian.Uint32(hdr[4:])
		if id == "QUIT" {
			return
		}
		if n > 1024 {
			_ = syncFail(st, "path too long")
			return
		}
		arg := make([]byte, n)
		if _, err := io.ReadFull(st, arg); err != nil {
			return
		}
		var err error
		switch id {
		case "STAT":
			err = d.syncStat(st, string(arg))
		case "RECV":
			err = d.syncRecv(st, string(arg))
		case "LIST":
			err = d.syncList(st, string(arg))
		case "SEND":
			err = d.syncSend(st, string(arg))
		default:
			_ = syncFail(st, fmt.Sprintf("unknown sync command %q", id))
			return
		}
		if err != nil {
			return
		}
	}
}

func syncFrame(id string, n uint32, data []byte) []byte {
	b := make([]byte, 8, 8+len(data))
	copy(b, id)
	binary.LittleEndian.PutUint32(b[4:], n)
	return append(b, data...)
}

func syncFail(st *stream, msg string) error {
	_, err := st.Write(syncFrame("FAIL", uint32(len(msg)), []byte(msg)))
	return err
}

func (d *Device) file(path string) (deviceFile, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[path]
	return f, ok
}

func (d *Device) syncStat(st *stream, path string) error {
	b := make([]byte, 16)
	copy(b, "STAT")
	if f, ok := d.file(path); ok {
		binary.LittleEndian.PutUint32(b[4:], f.mode)
		binary.LittleEndian.PutUint32(b[8:], uint32(len(f.data)))
		binary.LittleEndian.PutUint32(b[12:], f.mtime)
	}
	// A missing file is all zeros, as adbd reports it.
	_, err := st.Write(b)
	return err
}

func (d *Device) syncRecv(st *stream, path string) error {
	f, ok := d.file(path)
	if !ok {
		return syncFail(st, "No such file or directory")
	}
	data := f.data
	for len(data) > 0 {
		n := min(len(data), syncChunk)
		if _, err := st.Write(syncFrame("DATA", uint32(n), data[:n])); err != nil {
			return err
		}
		data = data[n:]
	}
	_, err := st.Write(syncFrame("DONE", 0, nil))
	return err
}

func (d *Device) syncList(st *stream, dir string) error {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	d.mu.Lock()
	var names []string
	for p := range d.files {
		if strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	entries := make([]deviceFile, len(names))
	for i, p := range names {
		entries[i] = d.files[p]
	}
	d.mu.Unlock()
	for i, p := range names {
		name := p[len(prefix):]
		b := make([]byte, 20, 20+len(name))
		copy(b, "DENT")
		binary.LittleEndian.PutUint32(b[4:], entries[i].mode)
		binary.LittleEndian.PutUint32(b[8:], uint32(len(entries[i].data)))
		binary.LittleEndian.PutUint32(b[12:], entries[i].mtime)
		binary.LittleEndian.PutUint32(b[16:], uint32(len(name)))
		if _, err := st.Write(append(b, name...)); err != nil {
			return err
		}
	}
	done := make([]byte, 20)
	copy(done, "DONE")
	_, err := st.Write(done)
	return err
}

func (d *Device) syncSend(st *stream, arg string) error {
	path, mode := arg, uint32(0o100644)
	if i := strings.LastIndexByte(arg, ','); i >= 0 {
		path = arg[:i]
		var m uint32
		if _, err := fmt.Sscanf(arg[i+1:], "%d", &m); err == nil {
			mode = m
		}
	}
	var data []byte
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(st, hdr[:]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint32(hdr[4:])
		switch string(hdr[:4]) {
		case "DATA":
			if n > syncChunk {
				return syncFail(st, "data block too large")
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(st, buf); err != nil {
				return err
			}
			data = append(data, buf...)
		case "DONE":
			d.mu.Lock()
			d.files[path] = deviceFile{data: data, mode: mode, mtime: n}
			d.mu.Unlock()
			_, err := st.Write(syncFrame("OKAY", 0, nil))
			return err
		default:
			return syncFail(st, "expected DATA or DONE")
		}
	}
}
