package jqworker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"

	"github.com/itchyny/gojq"
)

// The wire between cexecd and a worker is one frame each way per
// evaluation, over the worker's stdin and stdout: a 4-byte big-endian
// length, then that many bytes. A request is JSON values (encodeRequest); an
// answer is one kind byte and its body. A worker opens with a ready frame
// once its memory is limited, before it reads any request.
const (
	answerReady    = 'r' // the worker is up; no body
	answerValue    = 'v' // body: the first result, as JSON
	answerNone     = 'n' // no result; no body
	answerError    = 'e' // body: jq's error text
	answerTooLarge = 'b' // body: the result's size in bytes, in decimal
)

// header opens a request; the input follows it, then the value of each
// name, each a JSON value of its own.
type header struct {
	Src   string   `json:"src"`
	Names []string `json:"names"`
}

// encodeRequest is one evaluation: a jq program, the variables it is
// compiled with (names without the $, sorted), the input and the
// variables' values.
func encodeRequest(src string, names []string, data any, vals []any) ([]byte, error) {
	hdr, err := json.Marshal(header{Src: src, Names: names})
	if err != nil {
		return nil, err
	}
	b := bytes.NewBuffer(hdr)
	if err := encodeValue(b, data); err != nil {
		return nil, fmt.Errorf("its input: %w", err)
	}
	for i, v := range vals {
		if err := encodeValue(b, v); err != nil {
			return nil, fmt.Errorf("$%s: %w", names[i], err)
		}
	}
	return b.Bytes(), nil
}

// encodeValue appends v as JSON and a newline: with gojq's encoder, which
// knows jq's types and is several times faster than encoding/json's
// reflection, and with encoding/json for a value holding other Go types
// (gojq's panics on them).
func encodeValue(b *bytes.Buffer, v any) (err error) {
	n := b.Len()
	func() {
		defer func() {
			if recover() != nil {
				b.Truncate(n)
				var j []byte
				if j, err = json.Marshal(v); err == nil {
					b.Write(j)
				}
			}
		}()
		j, _ := gojq.Marshal(v)
		b.Write(j)
	}()
	b.WriteByte('\n')
	return err
}

func writeFrame(w *bufio.Writer, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("frame of %d bytes is too large", n)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return w.Flush()
}

// errFrameTooLarge: a frame is longer than the reader accepts; the stream
// is not read further.
type errFrameTooLarge struct{ size uint32 }

func (e errFrameTooLarge) Error() string { return fmt.Sprintf("frame of %d bytes", e.size) }

// readFrame reads one frame of at most max bytes into buf's storage.
func readFrame(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, errFrameTooLarge{n}
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// decodeValue decodes JSON into the types gojq works on and gives back:
// numbers become int when they are integers that fit, float64 when written
// with a fraction or exponent, *big.Int when larger — gojq's own reading of
// JSON numbers, so a result has the Go type it had when jq ran in cexecd
// (length is an int, 1.5 a float64).
func decodeValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		return number(t)
	case map[string]any:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	}
	return v
}

// number is gojq's parseNumber.
func number(n json.Number) any {
	if i, err := n.Int64(); err == nil && math.MinInt <= i && i <= math.MaxInt {
		return int(i)
	}
	s := n.String()
	if strings.ContainsAny(s, ".eE") {
		if f, err := n.Float64(); err == nil {
			if f == 0 {
				// -0 would come back from the next evaluation as 0 (an
				// integer): zero has one sign here, so values read the
				// same however often they pass through a worker.
				return 0.0
			}
			return f
		}
	}
	if b, ok := new(big.Int).SetString(s, 10); ok {
		return b
	}
	if strings.HasPrefix(s, "-") {
		return math.Inf(-1)
	}
	return math.Inf(1)
}
