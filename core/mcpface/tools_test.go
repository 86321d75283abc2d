package mcpface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi"
)

func TestToolsList(t *testing.T) {
	tests := []struct {
		name  string
		tasks bool
		want  []string
	}{
		{"with a code generator", true, []string{
			ToolCallTool, ToolExecuteCode, ToolExecuteTask, ToolListTools, ToolSearchTools, ToolSkills, ToolState, ToolWorkflow}},
		{"without one, no execute_task", false, []string{
			ToolCallTool, ToolExecuteCode, ToolListTools, ToolSearchTools, ToolSkills, ToolState, ToolWorkflow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, func(o *Options, _ *world) {
				if !tt.tasks {
					o.Tasks = nil
				}
			})
			c := connect(t, w.url+"/mcp")
			res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tool := range res.Tools {
				got = append(got, tool.Name)
				if tool.Description == "" {
					t.Errorf("%s has no description", tool.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("tools = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestExecuteCodeSessionDescribed: the session argument says what a
// session is for, that a new name starts one and what omitting it does, as
// an agent cannot tell from a bare string.
func TestExecuteCodeSessionDescribed(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != ToolExecuteCode {
			continue
		}
		prop, _ := tool.InputSchema.Properties["session"].(map[string]any)
		desc, _ := prop["description"].(string)
		for _, s := range []string{"log", "a new name starts one", "Default: this connection's"} {
			if !strings.Contains(desc, s) {
				t.Errorf("session's description %q lacks %q", desc, s)
			}
		}
		return
	}
	t.Fatal("no execute_code in tools/list")
}

// TestTools drives every tool through a real client, good calls and bad
// ones; failures must be isError results that say what to do.
func TestTools(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		want    []string // substrings of the text
		notWant []string
	}{
		{"search by words", ToolSearchTools, map[string]any{"query": "sum of two numbers"}, false,
			[]string{"everything/get-sum: Returns the sum of two numbers"}, nil},
		{"search names only", ToolSearchTools, map[string]any{"query": "sum numbers", "detail_level": "name", "limit": 1}, false,
			[]string{"everything/get-sum\n"}, []string{"Returns"}},
		{"search full", ToolSearchTools, map[string]any{"query": "sum numbers", "detail_level": "full", "limit": 1}, false,
			[]string{"servers.everything.get_sum(*, a: float, b: float) -> Any\n  Returns the sum", "\n-> Any: the result's text, JSON-decoded when it is JSON\n"}, []string{"everything/get-sum", "import"}},
		{"search full has the return shape", ToolSearchTools, map[string]any{"query": "search nodes knowledge graph", "detail_level": "full", "limit": 1}, false,
			[]string{"servers.memory.search_nodes(*, query: str) -> {entities: list[{entityType: str, name: str, observations: list[str]}], relations: list[{from: str, relationType: str, to: str}]}\n"},
			[]string{"SearchNodesResult", "-> Any"}},
		{"search nothing found", ToolSearchTools, map[string]any{"query": "zzzqqq"}, false, []string{"No tools match"}, nil},
		{"search empty query", ToolSearchTools, map[string]any{"query": "  "}, true, []string{"query is empty"}, nil},
		{"search bad detail", ToolSearchTools, map[string]any{"query": "sum", "detail_level": "all"}, true, nil, nil},
		{"search limit too high", ToolSearchTools, map[string]any{"query": "sum", "limit": 500}, true, nil, nil},
		{"list servers", ToolListTools, nil, false,
			[]string{"everything (servers.everything): 13 tools, connected", "memory (servers.memory)"}, nil},
		{"server tools", ToolListTools, map[string]any{"server": "memory"}, false,
			[]string{"memory: 9 tools", "read_graph: "}, nil},
		{"server tools by package name", ToolListTools, map[string]any{"server": "servers.everything"}, false,
			[]string{"get-sum: Returns the sum"}, nil},
		{"unknown server lists known ones", ToolListTools, map[string]any{"server": "github"}, true,
			[]string{`unknown server "github"; known servers: everything, memory`}, nil},
		{"get tool by MCP name", ToolListTools, map[string]any{"server": "everything", "tool": "get-sum"}, false,
			[]string{"from servers.everything import get_sum\n\n", "def get_sum(*, a: float, b: float) -> Any:", "Args:\n        a: First number"},
			[]string{"call_tool", "Code generated", "__all__", "from typing"}},
		{"get tool by Python name", ToolListTools, map[string]any{"server": "everything", "tool": "get_sum"}, false,
			[]string{"def get_sum("}, nil},
		{"tool typo gets a suggestion", ToolListTools, map[string]any{"server": "everything", "tool": "get-summ"}, true,
			[]string{`did you mean "get-sum"?`}, nil},
		{"unknown tool", ToolListTools, map[string]any{"server": "everything", "tool": "launch_rockets"}, true,
			[]string{`has no tool "launch_rockets"`, `list_tools("everything")`}, nil},
		{"tool without its server", ToolListTools, map[string]any{"tool": "get_sum"}, true, []string{"needs its server"}, nil},
		{"execute", ToolExecuteCode, map[string]any{"code": "print(1+1)"}, false, []string{"2\n"}, []string{"ok in", " ms"}},
		{"execute with a misspelt argument", ToolExecuteCode, map[string]any{"code": "print(1+1)", "sesion": "a"}, true,
			[]string{`execute_code: unexpected argument "sesion"; execute_code takes code, persistent, session`}, []string{"2\n"}},
		{"execute persistent", ToolExecuteCode, map[string]any{"code": "x = 41", "persistent": true}, false, []string{"(no output)"}, nil},
		{"the next persistent program has its globals", ToolExecuteCode, map[string]any{"code": "print(x + 1)", "persistent": true}, false,
			[]string{"42\n"}, nil},
		{"a program not persistent does not", ToolExecuteCode, map[string]any{"code": "print('x' in globals())"}, false,
			[]string{"False\n"}, nil},
		{"persistent false is not persistent", ToolExecuteCode, map[string]any{"code": "print('x' in globals())", "persistent": false}, false,
			[]string{"False\n"}, nil},
		{"list with two unknown arguments", ToolListTools, map[string]any{"servers": "x", "limit": 3}, true,
			[]string{`list_tools: unexpected arguments "limit", "servers"; list_tools takes server, tool`}, nil},
		{"execute empty", ToolExecuteCode, map[string]any{"code": ""}, true, []string{"code is empty"}, nil},
		{"execute silent", ToolExecuteCode, map[string]any{"code": "x = 1"}, false, []string{"(no output)"}, nil},
		{"execute exception", ToolExecuteCode, map[string]any{"code": "print('before')\n1/0"}, true,
			[]string{"before\nTraceback", "ZeroDivisionError: division by zero"}, []string{"[error]", " ms"}},
		{"execute result", ToolExecuteCode, map[string]any{"code": "import cexec\ncexec.result({'n': 3})"}, false,
			[]string{`[result] {"n":3}`}, []string{"no output"}},
		{"execute stderr", ToolExecuteCode, map[string]any{"code": "import sys\nprint('warn', file=sys.stderr)"}, false,
			[]string{"[stderr]\nwarn\n"}, nil},
		{"execute bad session", ToolExecuteCode, map[string]any{"code": "print(1)", "session": "../x"}, true, []string{"invalid session"}, nil},
		{"tool call to a server that is down", ToolExecuteCode, map[string]any{"code": "from servers.memory import read_graph\nread_graph()"}, true,
			[]string{"read_graph()\ncexec.ToolError: server memory is not connected"}, []string{"cexec/__init__.py", "tool call"}},
		{"task", ToolExecuteTask, map[string]any{"task_description": "say hi"}, false,
			[]string{"SAY HI\n"}, []string{"```python"}},
		{"task with its code", ToolExecuteTask, map[string]any{"task_description": "say hi", "show_code": true}, false,
			[]string{"```python\n", "SAY HI\n"}, nil},
		{"state list empty", ToolState, nil, false, []string{"No state saved yet"}, nil},
		{"state bad name", ToolState, map[string]any{"name": "x.pkl", "value": 1}, true, []string{"must end in .json"}, nil},
		{"state save", ToolState, map[string]any{"name": "p.json", "value": map[string]any{"done": 3}}, false, []string{"Saved p.json (10 bytes)"}, nil},
		{"state save null", ToolState, map[string]any{"name": "n.json", "value": nil}, false, []string{"Saved n.json (4 bytes)"}, nil},
		{"state save without a name", ToolState, map[string]any{"value": 1}, true, []string{"name is empty"}, nil},
		{"state get", ToolState, map[string]any{"name": "p.json"}, false, []string{`{"done":3}`}, nil},
		{"state list", ToolState, map[string]any{}, false, []string{"p.json (10 bytes"}, nil},
		{"state unknown lists saved", ToolState, map[string]any{"name": "q.json"}, true, []string{`no state named "q.json"; saved: n.json, p.json`}, nil},
		{"state error said once, without Go's suffix", ToolState, map[string]any{"name": "contact", "value": 1}, true,
			[]string{`state "contact": the name must end in .json, .yaml or .yml`}, []string{"state: state", "invalid argument"}},
		{"workflow unknown lists stored", ToolWorkflow, map[string]any{"action": "start", "name": "nope"}, true,
			[]string{`no workflow named "nope"; stored: approve (action list shows their inputs)`}, []string{"cexecctl", "not found"}},
		{"skills empty", ToolSkills, nil, false, []string{"No skills yet"}, nil},
		{"skill bad code", ToolSkills, map[string]any{"name": "bad", "description": "d", "code": "def f(:\n"}, true, []string{"does not compile"}, nil},
		{"skill bad name", ToolSkills, map[string]any{"name": "Bad-Name", "description": "d", "code": "x = 1\n"}, true, []string{"invalid skill name"}, nil},
		{"skill without code", ToolSkills, map[string]any{"name": "half", "description": "Halves"}, true, []string{"code is empty"}, nil},
		{"skill save", ToolSkills, map[string]any{"name": "double", "description": "Doubles a number", "code": "def run(x):\n    return 2 * x\n"}, false,
			[]string{"Saved skill double", "from skills.double import"}, nil},
		{"skills list", ToolSkills, nil, false, []string{"double: Doubles a number"}, nil},
		{"skill get", ToolSkills, map[string]any{"name": "double"}, false, []string{"# double", "```python\ndef run(x):"}, nil},
		{"skill typo", ToolSkills, map[string]any{"name": "doubel"}, true, []string{`did you mean "double"?`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, res := call(t, c, tt.tool, tt.args)
			if res.IsError != tt.isError {
				t.Errorf("isError = %v, want %v; text:\n%s", res.IsError, tt.isError, text)
			}
			for _, s := range tt.want {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(text, s) {
					t.Errorf("text has %q:\n%s", s, text)
				}
			}
		})
	}
}

// TestFailureWording: a service error reads as a sentence: without the
// pluginapi sentinels' text Go wrapping leaves at its end, and without
// naming the tool again when the message names its subject.
func TestFailureWording(t *testing.T) {
	tooLarge := fmt.Errorf("too large: %w", pluginapi.ErrInvalidArgument)
	quota := fmt.Errorf("disk quota exceeded: %w", pluginapi.ErrResourceExhausted)
	tests := []struct {
		name, what string
		err        error
		want       string
	}{
		{"state names itself", ToolState,
			fmt.Errorf("state %q: the name must end in .json, .yaml or .yml: %w", "contact", pluginapi.ErrInvalidArgument),
			`state "contact": the name must end in .json, .yaml or .yml`},
		{"skill names itself, nested sentinel", ToolSkills,
			fmt.Errorf("skill big: the code is 300 KiB; the limit is 256 KiB: %w", tooLarge),
			"skill big: the code is 300 KiB; the limit is 256 KiB: too large"},
		{"two sentinels", ToolState,
			fmt.Errorf("tenant acme: save state a.json: the disk is full, nothing was written: %w: %w", quota, pluginapi.ErrResourceExhausted),
			"state: tenant acme: save state a.json: the disk is full, nothing was written: disk quota exceeded"},
		{"unavailable", ToolSearchTools,
			fmt.Errorf("tool search is not running; list_tools still works: %w", pluginapi.ErrUnavailable),
			"search_tools: tool search is not running; list_tools still works"},
		{"text like a sentinel's, not wrapping it", ToolExecuteCode, errors.New("module x: not found"),
			"execute_code: module x: not found"},
		{"cancelled", ToolExecuteCode, fmt.Errorf("run: %w", context.Canceled), "execute_code: cancelled"},
		{"timed out", ToolExecuteCode, fmt.Errorf("get a sandbox for tenant acme: %w", context.DeadlineExceeded),
			"execute_code: timed out: get a sandbox for tenant acme: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := failure(tt.what, tt.err)
			if !r.isError || r.text != tt.want {
				t.Errorf("failure(%q, …) = %q (isError %v), want %q", tt.what, r.text, r.isError, tt.want)
			}
		})
	}
}

// TestCallTool drives call_tool against the real server-everything: the
// result comes as it is, without execute_code's trailer; failures (the
// server's own validation, the policy) are isError sentences; the result
// passes the PII tokenizer.
func TestCallTool(t *testing.T) {
	w := newWorld(t, withUpstream(t))
	c := connect(t, w.url+"/mcp")
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		want    []string
		notWant []string
	}{
		{"call a tool", ToolCallTool, map[string]any{"server": "everything", "tool": "get-sum", "arguments": map[string]any{"a": 2, "b": 3}}, false,
			[]string{"The sum of 2 and 3 is 5."}, []string{"[ok", "tool call"}},
		{"call by Python names", ToolCallTool, map[string]any{"server": "everything", "tool": "get_sum", "arguments": map[string]any{"a": 1, "b": 1}}, false,
			[]string{"The sum of 1 and 1 is 2."}, nil},
		{"call as a search hit names it", ToolCallTool, map[string]any{"server": "servers.everything", "tool": "get_sum", "arguments": map[string]any{"a": 1, "b": 2}}, false,
			[]string{"The sum of 1 and 2 is 3."}, nil},
		{"call a denied tool by package and function", ToolCallTool, map[string]any{"server": "servers.everything", "tool": "get_env"}, true,
			[]string{"tool everything/get-env is denied"}, nil},
		{"call an unknown server", ToolCallTool, map[string]any{"server": "github", "tool": "x"}, true,
			[]string{`unknown server "github"; known servers: everything, memory`}, nil},
		{"call with invalid arguments", ToolCallTool, map[string]any{"server": "everything", "tool": "get-sum", "arguments": map[string]any{"a": 2}}, true,
			[]string{"ToolError: ", "received undefined at b"}, nil},
		{"call a denied tool", ToolCallTool, map[string]any{"server": "everything", "tool": "get-env"}, true,
			[]string{"PermissionError: tool everything/get-env is denied by the tenant's policy"}, nil},
		{"call with a blank tool", ToolCallTool, map[string]any{"server": "everything", "tool": " "}, true, []string{"server and tool are required"}, nil},
		{"call returns tokens", ToolCallTool, map[string]any{"server": "everything", "tool": "echo", "arguments": map[string]any{"message": "ann@example.com"}}, false,
			[]string{"Echo: [EMAIL_1]"}, []string{"ann@"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, res := call(t, c, tt.tool, tt.args)
			if res.IsError != tt.isError {
				t.Errorf("isError = %v, want %v; text:\n%s", res.IsError, tt.isError, text)
			}
			for _, s := range tt.want {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(text, s) {
					t.Errorf("text has %q:\n%s", s, text)
				}
			}
		})
	}
}

// TestExecuteCodeStructured checks execute_code's structuredContent.
func TestExecuteCodeStructured(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	_, res := call(t, c, ToolExecuteCode, map[string]any{"code": "import cexec\nprint('hi')\ncexec.result([1, 2])\nraise ValueError('bad')"})
	if !res.IsError {
		t.Error("a program that raised is not an error result")
	}
	var out ExecOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	if out.OK || out.Stdout != "hi\n" || string(out.Result) != "[1,2]" || out.Error == nil || out.Error.Type != "ValueError" ||
		!strings.Contains(out.Error.Traceback, "raise ValueError('bad')") || out.DurationMS <= 0 || out.ToolCalls != nil {
		t.Errorf("structuredContent = %s", b)
	}
	if out.Session != "" {
		t.Errorf("session = %q, want none: the connection's session is implied", out.Session)
	}
	_, res = call(t, c, ToolExecuteCode, map[string]any{"code": "print(1)", "session": "nightly-report"})
	b, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), `"session":"nightly-report"`) {
		t.Errorf("session argument not used: %s", b)
	}
}

// TestExecuteCodeExitStatus: a program that exits non-zero is an error
// result with its exit code, as over `cexecctl exec`; exit 0 is success.
func TestExecuteCodeExitStatus(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	for _, tc := range []struct {
		name, code string
		exit       int
		stdout     string
	}{
		{"sys.exit(3)", "import sys\nprint('a')\nsys.exit(3)", 3, "a\n"},
		{"sys.exit(message)", "import sys\nsys.exit('bye')", 1, ""},
		{"os._exit(5)", "import os, sys\nprint('b'); sys.stdout.flush()\nos._exit(5)", 5, "b\n"},
		{"sys.exit(0)", "import sys\nprint('c')\nsys.exit(0)", 0, "c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, res := call(t, c, ToolExecuteCode, map[string]any{"code": tc.code})
			var out ExecOutput
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("structuredContent %s: %v", b, err)
			}
			if res.IsError != (tc.exit != 0) || out.OK != (tc.exit == 0) || out.ExitCode != tc.exit || out.Stdout != tc.stdout {
				t.Errorf("isError %v, structuredContent %s", res.IsError, b)
			}
			if want := fmt.Sprintf("[exited with code %d]", tc.exit); tc.exit != 0 && !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}
		})
	}
}

