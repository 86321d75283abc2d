package workflow

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTasks runs small documents of the control-flow tasks and checks the
// output or the error each ends with.
func TestTasks(t *testing.T) {
	head := "document: {dsl: 1.0.0, namespace: test, name: t, version: 1.0.0}\n"
	tests := []struct {
		name, doc, input, want, wantErr string
	}{
		{"set and expressions", `do:
  - a: {set: {x: "${ .n + 1 }", y: plain, z: "${ $workflow.input.n * 10 }"}}
`, `{"n":1}`, `{"x":2,"y":"plain","z":10}`, ""},
		{"if skips", `do:
  - a: {if: ".skip | not", set: {x: 1}}
`, `{"skip":true}`, `{"skip":true}`, ""},
		{"then loops back", `do:
  - init: {set: {i: 0}}
  - inc: {set: {i: "${ .i + 1 }"}}
  - again:
      switch:
        - more: {when: .i < 3, then: inc}
        - done: {then: continue}
  - last: {set: {i: "${ .i }", last: true}}
`, ``, `{"i":3,"last":true}`, ""},
		{"then end", `do:
  - a: {set: {x: 1}, then: end}
  - b: {set: {x: 2}}
`, ``, `{"x":1}`, ""},
		{"exit leaves the do", `do:
  - inner:
      do:
        - a: {set: {x: 1}, then: exit}
        - b: {set: {x: 2}}
  - after: {set: {x: "${ .x + 10 }"}}
`, ``, `{"x":11}`, ""},
		{"for with at and while", `do:
  - loop:
      for: {each: v, in: .vs, at: i}
      while: .sum < 5
      do:
        - add: {set: {sum: "${ .sum + $v }", last: "${ $i }"}}
`, `{"vs":[1,2,3,4],"sum":0}`, `{"last":2,"sum":6}`, ""},
		{"fork", `do:
  - both:
      fork:
        branches:
          - a: {set: {a: 1}}
          - b: {set: {b: 2}}
`, ``, `[{"a":1},{"b":2}]`, ""},
		{"fork compete", `do:
  - first:
      fork:
        compete: true
        branches:
          - slow: {wait: {seconds: 30}}
          - fast: {set: {won: true}}
`, ``, `{"won":true}`, ""},
		{"raise and catch", `do:
  - guarded:
      try:
        - boom:
            raise:
              error: {type: https://example.com/errors/boom, status: 418, title: Boom, detail: "${ .why }"}
      catch:
        errors: {with: {status: 418}}
        as: e
        do:
          - handle: {set: {caught: "${ $e.title + \": \" + $e.detail }"}}
`, `{"why":"testing"}`, `{"caught":"Boom: testing"}`, ""},
		{"raise uncaught", `use:
  errors:
    nope: {type: https://example.com/errors/nope, status: 409, title: Nope}
do:
  - guarded:
      try:
        - boom: {raise: {error: nope}}
      catch:
        errors: {with: {status: 500}}
`, ``, "", "Nope"},
		{"retry exhausted", `do:
  - guarded:
      try:
        - boom: {raise: {error: {type: https://example.com/e, status: 503, title: Down}}}
      catch:
        retry: {limit: {attempt: {count: 2}}}
`, ``, "", "Down"},
		{"output and export", `do:
  - a:
      set: {x: 1, y: 2}
      output: {as: "${ {x: .x} }"}
      export: {as: "${ {saw: .x} }"}
  - b: {set: {ctx: "${ $context.saw }"}}
`, ``, `{"ctx":1}`, ""},
		{"output schema", `do:
  - a:
      set: {x: "one"}
      output:
        schema:
          document: {type: object, properties: {x: {type: integer}}}
`, ``, "", "x"},
		{"task timeout", `do:
  - slow:
      wait: {seconds: 30}
      timeout: {after: {milliseconds: 10}}
`, ``, "", "timed out"},
		{"workflow timeout", `timeout: {after: {milliseconds: 10}}
do:
  - slow:
      wait: {seconds: 30}
`, ``, "", "errors/timeout: the workflow timed out after 10ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}})
			defer e.Close()
			ctx := context.Background()
			st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, head+tt.doc), Input: json.RawMessage(tt.input)})
			if err != nil {
				t.Fatal(err)
			}
			st, _ = e.Wait(ctx, "acme", st.Run)
			if tt.wantErr != "" {
				if st.State != StateFailed || !strings.Contains(st.Error.Error(), tt.wantErr) {
					t.Fatalf("state %s error %v, want an error with %q", st.State, st.Error, tt.wantErr)
				}
				return
			}
			if st.State != StateCompleted || string(st.Output) != tt.want {
				t.Fatalf("state %s output %s error %v, want %s", st.State, st.Output, st.Error, tt.want)
			}
		})
	}
}

// TestExpressionsBounded: jq expressions are written by tenants; one that
// never ends fails its run after the limit of one expression, one cut by
// the run's own timeout stops with it, instead of spinning on (and holding
// whatever it builds) for ever; one that takes more memory than one
// expression may, or gives a larger result, fails its run, and cexecd's
// own heap does not hold what it built.
func TestExpressionsBounded(t *testing.T) {
	head := "document: {dsl: 1.0.0, namespace: test, name: t, version: 1.0.0}\n"
	const spin = `"${ reduce range(0; infinite) as $i (0; .) }"`
	tests := []struct {
		name, doc, wantErr string
		within             time.Duration
	}{
		{"no timeout", "do:\n  - a: {set: {x: " + spin + "}}\n", "the limit of one expression", maxExprTime + 5*time.Second},
		{"the run's timeout", "timeout: {after: {milliseconds: 200}}\ndo:\n  - a: {set: {x: " + spin + "}}\n", "the workflow timed out after 200ms", maxExprTime / 2},
		{"a condition", "do:\n  - a: {if: " + spin + ", set: {x: 1}}\n", "the limit of one expression", maxExprTime + 5*time.Second},
		{"one large step", `do:
  - a: {set: {x: "${ \"x\" * 3e8 | length }"}}
`, "used more than 256 MiB of memory, the limit of one expression", time.Minute},
		{"a large array", `do:
  - a: {set: {x: "${ null | .[5e8] = 1 | length }"}}
`, "used more than 256 MiB of memory, the limit of one expression", time.Minute},
		{"growing step by step", `do:
  - a: {set: {x: "${ reduce range(40) as $i (\"x\"; . + .) | length }"}}
`, "used more than 256 MiB of memory, the limit of one expression", time.Minute},
		{"a large result", `do:
  - a: {set: {x: "${ \"x\" * 17e6 }"}}
`, "more than 16 MiB, the limit of one expression's result", time.Minute},
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	t.Cleanup(func() {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := int64(after.Sys) - int64(before.Sys); grew > 64<<20 {
			t.Errorf("the test process grew by %d MiB", grew>>20)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEmbedded(Options{Journals: newStore(t), Effects: &effects{}})
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), tt.within)
			defer cancel()
			st, err := e.Start(ctx, StartRequest{Tenant: "acme", Document: load(t, head+tt.doc)})
			if err != nil {
				t.Fatal(err)
			}
			st, err = e.Wait(ctx, "acme", st.Run)
			if err != nil {
				t.Fatalf("the run still goes after %s: %v", tt.within, err)
			}
			if st.State != StateFailed || st.Error == nil || !strings.Contains(st.Error.Error(), tt.wantErr) {
				t.Fatalf("state %s error %v, want failed with %q", st.State, st.Error, tt.wantErr)
			}
		})
	}
}
