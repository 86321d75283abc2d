package jqworker

import (
	"context"
	"testing"
)

// BenchmarkEvalNull is the round trip to a worker and back with nothing
// to do: the floor of an evaluation's cost.
func BenchmarkEvalNull(b *testing.B) {
	p := NewPool()
	defer p.Close()
	ctx := context.Background()
	for range b.N {
		if _, err := p.Eval(ctx, "t", 0, "null", nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalMap is a typical small expression, without and with the
// variables a task's expressions see.
func BenchmarkEvalMap(b *testing.B) {
	p := NewPool()
	defer p.Close()
	ctx := context.Background()
	data := map[string]any{"items": []any{
		map[string]any{"name": "a", "n": 1.0}, map[string]any{"name": "b", "n": 2.0}, map[string]any{"name": "c", "n": 3.0},
	}}
	for _, tc := range []struct {
		name  string
		names []string
		vals  []any
	}{{"novars", nil, nil}, {"vars", []string{"context", "input", "workflow"}, []any{map[string]any{"user": "u"}, data, map[string]any{"id": "r1"}}}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				if _, err := p.Eval(ctx, "t", 0, ".items | map(.name)", data, tc.names, tc.vals); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
