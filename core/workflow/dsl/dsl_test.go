package dsl

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestLoadGood(t *testing.T) {
	src, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load("good.yaml", src)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := d.Name(); got != "examples/notes:0.1.0" {
		t.Errorf("name %q", got)
	}
	if n := len(*d.Workflow.Do); n != 4 {
		t.Errorf("%d tasks, want 4", n)
	}
}

// TestLoadBroken checks that each problem of a broken document is named
// at its line.
func TestLoadBroken(t *testing.T) {
	src, err := os.ReadFile("testdata/broken.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load("broken.yaml", src)
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("want Diagnostics, got %v", err)
	}
	want := []string{
		"broken.yaml:8:13: task fetch: call: http is not supported",
		"broken.yaml:16:9: task remember: with.transport: inline MCP transports are not allowed",
		"broken.yaml:15:9: task remember: with needs tool",
		"broken.yaml:22:21: task compute: run.script.language must be python",
		"broken.yaml:26:12: expression \"${ .a | }\"",
		"broken.yaml:30:13: then: \"nowhere\" is neither",
		"broken.yaml:32:7: task notify: emit is not a task cexec runs",
	}
	got := err.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	if len(ds) != len(want) {
		t.Errorf("%d diagnostics, want %d:\n%s", len(ds), len(want), got)
	}
}

// TestPlainValues checks that words in values a task passes on are not
// taken for expressions: only ${ } is one there.
func TestPlainValues(t *testing.T) {
	src := "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      call: mcp\n      with:\n        server: m\n        tool: t\n        arguments:\n          when: tomorrow at five\n          in: the morning\n  - b:\n      set:\n        if: maybe so\n"
	if _, err := Load("x.yaml", []byte(src)); err != nil {
		t.Fatal(err)
	}
}

