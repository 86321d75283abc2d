// Package jqworker evaluates workflow jq expressions in worker processes.
//
// Expressions are written by tenants, and one jq step can allocate
// gigabytes at once (`"x" * 1e9`, `.[5e8] = 1`) or run for long without
// returning to gojq's checks of its context. In cexecd itself that could
// exhaust the daemon that serves every tenant; in a worker it meets a hard
// memory bound and a kill, and fails only its own evaluation.
//
// A worker is cexecd's own binary started with the hidden first argument
// Flag: cmd/cexecd, and the TestMain of every test binary that evaluates
// expressions, call Main first thing when Requested says so.
package jqworker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
)

// Flag, as the first argument, makes the binary a worker. It looks like a
// flag so that a binary that does not dispatch on it (a test binary
// without the TestMain hook) refuses it at once instead of running.
const Flag = "-cexec-jq-worker"

// MemoryLimit is how much a worker may grow by: address space past what it
// maps at start (RLIMIT_AS, see limitMemory), Go's heap included. Reshaping JSON documents of
// the size tool calls return (16 MiB at most by default, see MaxResult)
// takes a few times their size; 256 MiB leaves room for that while a pool
// of Size workers stays within 1 GiB.
const MemoryLimit = 256 << 20

// MaxResult bounds the JSON of one expression's result: the default cap of
// one tool call's result (sandbox.limits max_result_size), the largest
// value workflows otherwise take in.
const MaxResult = 16 << 20

// maxCached bounds a worker's compiled programs; past it the cache starts
// again, so that a long-lived worker does not grow with every tenant's
// distinct expressions.
const maxCached = 1024

// Requested reports whether this process was started as a worker.
func Requested() bool {
	return len(os.Args) > 1 && os.Args[1] == Flag
}

// Main serves evaluations on stdin and stdout until stdin closes and
// returns the exit status. Stdout carries only the protocol; what the
// worker has to say goes to stderr.
func Main() int {
	if err := limitMemory(MemoryLimit); err != nil {
		fmt.Fprintf(os.Stderr, "jq worker: %v\n", err)
		return 1
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	os.Stdout = os.Stderr
	if err := writeFrame(out, []byte{answerReady}); err != nil {
		fmt.Fprintf(os.Stderr, "jq worker: say ready: %v\n", err)
		return 1
	}
	c := &compiled{code: map[string]*gojq.Code{}}
	for {
		req, err := readFrame(in, math.MaxInt32, nil)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "jq worker: read a request: %v\n", err)
			return 1
		}
		kind, body := c.eval(req)
		if err := writeFrame(out, []byte{kind}, body); err != nil {
			fmt.Fprintf(os.Stderr, "jq worker: write an answer: %v\n", err)
			return 1
		}
	}
}

// compiled holds the worker's programs, compiled once per program and
// variable set.
type compiled struct {
	code map[string]*gojq.Code
}

func (c *compiled) compile(src string, names []string) (*gojq.Code, error) {
	key := strings.Join(names, ",") + "\x00" + src
	if code, ok := c.code[key]; ok {
		return code, nil
	}
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, err
	}
	dollar := make([]string, len(names))
	for i, n := range names {
		dollar[i] = "$" + n
	}
	code, err := gojq.Compile(q, gojq.WithVariables(dollar))
	if err != nil {
		return nil, err
	}
	if len(c.code) >= maxCached {
		clear(c.code)
	}
	c.code[key] = code
	return code, nil
}

// eval runs one request (see encodeRequest) and returns its answer.
func (c *compiled) eval(req []byte) (byte, []byte) {
	d := json.NewDecoder(bytes.NewReader(req))
	d.UseNumber()
	var hdr header
	if err := d.Decode(&hdr); err != nil {
		return answerError, []byte("bad request: " + err.Error())
	}
	code, err := c.compile(hdr.Src, hdr.Names)
	if err != nil {
		return answerError, []byte(err.Error())
	}
	values := make([]any, 1+len(hdr.Names))
	for i := range values {
		if err := d.Decode(&values[i]); err != nil {
			return answerError, []byte("bad request: " + err.Error())
		}
		values[i] = numbers(values[i])
	}
	it := code.Run(values[0], values[1:]...)
	v, ok := it.Next()
	if !ok {
		return answerNone, nil
	}
	if err, ok := v.(error); ok {
		return answerError, []byte(err.Error())
	}
	b, err := gojq.Marshal(v)
	if err != nil {
		return answerError, []byte(err.Error())
	}
	if len(b) > MaxResult {
		return answerTooLarge, []byte(strconv.Itoa(len(b)))
	}
	return answerValue, b
}
