package bridge

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cexec/cexec/core/auth"
)

func TestAfterSignIn(t *testing.T) {
	refused := fmt.Errorf("call gh/issues: %w", &auth.SignInRequiredError{Server: "gh", Tenant: "acme", Reason: "not signed in"})
	other := errors.New("call gh/issues: boom")
	for _, tc := range []struct {
		name       string
		err        error
		ok         bool
		note       string
		wantHook   bool
		wantAgain  bool
		wantSuffix string
	}{
		{name: "signed in: one more call", err: refused, ok: true, wantHook: true, wantAgain: true},
		{name: "declined: the note", err: refused, note: "the user declined the sign-in link", wantHook: true, wantSuffix: "; the user declined the sign-in link"},
		{name: "not offered: as it was", err: refused, wantHook: true},
		{name: "another error: no hook", err: other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooked, again := 0, 0
			hook := func(_ context.Context, e *auth.SignInRequiredError) (bool, string) {
				hooked++
				if e.Server != "gh" || e.Tenant != "acme" {
					t.Errorf("hook got %+v", e)
				}
				return tc.ok, tc.note
			}
			v, err := afterSignIn(context.Background(), tc.err, hook, func() (string, error) { again++; return "result", nil })
			if (hooked == 1) != tc.wantHook || (again == 1) != tc.wantAgain || hooked > 1 || again > 1 {
				t.Fatalf("hook %d, again %d", hooked, again)
			}
			if tc.wantAgain {
				if v != "result" || err != nil {
					t.Errorf("retried call: %q %v", v, err)
				}
				return
			}
			if err == nil || err.Error() != tc.err.Error()+tc.wantSuffix {
				t.Errorf("error %v, want %v%s", err, tc.err, tc.wantSuffix)
			}
			var e *auth.SignInRequiredError
			if tc.err == refused && !errors.As(err, &e) {
				t.Error("the SignInRequiredError was lost")
			}
		})
	}
}