// TestExecuteCodeCallsUpstream runs a program that imports a generated stub
// and calls the real server-everything through it.
func TestExecuteCodeCallsUpstream(t *testing.T) {
	w := newWorld(t, withUpstream(t))
	c := connect(t, w.url+"/mcp")
	code := "from servers.everything import get_sum, echo\nprint(get_sum(a=2, b=3))\nprint(echo(message='hello'))"
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": code})
	if res.IsError {
		t.Fatalf("error: %s", text)
	}
	if text != "The sum of 2 and 3 is 5.\nEcho: hello\n" {
		t.Errorf("text is not the output alone:\n%s", text)
	}
	var out ExecOutput
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if out.ToolCalls.Calls != 2 || len(out.ToolCalls.Tools) != 2 || out.ToolCalls.Tools[0].Tool != "get-sum" {
		t.Errorf("tool_calls = %+v", out.ToolCalls)
	}
}

// TestOutputCaps checks that long output is cut, and says so.
func TestOutputCaps(t *testing.T) {
	w := newWorld(t, func(o *Options, _ *world) { o.MaxOutput = 1000 })
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "for i in range(1000): print('line', i)"})
	if res.IsError {
		t.Fatal(text)
	}
	for _, want := range []string{"line 0\n", "line 999\n", " characters]…\n", "[stdout cut from 8890 to 1000 bytes; print less]"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if len(text) > 1400 {
		t.Errorf("text is %d bytes with a cap of 1000", len(text))
	}
	// A line longer than the cap keeps its head and tail.
	text, _ = call(t, c, ToolExecuteCode, map[string]any{"code": "print('a' * 40000)"})
	if want := strings.Repeat("a", 750) + "…[cut 39,001 characters]…" + strings.Repeat("a", 249) + "\n"; !strings.HasPrefix(text, want) {
		t.Errorf("long line not cut in its middle:\n%s", text)
	}
	text, _ = call(t, c, ToolExecuteCode, map[string]any{"code": "import cexec\ncexec.result('x' * 5000)"})
	if !strings.Contains(text, "[result omitted: 5002 bytes of JSON; return less]") {
		t.Errorf("big result not omitted:\n%s", text)
	}
}

