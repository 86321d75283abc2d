package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/auth"
	"github.com/cexec/cexec/core/bridge"
)

// SignIn signs a tenant in to an OAuth-protected upstream server: the
// daemon's core/auth.Manager, whose Login calls show with the
// authorization URL and then waits for the browser's redirect to cexecd's
// loopback listener. The token stays in cexecd.
type SignIn interface {
	Login(ctx context.Context, tenant, server string, show func(authURL string)) error
}

// ModeAsker is an Asker that can tell beforehand whether it can put a
// question in an elicitation mode: a sign-in is started only for a user
// who can be shown its link.
type ModeAsker interface {
	CanAsk(mode string) bool
}

// ElicitationCompleter tells the user's client that a URL-mode
// elicitation it was shown has completed
// (notifications/elicitation/complete).
type ElicitationCompleter interface {
	ElicitationComplete(ctx context.Context, elicitationID string) error
}

type signInKey struct{ tenant, server string }

// signIns are the sign-ins in progress, shared by all executions: a call
// of another execution that needs the same one waits for it instead of
// starting a second (there is one redirect listener per sign-in).
type signIns struct {
	mu sync.Mutex
	m  map[signInKey]*signInFlight
}

type signInFlight struct {
	done chan struct{}
	ok   bool
}

// join returns the sign-in in progress for k, or starts one (started).
func (s *signIns) join(k signInKey) (fl *signInFlight, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fl := s.m[k]; fl != nil {
		return fl, false
	}
	if s.m == nil {
		s.m = map[signInKey]*signInFlight{}
	}
	fl = &signInFlight{done: make(chan struct{})}
	s.m[k] = fl
	return fl, true
}

func (s *signIns) finish(k signInKey, fl *signInFlight, ok bool) {
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
	fl.ok = ok
	close(fl.done)
}

// offer is one execution's sign-in link for one (tenant, server): made
// once, its outcome shared by the execution's later and concurrent calls.
type offer struct {
	done chan struct{}
	ok   bool
	note string
}

// signInHook is the bridge's SignIn for req's execution, or nil when its
// user cannot be shown a sign-in link (no SignIn configured, no asker, or
// an asker without URL-mode elicitation): such calls get the
// SignInRequired error as it is.
func (x *Executor) signInHook(req *CodeRequest) bridge.SignInFunc {
	if x.SignIn == nil || req.Asker == nil {
		return nil
	}
	if ma, ok := req.Asker.(ModeAsker); !ok || !ma.CanAsk(mcp.ElicitationModeURL) {
		return nil
	}
	var mu sync.Mutex
	offers := map[signInKey]*offer{}
	return func(ctx context.Context, e *auth.SignInRequiredError) (bool, string) {
		// Only the execution's own tenant's sign-in: a shared server's is
		// the default tenant's, and its token serves every tenant.
		if e.Tenant != req.Tenant {
			return false, ""
		}
		k := signInKey{e.Tenant, e.Server}
		mu.Lock()
		o := offers[k]
		first := o == nil
		if first {
			o = &offer{done: make(chan struct{})}
			offers[k] = o
		}
		mu.Unlock()
		if first {
			o.ok, o.note = x.offerSignIn(ctx, req, k)
			close(o.done)
		}
		select {
		case <-o.done:
			return o.ok, o.note
		case <-ctx.Done():
			return false, ""
		}
	}
}

// offerSignIn starts the sign-in, shows its link to the request's user as
// a URL-mode elicitation, and waits (within ctx, the execution's deadline)
// for the redirect that completes it. ok means the tenant is signed in.
func (x *Executor) offerSignIn(ctx context.Context, req *CodeRequest, k signInKey) (ok bool, note string) {
	fl, started := x.signIns.join(k)
	if !started {
		select {
		case <-fl.done:
			if fl.ok {
				return true, ""
			}
			return false, "a sign-in started for another request of this tenant did not complete"
		case <-ctx.Done():
			return false, ""
		}
	}
	defer func() { x.signIns.finish(k, fl, ok) }()

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	urls := make(chan string, 1)
	res := make(chan error, 1)
	go func() {
		res <- x.SignIn.Login(lctx, k.tenant, k.server, func(u string) { urls <- u })
	}()
	var authURL string
	select {
	case authURL = <-urls:
	case err := <-res:
		// A client_credentials server signs in without a user.
		if err == nil {
			return true, ""
		}
		return false, "the sign-in could not be started: " + err.Error()
	case <-ctx.Done():
		return false, ""
	}
	id, err := elicitationID()
	if err != nil {
		return false, ""
	}
	x.Log.Info("offering a sign-in link", "tenant", k.tenant, "session", req.Session, "server", k.server)
	ans, err := req.Asker.Elicit(ctx, mcp.ElicitationParams{
		Mode:          mcp.ElicitationModeURL,
		URL:           authURL,
		ElicitationID: id,
		Message: fmt.Sprintf("cexec: the MCP server %s needs you to sign in (tenant %s). Open the link to sign in; "+
			"the sign-in returns to cexec, which keeps the token.", k.server, k.tenant),
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return false, ""
	case err != nil:
		return false, "a sign-in link could not be shown to the user: " + err.Error()
	case ans.Action == mcp.ElicitationResponseActionDecline:
		return false, "the user declined the sign-in link"
	case ans.Action != mcp.ElicitationResponseActionAccept:
		return false, "the user cancelled the sign-in link"
	}
	select {
	case err = <-res:
	case <-ctx.Done():
		return false, "the sign-in did not complete before the execution ended"
	}
	if err != nil {
		x.Log.Info("sign-in through the link failed", "tenant", k.tenant, "server", k.server, "error", err)
		return false, "the sign-in through the link failed: " + err.Error()
	}
	if c, ok := req.Asker.(ElicitationCompleter); ok {
		if err := c.ElicitationComplete(ctx, id); err != nil {
			x.Log.Debug("elicitation complete notification", "error", err)
		}
	}
	return true, ""
}

func elicitationID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
