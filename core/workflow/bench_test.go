package workflow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cexec/cexec/core/workflow/jqworker"
)

// nopEffects answers at once, so a run's time is the engine's own:
// expressions, data flow and the journal (two fsynced records per call
// task: start and done).
type nopEffects struct{}

func (nopEffects) CallMCP(context.Context, MCPCall) (any, error) {
	return map[string]any{"ok": true}, nil
}
func (nopEffects) RunScript(context.Context, Script) (any, error) { return nil, nil }

// noSync journals without fsync, to show what of the overhead is the disk.
type noSync struct{ Journals }

func (n noSync) AppendRun(tenant, run string, rec []byte, _ bool) error {
	return n.Journals.AppendRun(tenant, run, rec, false)
}

// BenchmarkEngine100Tasks runs a 100-task workflow (call tasks with an
// argument expression) and prints the engine's overhead per task, p50 over
// the runs, excluding tool and sandbox time: with the journal as cexecd
// keeps it (fsync per finished task), and without fsync.
func BenchmarkEngine100Tasks(b *testing.B) {
	b.Run("fsync", func(b *testing.B) { benchEngine(b, newStore(b)) })
	b.Run("nofsync", func(b *testing.B) { benchEngine(b, noSync{newStore(b)}) })
}

func benchEngine(b *testing.B, store Journals) {
	var sb strings.Builder
	sb.WriteString("document: {dsl: 1.0.0, namespace: bench, name: hundred, version: 1.0.0}\ndo:\n")
	for i := range 100 {
		fmt.Fprintf(&sb, "  - t%d:\n      call: mcp\n      with: {server: s, tool: t, arguments: {i: %d, prev: \"${ .ok }\"}}\n", i, i)
	}
	doc := load(b, sb.String())
	e := NewEmbedded(Options{Journals: store, Effects: nopEffects{}, MaxConcurrent: 1})
	defer e.Close()
	ctx := context.Background()
	perTask := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		st, err := e.Start(ctx, StartRequest{Tenant: "bench", Document: doc})
		if err != nil {
			b.Fatal(err)
		}
		if st, err = e.Wait(ctx, "bench", st.Run); err != nil || st.State != StateCompleted {
			b.Fatalf("run %s: %v %v", st.State, st.Error, err)
		}
		perTask = append(perTask, time.Since(start)/100)
	}
	b.StopTimer()
	slices.Sort(perTask)
	p50 := perTask[len(perTask)/2]
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns/task")
	b.Logf("engine overhead per task, p50 over %d runs of 100 tasks: %s (max %s)", len(perTask), p50, perTask[len(perTask)-1])
}

// BenchmarkExpr evaluates a typical small expression over a small input
// with the variables a task sees: the cost of one evaluation.
func BenchmarkExpr(b *testing.B) {
	x := exprs{jq: jqworker.NewPool()}
	defer x.jq.Close()
	data := map[string]any{"items": []any{
		map[string]any{"name": "a", "n": 1.0}, map[string]any{"name": "b", "n": 2.0}, map[string]any{"name": "c", "n": 3.0},
	}}
	v := vars{"context": map[string]any{"user": "u"}, "input": data, "workflow": map[string]any{"id": "r1"}}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		out, err := x.eval(ctx, "${ .items | map(.name) }", data, v)
		if err != nil || len(out.([]any)) != 3 {
			b.Fatal(out, err)
		}
	}
}
