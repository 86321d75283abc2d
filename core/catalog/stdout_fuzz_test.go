package catalog

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzStdoutWatch: whatever a stdio server writes, and however the reads
// cut it, the watch passes every byte on unchanged, reports at most one
// stray per line, and never a line that is a JSON-RPC message.
func FuzzStdoutWatch(f *testing.F) {
	f.Add([]byte("Server ready\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"), uint16(16))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"v\":NaN}}\r\n\n  \nbye"), uint16(4096))
	f.Add([]byte("{\"x\":\"\"}\n{'jsonrpc': 1}\n"), uint16(17))
	f.Fuzz(func(t *testing.T, in []byte, size uint16) {
		var strays [][]byte
		w := &stdoutWatch{src: bufio.NewReaderSize(bytes.NewReader(in), int(size)), onStray: func(l []byte) {
			strays = append(strays, append([]byte{}, l...))
		}}
		out, err := io.ReadAll(w)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("passed on %q (%v), want %q", out, err, in)
		}
		if lines := bytes.Count(in, []byte("\n")) + 1; len(strays) > lines {
			t.Fatalf("%d strays from %d lines", len(strays), lines)
		}
		for _, s := range strays {
			if !stray(s) && len(s) < 4096 {
				t.Fatalf("reported %q, which is a JSON-RPC message", s)
			}
		}
	})
}
