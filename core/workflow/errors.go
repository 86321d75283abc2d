package workflow

import (
	"errors"
	"fmt"
)

// Error types of the DSL (https://serverlessworkflow.io/spec/1.0.0/errors/…).
const (
	errBase          = "https://serverlessworkflow.io/spec/1.0.0/errors/"
	ErrConfiguration = errBase + "configuration"
	ErrValidation    = errBase + "validation"
	ErrExpression    = errBase + "expression"
	ErrAuthorization = errBase + "authorization"
	ErrTimeout       = errBase + "timeout"
	ErrCommunication = errBase + "communication"
	ErrRuntime       = errBase + "runtime"
)

// Error is a workflow error as the DSL defines it: what raise raises and
// try catches, and what a failed run reports.
type Error struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Title    string `json:"title,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

func (e *Error) Error() string {
	s := e.Type
	if e.Title != "" {
		s = e.Title
	}
	if e.Instance != "" {
		s = e.Instance + ": " + s
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// asError makes any failure a workflow error at a task.
func asError(err error, instance string) *Error {
	var we *Error
	if !errors.As(err, &we) {
		we = &Error{Type: ErrRuntime, Status: 500, Title: "task failed", Detail: err.Error()}
	} else {
		c := *we
		we = &c
	}
	if we.Instance == "" {
		we.Instance = instance
	}
	return we
}

// asMap is the error as a value expressions see ($error in catch).
func (e *Error) asMap() map[string]any {
	return map[string]any{"type": e.Type, "status": float64(e.Status), "title": e.Title, "detail": e.Detail, "instance": e.Instance}
}

func validationError(what string, detail string) *Error {
	return &Error{Type: ErrValidation, Status: 400, Title: what + " is not valid", Detail: detail}
}

func errorf(typ string, status int, format string, args ...any) *Error {
	return &Error{Type: typ, Status: status, Detail: fmt.Sprintf(format, args...)}
}

// ErrState: the run is not in a state that allows the request (resume a
// running run, signal an ended one).
var ErrState = errors.New("not allowed in the run's state")

// errElsewhere: another replica holds (executes) the run.
var errElsewhere = errors.New("it is running on another replica")
