package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// TestReadResource reads server-everything's resources through an
// execution: text and blob contents, a resource link a tool returned read
// back, the tenant's allowed servers, and malformed params.
func TestReadResource(t *testing.T) {
	f := newFixture(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x := f.b.NewExecution(ExecOptions{Tenant: "default"})
	read := func(server, uri string) []map[string]any {
		t.Helper()
		params, _ := json.Marshal(readResourceParams{Server: server, URI: uri})
		out, err := x.HandleHostCall(ctx, MethodReadResource, params)
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		var contents []map[string]any
		if err := json.Unmarshal(out, &contents); err != nil || len(contents) == 0 {
			t.Fatalf("read %s: %s, %v", uri, out, err)
		}
		return contents
	}
	text := read("everything", "demo://resource/dynamic/text/1")
	if c := text[0]; c["mimeType"] != "text/plain" || !strings.HasPrefix(c["text"].(string), "Resource 1:") {
		t.Errorf("text resource %v", c)
	}
	blob := read("everything", "demo://resource/dynamic/blob/1")
	if _, err := base64.StdEncoding.DecodeString(blob[0]["blob"].(string)); err != nil || blob[0]["text"] != nil {
		t.Errorf("blob resource %v: %v", blob[0], err)
	}

	// A tool's resource link, then the resource it names.
	payload := strings.Repeat("cexec ", 100)
	args, _ := json.Marshal(map[string]string{"name": "notes.gz", "outputType": "resourceLink",
		"data": "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(payload))})
	out, err := x.CallTool(ctx, "everything", "gzip-file-as-resource", args)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	link := envelope(t, v)[0]
	if link["type"] != "resource_link" || link["mimeType"] != "application/gzip" {
		t.Fatalf("link %v", link)
	}
	gz := read("everything", link["uri"].(string))
	if gz[0]["blob"] == nil {
		t.Errorf("linked resource %v", gz[0])
	}

	limited := f.b.NewExecution(ExecOptions{Tenant: "default", AllowedServers: []string{"memory"}})
	_, err = limited.ReadResource(ctx, "everything", "demo://resource/dynamic/text/1")
	if ce := callErr(t, err); ce.Type != TypeToolNotFound || !strings.Contains(ce.Message, `unknown server "everything"`) {
		t.Errorf("forbidden server: %s: %s", ce.Type, ce.Message)
	}
	_, err = x.HandleHostCall(ctx, MethodReadResource, json.RawMessage(`{"server":"everything"}`))
	if ce := callErr(t, err); ce.Type != TypeInvalidArguments {
		t.Errorf("missing uri: %s: %s", ce.Type, ce.Message)
	}
	_, err = x.ReadResource(ctx, "everything", "demo://resource/nothing/here")
	if ce := callErr(t, err); ce.Type != TypeToolError {
		t.Errorf("unknown uri: %s: %s", ce.Type, ce.Message)
	}
	if s := x.Summary(); s.Calls != 5 || s.Failed != 1 {
		t.Errorf("summary %+v, want 5 calls, 1 failed", s)
	}

	// Policies and guards see the read as tool "read_resource" and may
	// rewrite its uri (PII tokens restored) or refuse it.
	var seen []string
	guarded := f.b.NewExecution(ExecOptions{Tenant: "default", Before: func(_ context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
		seen = append(seen, server+"/"+tool+" "+string(args))
		if strings.Contains(string(args), "blob") {
			return nil, &sandbox.CallError{Type: "PermissionError", Message: "blobs are denied"}
		}
		return json.RawMessage(strings.Replace(string(args), "[ID_1]", "1", 1)), nil
	}})
	out, err = guarded.ReadResource(ctx, "everything", "demo://resource/dynamic/text/[ID_1]")
	if err != nil || !strings.Contains(string(out), "Resource 1:") {
		t.Errorf("rewritten read: %s, %v", out, err)
	}
	_, err = guarded.ReadResource(ctx, "everything", "demo://resource/dynamic/blob/1")
	if ce := callErr(t, err); ce.Type != "PermissionError" {
		t.Errorf("denied read: %s: %s", ce.Type, ce.Message)
	}
	if want := `everything/read_resource {"uri":"demo://resource/dynamic/text/[ID_1]"}`; len(seen) != 2 || seen[0] != want {
		t.Errorf("Before saw %q, want %q first", seen, want)
	}
}

// TestGetPrompt gets server-everything's args-prompt through an execution:
// the Before hook (policies and guards) sees it as tool get_prompt with its
// name and arguments, may rewrite them (PII tokens restored) or refuse it,
// and the tenant's allowed servers apply.
func TestGetPrompt(t *testing.T) {
	f := newFixture(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seen []string
	x := f.b.NewExecution(ExecOptions{Tenant: "default", MaxCalls: 3, Before: func(_ context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
		seen = append(seen, server+"/"+tool+" "+string(args))
		if strings.Contains(string(args), "Berlin") {
			return nil, &sandbox.CallError{Type: "PermissionError", Message: "Berlin is denied"}
		}
		return json.RawMessage(strings.Replace(string(args), "[CITY_1]", "Paris", 1)), nil
	}})
	out, err := x.GetPrompt(ctx, "everything", "args-prompt", map[string]string{"city": "[CITY_1]"})
	if err != nil || !strings.Contains(string(out), "What's weather in Paris?") {
		t.Fatalf("prompt: %s, %v", out, err)
	}
	_, err = x.GetPrompt(ctx, "everything", "args-prompt", map[string]string{"city": "Berlin"})
	if ce := callErr(t, err); ce.Type != "PermissionError" {
		t.Errorf("denied prompt: %s: %s", ce.Type, ce.Message)
	}
	if want := `everything/get_prompt {"name":"args-prompt","arguments":{"city":"[CITY_1]"}}`; len(seen) != 2 || seen[0] != want {
		t.Errorf("Before saw %q, want %q first", seen, want)
	}
	if c := x.Calls(); len(c) != 2 || c[0].Tool != MethodGetPrompt || !c[0].OK || c[1].OK {
		t.Errorf("calls %+v", c)
	}
	limited := f.b.NewExecution(ExecOptions{Tenant: "default", MaxCalls: 1, AllowedServers: []string{"memory"}})
	_, err = limited.GetPrompt(ctx, "everything", "args-prompt", nil)
	if ce := callErr(t, err); ce.Type != TypeToolNotFound {
		t.Errorf("forbidden server: %s: %s", ce.Type, ce.Message)
	}
}
