package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/cexec/cexec/core/auth"
)

// SignInFunc is offered a call that an OAuth-protected server refused for
// want of a sign-in. It returns true once the tenant has signed in (the
// call is then made once more), else false with, when something was tried
// (a sign-in link offered to the user), a note on how it ended, added to
// the program's SignInRequired error.
type SignInFunc func(ctx context.Context, e *auth.SignInRequiredError) (signedIn bool, note string)

// afterSignIn offers a refusal for want of a sign-in to signIn and, when
// the tenant signed in, makes the call once more: one retry, never a loop.
func afterSignIn[T any](ctx context.Context, err error, signIn SignInFunc, again func() (T, error)) (T, error) {
	var zero T
	var e *auth.SignInRequiredError
	if signIn == nil || ctx.Err() != nil || !errors.As(err, &e) {
		return zero, err
	}
	ok, note := signIn(ctx, e)
	switch {
	case ok:
		return again()
	case note != "":
		return zero, fmt.Errorf("%w; %s", err, note)
	}
	return zero, err
}
