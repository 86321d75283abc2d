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

// vaultOwner is the MCP session whose vault is open: it stays open until
// the session ends.
type vaultOwner struct{ tenant, session string }

// sessionVaults is the face's Tokenizer over the guardrails: one vault per
// MCP session, held open while it lives, so every call of a session agrees
// on its tokens and the vault is written once the session ends rather than
// reloaded per call.
type sessionVaults struct {
	gr      *guard.Guardrails
	adopter *sessionAdopter

	mu   sync.Mutex
	open map[vaultOwner]*openVault
}

// openVault is an open vault and the MCP sessions using it: its own, and
// those that continue it after its replica died (see sessionAdopter).
type openVault struct {
	s     *guard.Session
	users map[string]bool
}

// vaultSession is the session whose vault serves a request: the MCP
// session's own, whatever cexec session execute_code was asked to
// continue, so a token is restored only in the MCP session that issued it;
// except a session adopted from a replica that died (see sessionAdopter).
// Without an MCP session (a test calling in directly) it is sc's.
func vaultSession(ctx context.Context, sc mcpface.Scope, adopter *sessionAdopter) string {
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		if sc.Session != "" && sc.Session != cs.SessionID() && adopter.adopt(ctx, sc.Tenant, sc.Session) {
			return sc.Session
		}
		return cs.SessionID()
	}
	return sc.Session
}

// session returns the guard session of the MCP session the request belongs
// to, opening it on first use.
func (v *sessionVaults) session(ctx context.Context, sc mcpface.Scope) (*guard.Session, error) {
	id := vaultSession(ctx, sc, v.adopter)
	user := sc.Session
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		user = cs.SessionID()
	}
	owner := vaultOwner{tenant: sc.Tenant, session: id}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ov := v.open[owner]; ov != nil {
		ov.users[user] = true
		return ov.s, nil
	}
	s, err := v.gr.Open(sc.Tenant, id)
	if err != nil {
		return nil, fmt.Errorf("open pii vault: %w", err)
	}
	v.open[owner] = &openVault{s: s, users: map[string]bool{user: true}}
	return s, nil
}

// end closes the vaults only the ending MCP session used: its own, and an
// adopted one no other session continues, whose lease goes too.
func (v *sessionVaults) end(sc mcpface.Scope) {
	var closing []vaultOwner
	var sessions []*guard.Session
	v.mu.Lock()
	for owner, ov := range v.open {
		if owner.tenant != sc.Tenant || !ov.users[sc.Session] {
			continue
		}
		delete(ov.users, sc.Session)
		if len(ov.users) == 0 {
			delete(v.open, owner)
			closing = append(closing, owner)
			sessions = append(sessions, ov.s)
		}
	}
	v.mu.Unlock()
	for i, owner := range closing {
		_ = sessions[i].Close()
		if owner.session != sc.Session {
			v.adopter.release(owner)
		}
	}
}

func (v *sessionVaults) closeAll() {
	v.mu.Lock()
	open := v.open
	v.open = map[vaultOwner]*openVault{}
	v.mu.Unlock()
	for _, ov := range open {
		_ = ov.s.Close()
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
