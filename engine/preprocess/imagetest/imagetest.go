// Package imagetest builds hostile images for tests of the decoders and of
// the commands that read screens.
package imagetest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
)

// PNGChunk is one PNG chunk: length, type, data, CRC.
func PNGChunk(typ string, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// HostilePNG is a well-formed PNG whose header claims w x h 8-bit RGBA
// pixels, followed by n bytes of zero rows (compressed; none when n is 0)
// and IEND: what a tiny "decompression bomb" looks like.
func HostilePNG(w, h uint32, n int) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA, no interlace
	out := append([]byte("\x89PNG\r\n\x1a\n"), PNGChunk("IHDR", ihdr)...)
	if n > 0 {
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(make([]byte, n))
		zw.Close()
		out = append(out, PNGChunk("IDAT", z.Bytes())...)
	}
	return append(out, PNGChunk("IEND", nil)...)
}