func TestCapMiddle(t *testing.T) {
	var lines, words []string
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf("row %d: alice.smith@example.com paid", i))
		words = append(words, "alice.smith@example.com", "é")
	}
	long := "first\n" + strings.Repeat("é", 3000) + "\nlast\n"
	tests := []struct {
		name       string
		in         string
		max        int
		cut        bool
		wholeWords bool // every kept word is a word of the input
		want       []string
	}{
		{"short", "short", 10, false, true, nil},
		{"lines", strings.Join(lines, "\n"), 300, true, true, []string{"row 0: ", "row 39: "}},
		{"one long line", strings.Join(words, " "), 300, true, true, nil},
		{"a line without spaces", strings.Repeat("a", 40000), 16384, true, false,
			[]string{strings.Repeat("a", 12288) + "…[cut 23,616 characters]…" + strings.Repeat("a", 4096)}},
		{"a long line among short ones", long, 1000, true, false, []string{"first\néé", "éé\nlast\n", "…[cut "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := capMiddle(tt.in, tt.max)
			if cut != tt.cut {
				t.Fatalf("cut = %v, want %v", cut, tt.cut)
			}
			if !isValidUTF8(got) {
				t.Fatalf("capMiddle split a rune: %q", got)
			}
			if !cut {
				return
			}
			marker := strings.Index(got, "…[cut ")
			if marker < 0 || len(got) >= len(tt.in) || len(got) > tt.max+40 {
				t.Fatalf("no marker, or not cut to the budget: %q", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("result lacks %q: %q", w, got)
				}
			}
			if !tt.wholeWords {
				return
			}
			// A value is never cut in half.
			whole := map[string]bool{}
			for _, w := range strings.Fields(tt.in) {
				whole[w] = true
			}
			end := strings.Index(got[marker:], "]…") + marker + len("]…")
			for _, w := range strings.Fields(got[:marker] + " " + got[end:]) {
				if !whole[w] {
					t.Fatalf("kept a partial word %q in %q", w, got)
				}
			}
		})
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestPIITokenized checks that every kind of output passes the tokenizer:
// stdout, structured content, errors, stubs, state and resources.
func TestPIITokenized(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "import cexec\nprint('mail ann@example.com')\ncexec.result({'to': 'ann@example.com'})\nraise KeyError('bob@example.com')"})
	b, _ := json.Marshal(res.StructuredContent)
	if strings.Contains(text, "@example.com") || strings.Contains(string(b), "@example.com") {
		t.Errorf("PII leaked:\n%s\n%s", text, b)
	}
	if !strings.Contains(text, "mail [EMAIL_1]") || !strings.Contains(text, "[EMAIL_2]") || !strings.Contains(string(b), `"to":"[EMAIL_1]"`) {
		t.Errorf("not tokenized as expected:\n%s\n%s", text, b)
	}
	call(t, c, ToolState, map[string]any{"name": "c.json", "value": "carl@example.com"})
	if text, _ := call(t, c, ToolState, map[string]any{"name": "c.json"}); text != `"[EMAIL_3]"` {
		t.Errorf("state = %s", text)
	}
	// A failing tokenizer withholds the output.
	w.pii.mu.Lock()
	w.pii.fail = true
	w.pii.mu.Unlock()
	text, res = call(t, c, ToolExecuteCode, map[string]any{"code": "print('dan@example.com')"})
	if !res.IsError || strings.Contains(text, "dan@") || !strings.Contains(text, "withheld") {
		t.Errorf("with a failing tokenizer: %v %s", res.IsError, text)
	}
}

