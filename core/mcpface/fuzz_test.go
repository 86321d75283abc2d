package mcpface

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

// echoExecutor answers every execution at once with the program's length:
// the fuzz target exercises the face's JSON-RPC handling, not a sandbox.
type echoExecutor struct{}

func (echoExecutor) Execute(_ context.Context, _ Scope, p Program) (Execution, error) {
	return Execution{Stdout: strings.Repeat("x", min(len(p.Code), 64)) + "\n"}, nil
}

// fuzzFace serves a face with in-memory services on 127.0.0.1 and opens one
// MCP session on it; it returns the endpoint and the session id.
func fuzzFace(f *testing.F) (url, session string) {
	cat, _ := newTestCatalog(f)
	face, err := New(Options{
		Catalog: cat, Searcher: wordSearcher{c: cat}, Executor: echoExecutor{}, State: &memState{}, Skills: &memSkills{},
		PII: &emailTokenizer{}, Tasks: taskRunner{echoExecutor{}}, SSE: true, Version: "fuzz",
		Logger: hclog.NewNullLogger(),
	})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := face.ListenTCP("127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	serve(f, face, ln)
	url = "http://" + ln.Addr().String() + "/mcp"
	res := post(f, url, "", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`))
	session = res.Header.Get("Mcp-Session-Id")
	_ = res.Body.Close()
	if session == "" {
		f.Fatalf("initialize gave no session (status %d)", res.StatusCode)
	}
	_ = post(f, url, session, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)).Body.Close()
	return url, session
}

func post(t testing.TB, url, session string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		// The face dropped the connection: a handler panicked or hung.
		t.Fatalf("POST %q: %v", body, err)
	}
	return res
}

// FuzzJSONRPC sends the face one JSON-RPC request built from a method and
// raw params (valid JSON or not) on an open session. Whatever arrives, the
// face answers: no panic, no 5xx, and a JSON reply carries the request's id
// with a result or an error.
func FuzzJSONRPC(f *testing.F) {
	for _, seed := range []struct{ method, params string }{
		{"tools/list", `{}`},
		{"tools/call", `{"name":"execute_code","arguments":{"code":"print(1)"}}`},
		{"tools/call", `{"name":"search_tools","arguments":{"query":"sum","detail_level":"full","limit":3}}`},
		{"tools/call", `{"name":"list_tools","arguments":{"server":"everything","tool":"get-sum"}}`},
		{"tools/call", `{"name":"state","arguments":{"name":"a.json","value":{"k":[1,2]}}}`},
		{"tools/call", `{"name":"state","arguments":{"name":"../x"}}`},
		{"tools/call", `{"name":"nope","arguments":null}`},
		{"tools/call", `{"name":"execute_code","arguments":{"code":7}}`},
		{"resources/list", `{}`},
		{"resources/read", `{"uri":"cexec://servers/everything/get_sum.py"}`},
		{"resources/read", `{"uri":"file:///etc/passwd"}`},
		{"prompts/list", `null`},
		{"ping", ``},
		{"initialize", `{"protocolVersion":"1999-01-01"}`},
		{"", `{`},
	} {
		f.Add(seed.method, []byte(seed.params))
	}
	url, session := fuzzFace(f)
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		m, _ := json.Marshal(method)
		body := []byte(`{"jsonrpc":"2.0","id":42,"method":` + string(m))
		if len(params) > 0 {
			body = append(append(body, `,"params":`...), params...)
		}
		body = append(body, '}')
		res := post(t, url, session, body)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 500 {
			t.Fatalf("status %d for %q: %s", res.StatusCode, body, b)
		}
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			return
		}
		var reply struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &reply); err != nil {
			t.Fatalf("reply to %q is not JSON: %v: %s", body, err, b)
		}
		if json.Valid(body) && string(reply.ID) != "42" && string(reply.ID) != "null" {
			t.Fatalf("reply to %q has id %s", body, reply.ID)
		}
		if reply.Result == nil && reply.Error == nil {
			t.Fatalf("reply to %q has neither result nor error: %s", body, b)
		}
	})
}

// FuzzCapMiddle checks capMiddle's promises on any text: valid UTF-8 stays
// valid, the result stays near the budget, and it keeps a head and a tail
// of the input around one marker.
func FuzzCapMiddle(f *testing.F) {
	f.Add(strings.Repeat("a", 5000), 1000)
	f.Add(strings.Repeat("row alice@example.com\n", 300), 2000)
	f.Add("first\n"+strings.Repeat("é", 3000)+"\nlast\n", 1000)
	f.Fuzz(func(t *testing.T, s string, budget int) {
		if budget < 64 || budget > 1<<16 || !utf8.ValidString(s) {
			return
		}
		got, cut := capMiddle(s, budget)
		if !cut {
			if got != s || len(s) > budget {
				t.Fatalf("uncut %d bytes with max %d", len(s), budget)
			}
			return
		}
		if !utf8.ValidString(got) || len(got) > budget+maxWord+64 {
			t.Fatalf("%d bytes with max %d, or invalid UTF-8", len(got), budget)
		}
		i := strings.Index(got, "…[cut ")
		j := strings.Index(got[max(i, 0):], "]…")
		if i < 0 || j < 0 || !strings.HasPrefix(s, got[:i]) || !strings.HasSuffix(s, strings.TrimPrefix(got[i+j+len("]…"):], "\n")) {
			t.Fatalf("not a head and a tail of the input around a marker: %q", got)
		}
	})
}
