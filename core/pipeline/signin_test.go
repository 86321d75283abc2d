package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/auth"
)

// browserSignIn is Manager.Login as the hook sees it: it shows a URL and
// completes when the "browser" follows it (redirected), else when ctx ends.
type browserSignIn struct {
	mu       sync.Mutex
	logins   int
	redirect chan struct{}
}

func (b *browserSignIn) Login(ctx context.Context, tenant, server string, show func(string)) error {
	b.mu.Lock()
	b.logins++
	b.redirect = make(chan struct{})
	r := b.redirect
	b.mu.Unlock()
	show("https://as.example/authorize?client_id=cexec&state=s&resource=" + server)
	select {
	case <-r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *browserSignIn) follow() {
	b.mu.Lock()
	close(b.redirect)
	b.mu.Unlock()
}

// urlAsker is a user whose client can (or cannot) show URLs.
type urlAsker struct {
	canURL bool
	answer func(p mcp.ElicitationParams) mcp.ElicitationResponseAction

	mu        sync.Mutex
	asked     []mcp.ElicitationParams
	completed []string
}

func (a *urlAsker) CanAsk(mode string) bool { return mode != mcp.ElicitationModeURL || a.canURL }

func (a *urlAsker) Elicit(_ context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, p)
	a.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: a.answer(p)}}, nil
}

func (a *urlAsker) ElicitationComplete(_ context.Context, id string) error {
	a.mu.Lock()
	a.completed = append(a.completed, id)
	a.mu.Unlock()
	return nil
}

func TestSignInLink(t *testing.T) {
	refusal := func(tenant string) *auth.SignInRequiredError {
		return &auth.SignInRequiredError{Server: "gh", Tenant: tenant, Reason: "not signed in"}
	}
	t.Run("accepted: one link for concurrent calls, then signed in", func(t *testing.T) {
		b := &browserSignIn{}
		a := &urlAsker{canURL: true, answer: func(p mcp.ElicitationParams) mcp.ElicitationResponseAction {
			b.follow()
			return mcp.ElicitationResponseActionAccept
		}}
		x := &Executor{SignIn: b, Log: hclog.NewNullLogger()}
		hook := x.signInHook(&CodeRequest{Tenant: "acme", Asker: a})
		var wg sync.WaitGroup
		oks := make([]bool, 4)
		for i := range oks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				oks[i], _ = hook(context.Background(), refusal("acme"))
			}()
		}
		wg.Wait()
		for i, ok := range oks {
			if !ok {
				t.Errorf("call %d: not signed in", i)
			}
		}
		if len(a.asked) != 1 || b.logins != 1 {
			t.Fatalf("%d prompts, %d sign-ins; want one each", len(a.asked), b.logins)
		}
		p := a.asked[0]
		if p.Mode != mcp.ElicitationModeURL || p.ElicitationID == "" || !strings.HasPrefix(p.URL, "https://as.example/authorize") ||
			!strings.Contains(p.Message, "gh") || !strings.Contains(p.Message, "acme") {
			t.Errorf("prompt %+v", p)
		}
		if len(a.completed) != 1 || a.completed[0] != p.ElicitationID {
			t.Errorf("elicitation complete for %v, want %s", a.completed, p.ElicitationID)
		}
	})
	t.Run("declined: the note, and no second prompt", func(t *testing.T) {
		b := &browserSignIn{}
		a := &urlAsker{canURL: true, answer: func(mcp.ElicitationParams) mcp.ElicitationResponseAction {
			return mcp.ElicitationResponseActionDecline
		}}
		x := &Executor{SignIn: b, Log: hclog.NewNullLogger()}
		hook := x.signInHook(&CodeRequest{Tenant: "acme", Asker: a})
		for range 2 {
			ok, note := hook(context.Background(), refusal("acme"))
			if ok || note != "the user declined the sign-in link" {
				t.Errorf("declined: %v %q", ok, note)
			}
		}
		if len(a.asked) != 1 {
			t.Errorf("%d prompts, want 1", len(a.asked))
		}
	})
	t.Run("nothing offered", func(t *testing.T) {
		never := func(mcp.ElicitationParams) mcp.ElicitationResponseAction { panic("asked") }
		x := &Executor{SignIn: &browserSignIn{}, Log: hclog.NewNullLogger()}
		if x.signInHook(&CodeRequest{Tenant: "acme", Asker: &urlAsker{answer: never}}) != nil {
			t.Error("a client without URL mode got a hook")
		}
		if x.signInHook(&CodeRequest{Tenant: "acme"}) != nil {
			t.Error("a request without an asker got a hook")
		}
		if (&Executor{}).signInHook(&CodeRequest{Tenant: "acme", Asker: &urlAsker{canURL: true, answer: never}}) != nil {
			t.Error("an executor without SignIn got a hook")
		}
		// A shared server's sign-in is the default tenant's: not acme's to give.
		hook := x.signInHook(&CodeRequest{Tenant: "acme", Asker: &urlAsker{canURL: true, answer: never}})
		if ok, note := hook(context.Background(), refusal("default")); ok || note != "" {
			t.Errorf("another tenant's sign-in: %v %q", ok, note)
		}
	})
	t.Run("the execution ends while waiting for the redirect", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		a := &urlAsker{canURL: true, answer: func(mcp.ElicitationParams) mcp.ElicitationResponseAction {
			cancel() // accepted, but the browser never comes back before the deadline
			return mcp.ElicitationResponseActionAccept
		}}
		x := &Executor{SignIn: &browserSignIn{}, Log: hclog.NewNullLogger()}
		hook := x.signInHook(&CodeRequest{Tenant: "acme", Asker: a})
		if ok, _ := hook(ctx, refusal("acme")); ok {
			t.Error("signed in without a redirect")
		}
		if len(x.signIns.m) != 0 {
			t.Error("the ended sign-in is still registered")
		}
	})
}
