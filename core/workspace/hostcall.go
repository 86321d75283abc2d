package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

// Host call methods served by HandleHostCall. Sandboxed code reaches them
// through the runtime's cexec._host_call(method, params).
const (
	// MethodGetState: params {"name": str, "default"?: any}; returns the
	// value. A missing file raises KeyError unless default is given.
	MethodGetState = "get_state"
	// MethodLoadState: params {"name": str, "default"?: any}; returns
	// {"value": any, "version": str}. A missing file raises KeyError unless
	// default is given: then the value is default and the version "".
	MethodLoadState = "load_state"
	// MethodSaveState: params {"name": str, "value": any, "version"?: str};
	// returns {"name": str, "bytes": int, "version": str}. With version the
	// save happens only while the stored state is at that version ("": does
	// not exist) and raises StateConflict otherwise.
	MethodSaveState = "save_state"
	// MethodCheckpoint: params {"step": str, "context"?: any}; returns
	// {"session": str, "seq": int}.
	MethodCheckpoint = "checkpoint"
	// MethodSaveSkill: params {"name": str, "description": str, "code":
	// str}; returns {"name": str, "import": str, "path": str}.
	MethodSaveSkill = "save_skill"
)

// HandlesMethod reports whether HandleHostCall serves method, so an executor
// can route the others (call_tool) elsewhere.
func HandlesMethod(method string) bool {
	switch method {
	case MethodGetState, MethodLoadState, MethodSaveState, MethodCheckpoint, MethodSaveSkill:
		return true
	}
	return false
}

// HandleHostCall serves a host call made by sandboxed code running for
// tenant in session. The tenant and session come from the executor, never
// from the program, so code cannot reach another tenant. Every failure is a
// *sandbox.CallError whose Type the runtime raises as that Python exception
// (KeyError, ValueError, SyntaxError, StateConflict, or HostError with type
// "QuotaExceeded"), with host paths removed from the message. The one
// exception is a method HandlesMethod rejects: that error wraps
// pluginapi.ErrUnimplemented, for the executor to route or refuse.
func (m *Manager) HandleHostCall(ctx context.Context, tenant, session, method string, params json.RawMessage) (json.RawMessage, error) {
	if !HandlesMethod(method) {
		return nil, fmt.Errorf("workspace: host call %q: %w", method, pluginapi.ErrUnimplemented)
	}
	out, err := m.hostCall(ctx, tenant, session, method, params)
	if err != nil {
		return nil, m.callError(tenant, err)
	}
	return out, nil
}

func (m *Manager) hostCall(ctx context.Context, tenant, session, method string, params json.RawMessage) (json.RawMessage, error) {
	t, err := m.Tenant(tenant)
	if err != nil {
		return nil, err
	}
	switch method {
	case MethodGetState:
		var p struct {
			Name    string          `json:"name"`
			Default json.RawMessage `json:"default"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		v, err := t.GetState(p.Name)
		if errors.Is(err, pluginapi.ErrNotFound) && p.Default != nil {
			return p.Default, nil
		}
		return v, err
	case MethodLoadState:
		var p struct {
			Name    string          `json:"name"`
			Default json.RawMessage `json:"default"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		v, version, err := t.LoadState(p.Name)
		if errors.Is(err, pluginapi.ErrNotFound) && p.Default != nil {
			v, err = p.Default, nil
		}
		if err != nil {
			return nil, err
		}
		return mustJSON(map[string]any{"value": json.RawMessage(v), "version": version}), nil
	case MethodSaveState:
		var p struct {
			Name    string          `json:"name"`
			Value   json.RawMessage `json:"value"`
			Version *string         `json:"version"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if p.Value == nil {
			return nil, fmt.Errorf("save_state: value is missing: %w", pluginapi.ErrInvalidArgument)
		}
		info, err := t.saveState(p.Name, p.Value, p.Version)
		if err != nil {
			return nil, err
		}
		return mustJSON(map[string]any{"name": info.Name, "bytes": info.Size, "version": info.Version}), nil
	case MethodCheckpoint:
		var p struct {
			Step    string          `json:"step"`
			Context json.RawMessage `json:"context"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if session == "" {
			return nil, fmt.Errorf("checkpoint: this execution has no session: %w", pluginapi.ErrInvalidArgument)
		}
		e, err := t.Checkpoint(session, p.Step, p.Context)
		if err != nil {
			return nil, err
		}
		return mustJSON(map[string]any{"session": session, "seq": e.Seq}), nil
	default: // MethodSaveSkill
		var p struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Code        string `json:"code"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		s, err := t.SaveSkill(ctx, p.Name, p.Description, p.Code)
		if err != nil {
			return nil, err
		}
		if session != "" {
			// The skill is saved; a failed log line must not hide that.
			if _, err := t.Append(session, Entry{Kind: KindSkill, Skill: s.Name}); err != nil {
				m.log.Warn("log saved skill", "tenant", tenant, "session", session, "error", err)
			}
		}
		return mustJSON(map[string]any{"name": s.Name, "import": s.Import, "path": s.SandboxPath}), nil
	}
}

func decodeParams(method string, params json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: bad parameters: %w: %w", method, err, pluginapi.ErrInvalidArgument)
	}
	return nil
}

// callError turns an error into what the program sees, without host paths.
func (m *Manager) callError(tenant string, err error) *sandbox.CallError {
	var codeErr *CodeError
	typ := "HostError"
	switch {
	case errors.As(err, &codeErr):
		typ = "SyntaxError"
	case errors.Is(err, ErrQuotaExceeded):
		typ = "QuotaExceeded"
	case errors.Is(err, ErrStateConflict):
		typ = "StateConflict"
	case errors.Is(err, pluginapi.ErrNotFound) && !errors.Is(err, ErrTenantRemoved):
		typ = "KeyError"
	case errors.Is(err, pluginapi.ErrInvalidArgument):
		typ = "ValueError"
	}
	msg := err.Error()
	if ValidateTenantID(tenant) == nil {
		msg = strings.ReplaceAll(msg, m.tenantDir(tenant)+"/workspace", SandboxWorkspace)
	}
	msg = strings.ReplaceAll(msg, m.opts.DataDir, "<data_dir>")
	return &sandbox.CallError{Type: typ, Message: msg}
}

func (m *Manager) tenantDir(id string) string { return m.dir + "/" + id }