// TestTenantScope checks that a tenant sees only its servers.
func TestTenantScope(t *testing.T) {
	w := newWorld(t, func(o *Options, w *world) {
		o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}, {Token: "tok-beta", Tenant: "beta"}}
		w.catalog.allowed["acme"] = []string{"memory"}
	})
	acme := connect(t, w.url+"/mcp", bearerOpt("tok-acme"))
	beta := connect(t, w.url+"/mcp", bearerOpt("tok-beta"))
	if text, _ := call(t, acme, ToolListTools, nil); strings.Contains(text, "everything") {
		t.Errorf("acme sees everything:\n%s", text)
	}
	text, res := call(t, acme, ToolListTools, map[string]any{"server": "everything", "tool": "echo"})
	if !res.IsError || !strings.Contains(text, "known servers: memory") {
		t.Errorf("acme list_tools everything/echo: %s", text)
	}
	if text, _ := call(t, beta, ToolListTools, nil); !strings.Contains(text, "everything") {
		t.Errorf("beta does not see everything:\n%s", text)
	}
	call(t, acme, ToolState, map[string]any{"name": "a.json", "value": 1})
	if text, _ := call(t, beta, ToolState, nil); strings.Contains(text, "a.json") {
		t.Errorf("beta sees acme's state: %s", text)
	}
}

