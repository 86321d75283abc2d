package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
)

// TestCallToolReferenceServers is long because its tables are: one fixture
// (three upstream servers, costly to start) serves the results, the
// failures and the refusal of a local tool.
func TestCallToolReferenceServers(t *testing.T) {
	f := newFixture(t, true)
	if err := os.WriteFile(filepath.Join(f.data, "notes.txt"), []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	type check func(t *testing.T, v any)
	isMap := func(keys ...string) check {
		return func(t *testing.T, v any) {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("result %T %v, want an object", v, v)
			}
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("result lacks %q: %v", k, m)
				}
			}
		}
	}
	results := []struct {
		name, server, tool, args string
		check                    check
	}{
		{"structuredContent", "memory", "create_entities", `{"entities":[{"name":"Ada","entityType":"person","observations":["wrote programs"]}]}`,
			func(t *testing.T, v any) {
				isMap("entities")(t, v)
				if e := v.(map[string]any)["entities"].([]any); len(e) != 1 || e[0].(map[string]any)["name"] != "Ada" {
					t.Errorf("entities %v", e)
				}
			}},
		{"structuredContent of a file", "filesystem", "read_text_file", `{"path":"` + filepath.Join(f.data, "notes.txt") + `"}`,
			func(t *testing.T, v any) {
				if v.(map[string]any)["content"] != "alpha\nbeta\n" {
					t.Errorf("content %v", v)
				}
			}},
		{"structuredContent with output schema", "everything", "get-structured-content", `{"location":"Chicago"}`, isMap("temperature", "conditions")},
		{"JSON text is decoded", "everything", "get-env", `{}`, isMap("PATH")},
		{"plain text", "everything", "echo", `{"message":"hi there"}`,
			func(t *testing.T, v any) {
				if v != "Echo: hi there" {
					t.Errorf("echo: %#v", v)
				}
			}},
		{"image among texts", "everything", "get-tiny-image", `{}`,
			func(t *testing.T, v any) {
				items := envelope(t, v)
				if len(items) != 3 {
					t.Fatalf("get-tiny-image: %v", v)
				}
				img := items[1]
				if img["type"] != "image" || img["mimeType"] != "image/png" || len(img["data"].(string)) < 50 {
					t.Errorf("image item %v", img)
				}
				if items[0]["type"] != "text" {
					t.Errorf("first item %v", items[0])
				}
			}},
		{"embedded resource", "everything", "get-resource-reference", `{"resourceType":"Text","resourceId":2}`,
			func(t *testing.T, v any) {
				var res map[string]any
				for _, it := range envelope(t, v) {
					if it["type"] == "resource" {
						res, _ = it["resource"].(map[string]any)
					}
				}
				if res == nil || !strings.Contains(res["uri"].(string), "2") || res["text"] == nil {
					t.Errorf("get-resource-reference: %v", v)
				}
			}},
	}
	for _, tt := range results {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.b.CallTool(ctx, "default", tt.server, tt.tool, json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("result is not JSON: %v: %s", err, out)
			}
			tt.check(t, v)
		})
	}

	failures := []struct {
		name, server, tool, args, typ, msg string
	}{
		{"isError", "filesystem", "read_text_file", `{"path":"/etc/hostname"}`, TypeToolError, "Access denied"},
		{"wrong type", "filesystem", "read_text_file", `{"path": 5}`, TypeInvalidArguments,
			`invalid arguments for filesystem/read_text_file: argument "path": expected string, got number`},
		{"missing", "filesystem", "read_text_file", `{}`, TypeInvalidArguments, `missing required argument "path"`},
		{"nested", "memory", "create_entities", `{"entities":[{"name":"x","entityType":"t","observations":[1]}]}`, TypeInvalidArguments,
			`argument "entities" at /entities/0/observations/0: expected string, got number`},
		{"enum", "everything", "get-structured-content", `{"location":"Paris"}`, TypeInvalidArguments, `argument "location": must be one of`},
		{"not an object", "everything", "echo", `["hi"]`, TypeInvalidArguments, "arguments must be an object"},
		{"typo in tool", "filesystem", "read_txt_file", `{}`, TypeToolNotFound, `did you mean "read_text_file"?`},
		{"python name", "everything", "get_tiny_image", `{}`, TypeToolNotFound, `did you mean "get-tiny-image"?`},
		{"typo in server", "filesytem", "read_text_file", `{}`, TypeToolNotFound, `unknown server "filesytem"; did you mean "filesystem"?`},
		{"long tool name cut", "filesystem", strings.Repeat("x", 100<<10), `{}`, TypeToolNotFound, `has no tool "` + strings.Repeat("x", 79) + `…"`},
		{"long server name cut", strings.Repeat("x", 100<<10), "read_text_file", `{}`, TypeToolNotFound, `unknown server "` + strings.Repeat("x", 79) + `…"`},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.b.CallTool(ctx, "default", tt.server, tt.tool, json.RawMessage(tt.args))
			ce := callErr(t, err)
			if ce.Type != tt.typ || !strings.Contains(ce.Message, tt.msg) {
				t.Errorf("got %s: %s\nwant %s containing %q", ce.Type, ce.Message, tt.typ, tt.msg)
			}
			t.Logf("%s: %s", ce.Type, ce.Message)
		})
	}

	tool, ok := f.cat.Tool("textutils", "word_count")
	if !ok {
		t.Fatal("local tool textutils/word_count missing")
	}
	_, err := f.b.CallTool(ctx, "default", "textutils", "word_count", json.RawMessage(`{"text":"a b"}`))
	if ce := callErr(t, err); ce.Type != TypeToolNotFound || !strings.Contains(ce.Message, tool.Stub.Import) {
		t.Errorf("local tool through call_tool: %s: %s", ce.Type, ce.Message)
	}
}

