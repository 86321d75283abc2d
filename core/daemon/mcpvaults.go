package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/guard"
	"github.com/cexec/cexec/core/mcpface"
)

// vaultOwner is the MCP session that opened vaults: they stay open until it
// ends.
type vaultOwner struct{ tenant, session string }

// sessionVaults is the face's Tokenizer over the guardrails: one vault per
// cexec session, held open for the MCP session that uses it, so every call
// of a session agrees on its tokens and the vault is written once the
// session ends rather than reloaded per call.
type sessionVaults struct {
	gr *guard.Guardrails

	mu sync.Mutex
	// open maps an MCP session to the guard sessions it opened, by cexec
	// session (its own, and those execute_code was asked to continue).
	open map[vaultOwner]map[string]*guard.Session
}

// session returns the guard session of sc, opening it for the MCP session
// the request belongs to.
func (v *sessionVaults) session(ctx context.Context, sc mcpface.Scope) (*guard.Session, error) {
	owner := vaultOwner{tenant: sc.Tenant, session: sc.Session}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		owner.session = cs.SessionID()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.open[owner][sc.Session]; s != nil {
		return s, nil
	}
	s, err := v.gr.Open(sc.Tenant, sc.Session)
	if err != nil {
		return nil, fmt.Errorf("open pii vault: %w", err)
	}
	if v.open[owner] == nil {
		v.open[owner] = map[string]*guard.Session{}
	}
	v.open[owner][sc.Session] = s
	return s, nil
}

// end closes the vaults an MCP session opened.
func (v *sessionVaults) end(sc mcpface.Scope) {
	v.mu.Lock()
	held := v.open[vaultOwner{tenant: sc.Tenant, session: sc.Session}]
	delete(v.open, vaultOwner{tenant: sc.Tenant, session: sc.Session})
	v.mu.Unlock()
	for _, s := range held {
		_ = s.Close()
	}
}

func (v *sessionVaults) closeAll() {
	v.mu.Lock()
	open := v.open
	v.open = map[vaultOwner]map[string]*guard.Session{}
	v.mu.Unlock()
	for _, held := range open {
		for _, s := range held {
			_ = s.Close()
		}
	}
}

// Tokenize replaces the PII in text with the session's tokens.
func (v *sessionVaults) Tokenize(ctx context.Context, sc mcpface.Scope, text string) (string, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return "", err
	}
	return s.Tokenize(ctx, text)
}

// TokenizeJSON tokenizes every string of value.
func (v *sessionVaults) TokenizeJSON(ctx context.Context, sc mcpface.Scope, value json.RawMessage) (json.RawMessage, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return nil, err
	}
	return s.TokenizeJSON(ctx, value)
}

// TokenizeReply tokenizes a reply's text and structured value with one
// detection.
func (v *sessionVaults) TokenizeReply(ctx context.Context, sc mcpface.Scope, text string, structured json.RawMessage) (string, json.RawMessage, error) {
	s, err := v.session(ctx, sc)
	if err != nil {
		return "", nil, err
	}
	return s.TokenizeTextJSON(ctx, text, structured)
}