func TestExecuteCodeCancelled(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = ToolExecuteCode
	req.Params.Arguments = map[string]any{"code": "import time\ntime.sleep(30)"}
	start := time.Now()
	if _, err := c.CallTool(ctx, req); err == nil {
		t.Error("a call past its deadline succeeded")
	}
	// The face must still answer; the executor ends the cancelled program.
	text, _ := call(t, c, ToolExecuteCode, map[string]any{"code": "print('next')"})
	if !strings.Contains(text, "next") {
		t.Errorf("after a cancelled call: %s (%v)", text, time.Since(start))
	}
}

// tokenizedExecutor returns executions whose texts the pipeline has
// tokenized already.
type tokenizedExecutor struct{ ex Execution }

func (e tokenizedExecutor) Execute(context.Context, Scope, Program) (Execution, error) {
	return e.ex, nil
}

// TestTokenizedExecution checks that an execution the pipeline tokenized is
// returned as it is: its tokens and texts unchanged, and the face's
// tokenizer not asked again (it would fail here).
func TestTokenizedExecution(t *testing.T) {
	ex := Execution{
		Stdout: "mail [EMAIL_1] ann@example.com\n", Result: json.RawMessage(`{"to":"[EMAIL_1]"}`),
		Error:     &ExecError{Type: "[EMAIL_2]", Message: "raised"},
		Calls:     ToolCalls{Calls: 1, Failed: 1, Tools: []ToolStat{{Server: "[EMAIL_2]", Tool: "send", Calls: 1, Failed: 1, LastError: "no server [EMAIL_2]"}}},
		Tokenized: true,
	}
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = tokenizedExecutor{ex} })
	w.pii.fail = true
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "pass"})
	b, _ := json.Marshal(res.StructuredContent)
	// The raw address stands for text the pipeline let through as it is.
	for _, want := range []string{"mail [EMAIL_1] ann@example.com", `[result] {"to":"[EMAIL_1]"}`, "[EMAIL_2]: raised", "[EMAIL_2]/send", "no server [EMAIL_2]"} {
		if !strings.Contains(text, want) {
			t.Errorf("reply lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "withheld") || !strings.Contains(string(b), `"result":{"to":"[EMAIL_1]"}`) {
		t.Errorf("structured content: %s", b)
	}
}

// TestExecutionWarnings: cexec's warnings on an execution come before the
// program's output, in the text and in structuredContent.
func TestExecutionWarnings(t *testing.T) {
	lost := "this session's persistent interpreter had ended (its sandbox was idle longer than the pool's idle_timeout and was stopped), so the program ran in a new one"
	ex := Execution{Stdout: "", Error: &ExecError{Type: "NameError", Message: "name 'x' is not defined"}, ExitCode: 1,
		Warnings: []string{lost}, Tokenized: true}
	w := newWorld(t, func(o *Options, _ *world) { o.Executor = tokenizedExecutor{ex} })
	c := connect(t, w.url+"/mcp")
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": "print(x)", "persistent": true})
	if want := "[cexec: " + lost + "]\nNameError: name 'x' is not defined\n"; !strings.HasPrefix(text, want) {
		t.Errorf("reply:\n%s\nwant it to start:\n%s", text, want)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if want, _ := json.Marshal([]string{lost}); !strings.Contains(string(b), `"warnings":`+string(want)) {
		t.Errorf("structured content lacks the warning: %s", b)
	}
}

// TestErrorsTokenized checks that tool errors quoting tenant data (state
// names, a skill file that does not parse) reach the model tokenized, like
// every other reply.
func TestErrorsTokenized(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	call(t, c, ToolState, map[string]any{"name": "ann@example.com.json", "value": 1})
	w.skills.broken = map[string]error{"broken": errors.New(`SKILL.md line 2: cannot parse "owner: bob@example.com"`)}
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolState, map[string]any{"name": "nope.json"}, "saved: [EMAIL_"},
		{ToolSkills, map[string]any{"name": "broken"}, `cannot parse "owner: [EMAIL_`},
	}
	for _, tt := range tests {
		text, res := call(t, c, tt.tool, tt.args)
		if !res.IsError || !strings.Contains(text, tt.want) || strings.Contains(text, "@example.com") {
			t.Errorf("%s(%v): error %v, %q; want it tokenized, with %q", tt.tool, tt.args, res.IsError, text, tt.want)
		}
	}
}