func TestExecution(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()

	t.Run("limit and records", func(t *testing.T) {
		e := f.b.NewExecution(ExecOptions{MaxCalls: 3})
		for _, msg := range []string{"one", "two"} {
			if _, err := e.CallTool(ctx, "everything", "echo", json.RawMessage(`{"message":"`+msg+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.CallTool(ctx, "everything", "echo", json.RawMessage(`{}`)); callErr(t, err).Type != TypeInvalidArguments {
			t.Fatal(err)
		}
		_, err := e.CallTool(ctx, "everything", "echo", json.RawMessage(`{"message":"four"}`))
		if ce := callErr(t, err); ce.Type != TypeCallLimit || !strings.Contains(ce.Message, "limit of 3") {
			t.Errorf("fourth call: %v", ce)
		}
		calls := e.Calls()
		if len(calls) != 3 || !calls[0].OK || calls[2].OK || calls[2].ErrorType != TypeInvalidArguments || calls[0].Duration <= 0 {
			t.Errorf("records %+v", calls)
		}
		s := e.Summary()
		if s.Calls != 3 || s.Failed != 1 || s.Refused != 1 || len(s.Tools) != 1 || s.Tools[0].Calls != 3 || s.Tools[0].LastError == "" || s.TotalMS <= 0 {
			t.Errorf("summary %+v", s)
		}
		if _, err := json.Marshal(s); err != nil {
			t.Error(err)
		}
	})

	t.Run("host call", func(t *testing.T) {
		e := f.b.NewExecution(ExecOptions{})
		out, err := e.HandleHostCall(ctx, "call_tool", json.RawMessage(`{"server":"everything","tool":"echo","arguments":{"message":"via host"}}`))
		if err != nil || string(out) != `"Echo: via host"` {
			t.Errorf("call_tool: %s, %v", out, err)
		}
		if _, err := e.HandleHostCall(ctx, "save_state", json.RawMessage(`{}`)); !errors.Is(err, pluginapi.ErrUnimplemented) {
			t.Errorf("other method: %v", err)
		}
		if _, err := e.HandleHostCall(ctx, "call_tool", json.RawMessage(`{"server":"everything"}`)); callErr(t, err).Type != TypeInvalidArguments {
			t.Errorf("no tool: %v", err)
		}
	})

	t.Run("allowed servers", func(t *testing.T) {
		e := f.b.NewExecution(ExecOptions{AllowedServers: []string{"memory"}})
		_, err := e.CallTool(ctx, "everything", "echo", json.RawMessage(`{"message":"x"}`))
		if ce := callErr(t, err); ce.Type != TypeToolNotFound || strings.Contains(ce.Message, "everything;") || !strings.Contains(ce.Message, "servers: memory") {
			t.Errorf("call to a server outside the tenant's: %v", ce)
		}
		if _, err := e.CallTool(ctx, "memory", "read_graph", nil); err != nil {
			t.Error(err)
		}
	})

	t.Run("before hook", func(t *testing.T) {
		e := f.b.NewExecution(ExecOptions{Before: func(_ context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
			if tool == "get-env" {
				return nil, errors.New("guard: environment dumps are not allowed")
			}
			return json.RawMessage(strings.ReplaceAll(string(args), "<PERSON_1>", "Ada")), nil
		}})
		out, err := e.CallTool(ctx, "everything", "echo", json.RawMessage(`{"message":"<PERSON_1>"}`))
		if err != nil || string(out) != `"Echo: Ada"` {
			t.Errorf("untokenized call: %s %v", out, err)
		}
		_, err = e.CallTool(ctx, "everything", "get-env", nil)
		if ce := callErr(t, err); ce.Type != TypeToolError || !strings.Contains(ce.Message, "not allowed") {
			t.Errorf("denied call: %v", ce)
		}
	})
}
