package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/core/workflow/jqworker"
)

// vars are the $names an expression sees ($context, $input, $workflow, loop
// variables …), by name without the $.
type vars map[string]any

func (v vars) with(name string, val any) vars {
	out := make(vars, len(v)+1)
	for k, x := range v {
		out[k] = x
	}
	out[name] = val
	return out
}

// exprs evaluates a run's expressions in the engine's jq workers, shared
// fairly among tenants.
type exprs struct {
	jq     *jqworker.Pool
	tenant string
}

// maxExprTime bounds one expression's evaluation. Expressions are written
// by tenants: one that never ends must not outlive its run or hold a
// worker for ever, and at the limit its worker is killed, even in the
// middle of one long jq step. Reshaping JSON takes milliseconds.
const maxExprTime = 2 * time.Second

// eval runs one jq program over data in a worker; its first result is the
// value. It stops when ctx ends or after maxExprTime; a program that needs
// more than jqworker.MemoryLimit, or gives a result larger than
// jqworker.MaxResult, fails.
func (x *exprs) eval(ctx context.Context, src string, data any, v vars) (any, error) {
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	slices.Sort(names)
	vals := make([]any, len(names))
	for i, n := range names {
		vals[i] = v[n]
	}
	out, err := x.jq.Eval(ctx, x.tenant, maxExprTime, dsl.Unwrap(src), data, names, vals)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("still running after %s, the limit of one expression", maxExprTime)
		}
		return nil, exprError(src, err)
	}
	return out, nil
}

// value evaluates every runtime expression inside a value from the
// document (a string ${ … }, or strings within maps and lists); other
// values are copied as they are.
func (x *exprs) value(ctx context.Context, val any, data any, v vars) (any, error) {
	switch t := val.(type) {
	case string:
		if dsl.IsExpr(t) {
			return x.eval(ctx, t, data, v)
		}
		return t, nil
	case dsl.RuntimeExpression:
		return x.eval(ctx, t.Value, data, v)
	case *dsl.RuntimeExpression:
		return x.eval(ctx, t.Value, data, v)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := x.value(ctx, e, data, v)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := x.value(ctx, e, data, v)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return val, nil
}

// truthy evaluates a condition (if, when, while): a bare jq program or
// ${ … }; only true passes.
func (x *exprs) truthy(ctx context.Context, src string, data any, v vars) (bool, error) {
	out, err := x.eval(ctx, src, data, v)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	return ok && b, nil
}

func exprError(src string, err error) error {
	return &Error{Type: ErrExpression, Status: 400, Title: "expression failed", Detail: fmt.Sprintf("%s: %v", src, err)}
}

// normalize turns any Go value into what jq works on (JSON's types).
func normalize(v any) (any, error) {
	switch v.(type) {
	case nil, bool, string, float64, int, map[string]any, []any:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}