// TestArgumentErrors checks that arguments that do not fit a tool's input
// schema are answered in sentences naming the argument.
func TestArgumentErrors(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolExecuteCode, map[string]any{}, `execute_code: missing required argument "code"`},
		{ToolExecuteCode, map[string]any{"code": 3}, `execute_code: argument "code": expected string, got number`},
		{ToolExecuteCode, map[string]any{"code": "x = 1", "persistent": "yes"}, `execute_code: argument "persistent": expected boolean, got string`},
		{ToolCallTool, map[string]any{"server": "everything"}, `call_tool: missing required argument "tool"`},
		{ToolListTools, map[string]any{"server": 3}, `list_tools: argument "server": expected string, got number`},
		{ToolSearchTools, map[string]any{"query": "x", "limit": 0}, `search_tools: argument "limit": `},
		{ToolSearchTools, map[string]any{"query": "x", "detail_level": "all"}, `search_tools: argument "detail_level": `},
	}
	for _, tt := range tests {
		text, res := call(t, c, tt.tool, tt.args)
		if !res.IsError || !strings.HasPrefix(text, tt.want) || strings.ContainsAny(text, "&{}") {
			t.Errorf("%s(%v) = %v %q; want an error starting %q", tt.tool, tt.args, res.IsError, text, tt.want)
		}
	}
}

// TestRenderSkill checks that a skill's title and description appear once,
// whether or not its instructions open with a title of their own.
func TestRenderSkill(t *testing.T) {
	for _, s := range []Skill{
		{Name: "csv_report", Description: "Summarise a CSV file.", Instructions: "# csv_report\n\nUse this for CSV files.\n", Code: "x = 1\n"},
		{Name: "double", Description: "Doubles a number", Instructions: "Doubles a number", Code: "x = 1\n"},
		{Name: "plain", Description: "Plain.", Instructions: "Call run().", Code: "x = 1\n"},
	} {
		got := renderSkill(&s)
		if n := strings.Count(got, "# "+s.Name); n != 1 || strings.Count(got, s.Description) != 1 || !strings.HasPrefix(got, "# "+s.Name+"\n") {
			t.Errorf("%s: title %d times, or the description not once:\n%s", s.Name, n, got)
		}
	}
}

