package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// fakeZygote runs behave as the zygote's side of the channel, after a ready
// frame, and reports whether the Runner asked to kill the sandbox.
func fakeZygote(t *testing.T, opts Options, behave func(in *bufio.Reader, out io.Writer)) (*Runner, *atomic.Bool) {
	t.Helper()
	hzR, hzW := io.Pipe()
	zhR, zhW := io.Pipe()
	killed := new(atomic.Bool)
	opts.Kill = func() {
		killed.Store(true)
		zhW.CloseWithError(errors.New("killed"))
		hzR.CloseWithError(errors.New("killed"))
	}
	go func() {
		_, _ = zhW.Write(appendFrame(nil, kindJSON, []byte(`{"op":"ready","protocol":1}`)))
		behave(bufio.NewReader(hzR), zhW)
	}()
	r := NewRunner(hzW, zhR, opts)
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return r, killed
}

// readExec reads frames until an exec frame and returns its id.
func readExec(in *bufio.Reader) string {
	for {
		kind, data, err := readFrame(in)
		if err != nil {
			return ""
		}
		var m struct{ Op, ID string }
		if kind == kindJSON && json.Unmarshal(data, &m) == nil && m.Op == "exec" {
			return m.ID
		}
	}
}

func TestMisbehavingZygote(t *testing.T) {
	tests := []struct {
		name    string
		behave  func(in *bufio.Reader, out io.Writer)
		errType string
		timeout bool
	}{
		{name: "silent", behave: func(in *bufio.Reader, _ io.Writer) {
			readExec(in)
			_, _ = io.Copy(io.Discard, in)
		}, errType: "Timeout", timeout: true},
		{name: "garbage", behave: func(in *bufio.Reader, out io.Writer) {
			readExec(in)
			_, _ = out.Write([]byte("this is not a frame at all"))
		}, errType: "Killed"},
		{name: "invalid json", behave: func(in *bufio.Reader, out io.Writer) {
			readExec(in)
			_, _ = out.Write(appendFrame(nil, kindJSON, []byte("{nope")))
		}, errType: "Killed"},
		{name: "oversized frame", behave: func(in *bufio.Reader, out io.Writer) {
			readExec(in)
			_, _ = out.Write([]byte{0xff, 0xff, 0xff, 0xff, 'O'})
		}, errType: "Killed"},
		{name: "output beyond limit", behave: func(in *bufio.Reader, out io.Writer) {
			readExec(in)
			for {
				if _, err := out.Write(appendFrame(nil, kindStdout, make([]byte, 4096))); err != nil {
					return
				}
			}
		}, errType: "Killed"},
		{name: "exits", behave: func(in *bufio.Reader, out io.Writer) {
			readExec(in)
			out.(*io.PipeWriter).Close()
		}, errType: "Killed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, killed := fakeZygote(t, Options{Grace: 100 * time.Millisecond, OutputLimit: 10000}, tc.behave)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := r.Exec(ctx, sandbox.ExecRequest{Code: "x", Timeout: 100 * time.Millisecond}, &recHost{})
			if err != nil {
				t.Fatal(err)
			}
			if res.SandboxOK || res.Error == nil || res.Error.Type != tc.errType || res.TimedOut != tc.timeout {
				t.Errorf("result %+v (error %+v)", res, res.Error)
			}
			if tc.name != "exits" && !killed.Load() {
				t.Errorf("sandbox not killed")
			}
			if _, err := r.Exec(ctx, sandbox.ExecRequest{Code: "x"}, &recHost{}); !errors.Is(err, pluginapi.ErrUnavailable) {
				t.Errorf("second exec: %v", err)
			}
		})
	}
}

func TestStaleFramesDropped(t *testing.T) {
	r, killed := fakeZygote(t, Options{}, func(in *bufio.Reader, out io.Writer) {
		id := readExec(in)
		// A result of some other execution first, then the real one.
		_, _ = out.Write(appendFrame(nil, kindJSON, []byte(`{"op":"result","id":"x999","exit_code":9,"clean":true}`)))
		b, _ := json.Marshal(map[string]any{"op": "result", "id": id, "exit_code": 0, "clean": true, "result": map[string]int{"n": 1}})
		_, _ = out.Write(appendFrame(nil, kindJSON, b))
		_, _ = io.Copy(io.Discard, in)
	})
	res, err := r.Exec(context.Background(), sandbox.ExecRequest{Code: "x"}, &recHost{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Result) != `{"n":1}` || !res.SandboxOK || killed.Load() {
		t.Errorf("result %+v", res)
	}
}

func TestProgramTooLarge(t *testing.T) {
	r, killed := fakeZygote(t, Options{}, func(in *bufio.Reader, _ io.Writer) { _, _ = io.Copy(io.Discard, in) })
	_, err := r.Exec(context.Background(), sandbox.ExecRequest{Code: strings.Repeat("\x01", MaxFrame/4)}, &recHost{})
	if !errors.Is(err, pluginapi.ErrInvalidArgument) || killed.Load() || !r.Healthy() {
		t.Errorf("exec: %v (killed %v)", err, killed.Load())
	}
}
