package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// current is the file lines are appended to.
const current = "audit.jsonl"

// rotatedName is the name a full current file takes: its first seq,
// zero-padded so that names sort in chain order.
func rotatedName(firstSeq uint64) string {
	return fmt.Sprintf("audit-%020d.jsonl", firstSeq)
}

// chainFiles lists the log's files in chain order: rotated ones, then the
// current one when it exists.
func chainFiles(dir *os.Root) ([]string, error) {
	d, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var rotated []string
	hasCurrent := false
	for _, n := range names {
		switch {
		case n == current:
			hasCurrent = true
		case strings.HasPrefix(n, "audit-") && strings.HasSuffix(n, ".jsonl"):
			if _, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(n, "audit-"), ".jsonl"), 10, 64); err == nil {
				rotated = append(rotated, n)
			}
		}
	}
	slices.Sort(rotated)
	if hasCurrent {
		rotated = append(rotated, current)
	}
	return rotated, nil
}

// tailWindow is how much of a file's end is read to find its last line;
// lines are far shorter (Reason is capped).
const tailWindow = 64 << 10

// lastLine returns the last complete line of name (without its newline),
// the offset where complete lines end (a torn line after it is a crash's)
// and the file's size. A missing or empty file has no line.
func lastLine(dir *os.Root, name string) (line []byte, end, size int64, err error) {
	f, err := dir.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	size = fi.Size()
	off := max(0, size-tailWindow)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, 0, err
	}
	nl := bytes.LastIndexByte(buf, '\n')
	if nl < 0 {
		return nil, off, size, nil
	}
	end = off + int64(nl) + 1
	body := buf[:nl]
	start := bytes.LastIndexByte(body, '\n') + 1
	return body[start:], end, size, nil
}

// firstSeqOf reads the seq of a file's first line, 0 when it has none.
func firstSeqOf(dir *os.Root, name string) uint64 {
	f, err := dir.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, tailWindow)
	n, _ := io.ReadFull(f, buf)
	line, _, ok := bytes.Cut(buf[:n], []byte("\n"))
	if !ok {
		return 0
	}
	d, err := decode(line)
	if err != nil {
		return 0
	}
	return d.seq
}