// TestInstructionsDoNotRepeatTools checks that initialize's instructions
// add to the tool descriptions instead of repeating them.
func TestInstructionsDoNotRepeatTools(t *testing.T) {
	for _, d := range toolDefs {
		for _, phrase := range []string{"search_tools", "list_tools", "execute_code", "prints only", "print only"} {
			if strings.Contains(instructions, phrase) && strings.Contains(d.desc, phrase) {
				t.Errorf("instructions repeat %q of %s's description", phrase, d.name)
			}
		}
	}
}

// TestToolErrorReply checks what a failed tool call costs the model: the
// program's frame, the message once, none of the runtime's or the stub's
// frames.
func TestToolErrorReply(t *testing.T) {
	w := newWorld(t)
	c := connect(t, w.url+"/mcp")
	code := "from servers.memory import read_graph\n\ndef load():\n    return read_graph()\n\nload()\n"
	text, res := call(t, c, ToolExecuteCode, map[string]any{"code": code})
	const msg = "server memory is not connected"
	if !res.IsError || strings.Count(text, msg) != 1 {
		t.Errorf("isError %v; the message is not there once:\n%s", res.IsError, text)
	}
	for _, frame := range []string{"line 6, in <module>\n    load()\n", "line 4, in load\n    return read_graph()\n"} {
		if !strings.Contains(text, frame) {
			t.Errorf("the program's frame %q is missing:\n%s", frame, text)
		}
	}
	if strings.Count(text, "File ") != 2 || strings.Contains(text, "cexec/__init__.py") || strings.Contains(text, "read_graph.py") {
		t.Errorf("runtime or stub frames shown:\n%s", text)
	}
	if len(text) > 400 {
		t.Errorf("the reply is %d characters:\n%s", len(text), text)
	}
}

// TestSearchToolsSkills checks that search_tools finds skills as well as
// tools: shared ones as the searcher ranks them, and the tenant's own,
// which no search index holds; each says how to import it.
func TestSearchToolsSkills(t *testing.T) {
	w := newWorld(t, func(o *Options, w *world) {
		w.skills.shared = []Skill{{Name: "json_query", Import: "skills.json_query", Shared: true,
			Description: "Pluck fields from nested JSON such as tool results.\nPaths look like items[*].id.",
			Code: "def query(data, path: str) -> list:\n    return []\n\n\ndef project(\n    data,\n    fields,\n    path=None,\n) -> list[dict]:\n" +
				"    return []\n\n\ndef _parse(path):\n    pass\n"}}
		o.Searcher = wordSearcher{c: w.catalog, shared: w.skills.shared}
	})
	c := connect(t, w.url+"/mcp")
	if text, res := call(t, c, ToolSkills, map[string]any{"name": "summarize_csv", "description": "Summarize a CSV file by column",
		"code": "def run(path):\n    return {}\n"}); res.IsError {
		t.Fatal(text)
	}
	tests := []struct {
		name    string
		args    map[string]any
		prefix  string
		want    []string
		notWant []string
	}{
		{"shared skill", map[string]any{"query": "pluck fields from nested JSON"},
			"skills.json_query (skill): Pluck fields from nested JSON such as tool results.\n", nil, []string{"Paths look"}},
		{"shared skill by name", map[string]any{"query": "pluck fields from nested JSON", "detail_level": "name"},
			"skills.json_query (skill)\n", nil, []string{"Pluck"}},
		{"shared skill in full", map[string]any{"query": "pluck fields from nested JSON", "detail_level": "full", "limit": 1},
			"from skills.json_query import query, project\n  query(data, path: str) -> list\n  project(data, fields, path=None) -> list[dict]\n" +
				"  Pluck fields from nested JSON such as tool results.\n  Paths look like items[*].id.\n",
			[]string{"\nskills(name) shows a skill's instructions and code.\n"}, []string{"_parse", "-> Any:"}},
		{"own skill", map[string]any{"query": "summarize a CSV file"},
			"skills.summarize_csv (skill): Summarize a CSV file by column\n", nil, nil},
		{"own skill in full", map[string]any{"query": "summarize a CSV file", "detail_level": "full"},
			"from skills.summarize_csv import run\n  run(path)\n  Summarize a CSV file by column\n", nil, nil},
		{"own skill first, tools after", map[string]any{"query": "summarize csv numbers", "limit": 2},
			"skills.summarize_csv (skill)", []string{"\neverything/"}, nil},
		{"own skill matching too few words", map[string]any{"query": "sum of two numbers"},
			"everything/get-sum", nil, []string{"summarize_csv"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, res := call(t, c, ToolSearchTools, tt.args)
			if res.IsError || !strings.HasPrefix(text, tt.prefix) {
				t.Errorf("isError %v; text does not start %q:\n%s", res.IsError, tt.prefix, text)
			}
			for _, s := range tt.want {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(text, s) {
					t.Errorf("text has %q:\n%s", s, text)
				}
			}
		})
	}
}

