package runtime

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// errBadFrame marks a frame header that no correct peer sends.
var errBadFrame = errors.New("bad frame")

// Frame kinds.
const (
	kindJSON   byte = 'J'
	kindStdout byte = 'O'
	kindStderr byte = 'E'
)

// MaxFrame is the largest frame payload either side accepts.
const MaxFrame = 64 << 20

// MaxCallData is the largest arguments or result one host call carries: a
// frame less room for the call's other fields, so that data over it fails
// the call with a clear error instead of breaking the frame.
const MaxCallData = MaxFrame - 1<<20

const headerSize = 5

// appendFrame appends one frame to b.
func appendFrame(b []byte, kind byte, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, kind)
	return append(b, payload...)
}

// readFrame reads one frame. The payload is freshly allocated.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	kind := hdr[4]
	if kind != kindJSON && kind != kindStdout && kind != kindStderr {
		return 0, nil, fmt.Errorf("%w: kind %#x", errBadFrame, kind)
	}
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes exceed the %d byte limit", errBadFrame, n, MaxFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return kind, payload, nil
}
