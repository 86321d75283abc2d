package jqworker

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodeValue: whatever comes back from a worker, decoding it does not
// panic, and a value it gives is one that encodes and decodes to itself,
// as the next evaluation's input would.
func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{`null`, `1`, `-0`, `1.5e300`, `123456789012345678901234567890`, `"x"`, `[1,{"a":[]}]`,
		`{"a":1}{"b":2}`, `[`, `1e999`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeValue(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := encodeValue(&buf, v); err != nil {
			t.Fatalf("decoded %q to %#v, which does not encode: %v", b, v, err)
		}
		again, err := decodeValue(buf.Bytes())
		if err != nil {
			t.Fatalf("%q encodes to %q, which does not decode: %v", b, buf.Bytes(), err)
		}
		var buf2 bytes.Buffer
		if err := encodeValue(&buf2, again); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("%q: encoded %q, then %q (%v)", b, buf.Bytes(), buf2.Bytes(), err)
		}
	})
}

// FuzzReadFrame: a frame reader fed anything neither panics nor gives more
// than its maximum, and reads back what writeFrame wrote.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c'}, uint16(8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(8))
	f.Add([]byte{0, 0, 0, 9, 'a'}, uint16(64))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		got, err := readFrame(bufio.NewReader(bytes.NewReader(in)), int(max), nil)
		if err == nil && len(got) > int(max) {
			t.Fatalf("a frame of %d bytes over the maximum %d", len(got), max)
		}
		var framed bytes.Buffer
		w := bufio.NewWriter(&framed)
		if err := writeFrame(w, in); err != nil {
			t.Fatal(err)
		}
		back, err := readFrame(bufio.NewReader(&framed), len(in), nil)
		if err != nil || !reflect.DeepEqual(append([]byte{}, back...), append([]byte{}, in...)) {
			t.Fatalf("wrote %q, read %q (%v)", in, back, err)
		}
	})
}