// TestLongArgumentsCut checks that a reply quoting what the agent passed
// quotes only its start: a 100 KB argument must not come back whole.
// versionedState versions every state value "v1".
type versionedState struct{ *memState }

func (s versionedState) LoadState(ctx context.Context, sc Scope, name string) (json.RawMessage, string, error) {
	v, err := s.GetState(ctx, sc, name)
	return v, "v1", err
}

func (s versionedState) SaveStateIf(ctx context.Context, sc Scope, name string, value json.RawMessage, version string) error {
	if version != "v1" {
		return ErrStateConflict
	}
	return s.SaveState(ctx, sc, name, value)
}

func TestLongArgumentsCut(t *testing.T) {
	w := newWorld(t, func(o *Options, w *world) { o.State = versionedState{w.state} })
	c := connect(t, w.url+"/mcp")
	long := strings.Repeat("z", 100<<10)
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"search finds nothing", ToolSearchTools, map[string]any{"query": long}, false, `No tools match "zzz`},
		{"list an unknown server", ToolListTools, map[string]any{"server": long}, true, `unknown server "zzz`},
		{"list an unknown tool", ToolListTools, map[string]any{"server": "everything", "tool": long}, true, `server everything has no tool "zzz`},
		{"list a tool without its server", ToolListTools, map[string]any{"tool": long}, true, `list_tools: tool "zzz`},
		{"call an unknown server", ToolCallTool, map[string]any{"server": long, "tool": "x"}, true, `unknown server "zzz`},
		{"read unknown state", ToolState, map[string]any{"name": long}, true, `no state named "zzz`},
		{"show an unknown skill", ToolSkills, map[string]any{"name": long}, true, `no skill named "zzz`},
		{"save over a changed version", ToolState, map[string]any{"name": "a.json", "value": 1, "version": long}, true, `a.json changed since version "zzz`},
		{"start an unknown workflow", ToolWorkflow, map[string]any{"action": "start", "name": long}, true, `no workflow named "zzz`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, res := call(t, c, tt.tool, tt.args)
			if res.IsError != tt.isError || !strings.HasPrefix(text, tt.want) {
				t.Errorf("isError %v; text does not start %q: %.200s", res.IsError, tt.want, text)
			}
			if !strings.Contains(text, "z…\"") || len(text) > 300 {
				t.Errorf("the argument is not cut: %d bytes: %.200s", len(text), text)
			}
		})
	}
}

// TestInstructionsNameTheSession: initialize's instructions name the
// connection's session, the one execute_code runs in by default, on both
// transports, and how an operator reads its log (with the tenant when it is
// not the default): results name a session only when the session argument
// changed it, so this is where the agent learns its own.
func TestInstructionsNameTheSession(t *testing.T) {
	w := newWorld(t)
	acme := newWorld(t, func(o *Options, _ *world) { o.Tokens = []Token{{Token: "tok-acme", Tenant: "acme"}} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tests := []struct {
		name, show string
		client     func() (*mcpclient.Client, error)
	}{
		{"streamable", "cexecctl sessions show ", func() (*mcpclient.Client, error) {
			return mcpclient.NewStreamableHttpClient(w.url + "/mcp")
		}},
		{"sse", "cexecctl sessions show ", func() (*mcpclient.Client, error) { return mcpclient.NewSSEMCPClient(w.url + "/sse") }},
		{"a tenant's token", "cexecctl --tenant acme sessions show ", func() (*mcpclient.Client, error) {
			return mcpclient.NewStreamableHttpClient(acme.url+"/mcp", bearerOpt("tok-acme"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.client()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// A revision with initialize: 2026-07-28 has no sessions (see
			// protocolVersions).
			req := initRequest()
			req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
			res, err := c.Initialize(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var id string
			switch tp := c.GetTransport().(type) {
			case *transport.StreamableHTTP:
				id = tp.GetSessionId()
			case *transport.SSE:
				id = tp.GetEndpoint().Query().Get("sessionId")
			}
			if id == "" {
				t.Fatal("the transport has no session id")
			}
			want := instructions + " This connection's session (execute_code's default) is " + id + "; `" + tt.show + id + "` shows its log."
			if res.Instructions != want {
				t.Errorf("instructions %q, want %q", res.Instructions, want)
			}
		})
	}
}

// TestSSEServesSessionRevisionsOnly: a client that does not pin a revision
// ends up on one the face serves over SSE too, as over streamable HTTP:
// 2026-07-28 has no sessions, and a cexec session (its log, its PII tokens,
// the instructions naming it) is the MCP session.
func TestSSEServesSessionRevisionsOnly(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name string
		url  string
		new  func(string) (*mcpclient.Client, error)
	}{
		{"streamable", w.url + "/mcp", func(u string) (*mcpclient.Client, error) { return mcpclient.NewStreamableHttpClient(u) }},
		{"sse", w.url + "/sse", func(u string) (*mcpclient.Client, error) { return mcpclient.NewSSEMCPClient(u) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.new(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := c.Initialize(ctx, initRequest())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(protocolVersions, res.ProtocolVersion) {
				t.Errorf("negotiated %q, which the face does not serve (%v)", res.ProtocolVersion, protocolVersions)
			}
			if !strings.Contains(res.Instructions, "This connection's session") {
				t.Errorf("instructions name no session: %q", res.Instructions)
			}
		})
	}
}