// TestLoopAndErrorVariables: names a document gives its loop items and
// caught errors are variables its expressions may use.
func TestLoopAndErrorVariables(t *testing.T) {
	src := "document: {dsl: 1.0.0, namespace: a, name: b, version: 1.0.0}\ndo:\n  - l:\n      for: {each: note, at: n, in: .notes}\n      do:\n        - s: {set: {x: \"${ [$note, $n, $item, $index] }\"}}\n  - t:\n      try:\n        - r: {raise: {error: {type: x, status: 500}}}\n      catch:\n        as: oops\n        do:\n          - h: {set: {e: \"${ $oops.status + $context.x + ($workflow.input | length) }\"}}\n"
	if _, err := Load("x.yaml", []byte(src)); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "document:\n  dsl: 1.0.0\n do: [", "x.yaml:2:1: syntax: did not find expected key"},
		{"dsl version", "document:\n  dsl: 0.8\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: 1}\n", "x.yaml:2:3: document.dsl: \"0.8\" is not supported"},
		{"sdk field rule", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: B_C\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: 1}\n", "x.yaml:4:9: document.name: fails the \"hostname_rfc1123\" rule"},
		{"no do", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\n", "x.yaml:1:1: do: missing"},
		{"json", "{\"document\": {\"dsl\": \"1.0.0\", \"namespace\": \"a\", \"name\": \"b\", \"version\": \"1.0.0\"},\n \"do\": [{\"a\": {\"wait\": \"PT1S\", \"call\": \"grpc\"}}]}", "x.yaml:2:40: task a: call: grpc is not supported"},
		{"unknown server", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      call: mcp\n      with:\n        server: n\n        tool: t\n", "x.yaml:10:17: task a: with.server: \"n\" is not an mcp_server of cexec.hcl"},
		{"bare when", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      switch:\n        - x:\n            when: .a b\n            then: end\n", "x.yaml:10:19: expression \".a b\""},
		{"workflow input.from", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ninput:\n  from: ${ .x | }\ndo:\n  - a:\n      set: {x: 1}\n", "x.yaml:7:9: expression \"${ .x | }\""},
		{"workflow output.as", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: 1}\noutput:\n  as:\n    y: ${ .x | }\n", "x.yaml:11:8: expression \"${ .x | }\""},
		{"undefined variable", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: \"${ $contxt.a }\"}\n", "x.yaml:8:16: expression \"${ $contxt.a }\": variable not defined: $contxt"},
		{"undefined function", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      if: nosuchfn(1)\n      set: {x: 1}\n", "x.yaml:8:11: expression \"nosuchfn(1)\": function not defined: nosuchfn/1"},
		{"duration in years", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      wait: P1Y\n", "x.yaml:8:13: task a: wait: duration \"P1Y\""},
		{"duration overflows", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      wait: P300000D\n", "x.yaml:8:13: task a: wait: duration \"P300000D\" is longer than"},
		{"inline duration overflows", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: 1}\n      timeout:\n        after: {days: 200000}\n", "x.yaml:10:16: task a: timeout.after: duration is longer than"},
		{"negative duration", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ntimeout:\n  after: {seconds: -5}\ndo:\n  - a:\n      set: {x: 1}\n", "x.yaml:7:20: timeout.after: seconds must be a whole number of at least 0"},
		{"retry delay", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      try:\n        - b: {set: {x: 1}}\n      catch:\n        retry:\n          delay: P2M\n", "x.yaml:12:18: task a: catch.retry.delay: duration \"P2M\""},
		{"retry without limit", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      try:\n        - b: {set: {x: 1}}\n      catch:\n        retry:\n          delay: PT1S\n", "x.yaml:11:9: task a: catch.retry: needs limit.attempt.count"},
		{"use.retries without limit", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\nuse:\n  retries:\n    again: {delay: PT1S}\ndo:\n  - a:\n      try:\n        - b: {set: {x: 1}}\n      catch:\n        retry: again\n", "x.yaml:8:5: use.retries.again: needs limit.attempt.count"},
		{"listen to nothing", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      listen:\n        to: {}\n", "x.yaml:9:13: task a: listen needs to (one or any)"},
		{"duplicate task name", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      set: {x: 1}\n  - a:\n      set: {x: 2}\n", "x.yaml:9:5: task a: another task of this list has that name"},
		{"unknown server method", "document:\n  dsl: 1.0.0\n  namespace: a\n  name: b\n  version: 1.0.0\ndo:\n  - a:\n      call: mcp\n      with:\n        server: m\n        method: sampling/createMessage\n", "x.yaml:11:17: task a: with.method \"sampling/createMessage\" is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadWith("x.yaml", []byte(tt.src), Options{Server: func(s string) bool { return s == "m" }})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDurationDiagnostics: each bad duration, and each rule of the SDK's
// validator a task breaks, is one line naming file:line:column, never the
// same complaint twice.
func TestDurationDiagnostics(t *testing.T) {
	head := "document: {dsl: 1.0.0, namespace: test, name: t, version: 1.0.0}\n"
	const expr = `duration "${ .d }" is an expression; cexec takes a duration as written: ISO 8601 (PT1M30S) or inline (seconds: 90)`
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"bad ISO wait", "do:\n  - a: {wait: PT1X}\n",
			[]string{`w.yaml:3:15: task a: wait: duration "PT1X" is not ISO 8601 days to seconds (PT1M30S, P2D; no years, months or weeks) nor inline (seconds: 90)`}},
		{"negative inline timeout", "timeout: {after: {seconds: -3}}\ndo:\n  - a: {set: {x: 1}}\n",
			[]string{"w.yaml:2:28: timeout.after: seconds must be a whole number of at least 0"}},
		{"expression wait", "do:\n  - a: {wait: \"${ .d }\"}\n",
			[]string{"w.yaml:3:15: task a: wait: " + expr}},
		{"expression task timeout", "do:\n  - a: {set: {x: 1}, timeout: {after: \"${ .d }\"}}\n",
			[]string{"w.yaml:3:39: task a: timeout.after: " + expr}},
		{"expression retry delay", "do:\n  - a:\n      try:\n        - b: {set: {x: 1}}\n      catch:\n        retry: {delay: \"${ .d }\", limit: {attempt: {count: 2}}}\n",
			[]string{"w.yaml:7:24: task a: catch.retry.delay: " + expr}},
		{"an SDK rule of a task", "do:\n  - a: {set: {}}\n",
			[]string{`w.yaml:3:14: do[0].set: fails the "min" rule (1)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("w.yaml", []byte(head+tt.doc))
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("want Diagnostics, got %v", err)
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
