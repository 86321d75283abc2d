package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestHandleHostCall(t *testing.T) {
	m := newManager(t, Options{DefaultQuota: Quota{DiskBytes: 4096}})
	ctx := context.Background()
	tests := []struct {
		name, session, method, params string
		want                          string // JSON answer, or
		errType, errHas               string // the CallError
	}{
		{name: "missing state", method: MethodGetState, params: `{"name":"p.json"}`, errType: "KeyError", errHas: "p.json"},
		{name: "missing state with default", method: MethodGetState, params: `{"name":"p.json","default":{"page":0}}`, want: `{"page":0}`},
		{name: "missing state with null default", method: MethodGetState, params: `{"name":"p.json","default":null}`, want: `null`},
		{name: "save json", method: MethodSaveState, params: `{"name":"p.json","value":{"page":3}}`, want: `{"bytes":10,"name":"p.json","version":"dc8efec71241ad626cc65885"}`},
		{name: "load with version", method: MethodLoadState, params: `{"name":"p.json"}`, want: `{"value":{"page":3},"version":"dc8efec71241ad626cc65885"}`},
		{name: "load missing with default", method: MethodLoadState, params: `{"name":"q.json","default":0}`, want: `{"value":0,"version":""}`},
		{name: "save at a stale version", method: MethodSaveState, params: `{"name":"p.json","value":1,"version":"0123"}`, errType: "StateConflict", errHas: "load it again and retry"},
		{name: "save at the version", method: MethodSaveState, params: `{"name":"p.json","value":{"page":3},"version":"dc8efec71241ad626cc65885"}`, want: `{"bytes":10,"name":"p.json","version":"dc8efec71241ad626cc65885"}`},
		{name: "read it back", method: MethodGetState, params: `{"name":"p.json","default":1}`, want: `{"page":3}`},
		{name: "save yaml", method: MethodSaveState, params: `{"name":"c.yaml","value":{"k":[1,"two"]}}`, want: `{"bytes":17,"name":"c.yaml","version":"faa083e5a77821ea55874396"}`},
		{name: "read yaml as json", method: MethodGetState, params: `{"name":"c.yaml"}`, want: `{"k":[1,"two"]}`},
		{name: "save null", method: MethodSaveState, params: `{"name":"n.json","value":null}`, want: `{"bytes":4,"name":"n.json","version":"74234e98afe7498fb5daf1f3"}`},
		{name: "save without value", method: MethodSaveState, params: `{"name":"n.json"}`, errType: "ValueError", errHas: "value is missing"},
		{name: "pickle", method: MethodSaveState, params: `{"name":"m.pkl","value":1}`, errType: "ValueError", errHas: "pickle"},
		{name: "traversal", method: MethodGetState, params: `{"name":"../../sessions/x.json"}`, errType: "ValueError", errHas: "invalid state name"},
		{name: "over quota", method: MethodSaveState, params: `{"name":"big.json","value":"` + strings.Repeat("x", 5000) + `"}`, errType: "QuotaExceeded", errHas: "disk quota"},
		{name: "unknown parameter", method: MethodGetState, params: `{"nmae":"p.json"}`, errType: "ValueError", errHas: "unknown field"},
		{name: "wrong type", method: MethodSaveState, params: `{"name":3,"value":1}`, errType: "ValueError", errHas: "bad parameters"},
		{name: "not an object", method: MethodCheckpoint, params: `[1]`, errType: "ValueError", errHas: "bad parameters"},
		{name: "checkpoint", session: "s1", method: MethodCheckpoint, params: `{"step":"fetched","context":{"cursor":"c2"}}`, want: `{"seq":1,"session":"s1"}`},
		{name: "checkpoint without context", session: "s1", method: MethodCheckpoint, params: `{"step":"done"}`, want: `{"seq":2,"session":"s1"}`},
		{name: "checkpoint without session", method: MethodCheckpoint, params: `{"step":"x"}`, errType: "ValueError", errHas: "no session"},
		{name: "checkpoint bad step", session: "s1", method: MethodCheckpoint, params: `{"step":""}`, errType: "ValueError", errHas: "step"},
		{name: "save skill", session: "s1", method: MethodSaveSkill, params: `{"name":"double","description":"Double a number.","code":"def run(x):\n    return 2 * x\n"}`,
			want: `{"import":"skills.double","name":"double","path":"/workspace/skills/double"}`},
		{name: "skill syntax error", method: MethodSaveSkill, params: `{"name":"bad","description":"d","code":"def run(:\n"}`, errType: "SyntaxError", errHas: "line 1"},
		{name: "skill bad name", method: MethodSaveSkill, params: `{"name":"Bad","description":"d","code":"x=1"}`, errType: "ValueError", errHas: "snake_case"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := m.HandleHostCall(ctx, "acme", tc.session, tc.method, json.RawMessage(tc.params))
			if tc.errType == "" {
				if err != nil {
					t.Fatalf("HandleHostCall = %v", err)
				}
				sameJSON(t, out, []byte(tc.want))
				return
			}
			var ce *sandbox.CallError
			if !errors.As(err, &ce) || ce.Type != tc.errType || !strings.Contains(ce.Message, tc.errHas) {
				t.Fatalf("HandleHostCall = %s, %v; want %s mentioning %q", out, err, tc.errType, tc.errHas)
			}
		})
	}

	tn := mustTenant(t, m, "acme")
	r, err := tn.Resume("s1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Checkpoint == nil || r.Checkpoint.Step != "done" || len(r.Recent) != 3 || r.Recent[2].Kind != KindSkill || r.Recent[2].Skill != "double" {
		t.Errorf("session s1 = %+v", r)
	}
	if r.Session.Checkpoints != 2 {
		t.Errorf("checkpoints = %d", r.Session.Checkpoints)
	}

	if _, err := m.HandleHostCall(ctx, "acme", "", "call_tool", nil); !errors.Is(err, pluginapi.ErrUnimplemented) || HandlesMethod("call_tool") {
		t.Errorf("call_tool = %v; it belongs to the bridge", err)
	}
	var ce *sandbox.CallError
	if _, err := m.HandleHostCall(ctx, "../x", "", MethodGetState, json.RawMessage(`{"name":"a.json"}`)); !errors.As(err, &ce) {
		t.Errorf("bad tenant = %v", err)
	}
}

func TestCallErrorHidesHostPaths(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	err := fmt.Errorf("open %s/state/x.json: permission denied; sessions in %s/tenants/acme/sessions", tn.WorkspaceDir(), m.opts.DataDir)
	ce := m.callError("acme", err)
	if ce.Type != "HostError" || strings.Contains(ce.Message, m.opts.DataDir) ||
		ce.Message != "open /workspace/state/x.json: permission denied; sessions in <data_dir>/tenants/acme/sessions" {
		t.Errorf("CallError = %+v", ce)
	}
	if ce := m.callError("acme", fmt.Errorf("x: %w", ErrTenantRemoved)); ce.Type != "HostError" {
		t.Errorf("a removed tenant is not a KeyError: %+v", ce)
	}
}
