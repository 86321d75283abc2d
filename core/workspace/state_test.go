package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// sameJSON compares two JSON texts token by token: same values, same key
// order, same number text, whatever the string escaping.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	tokens := func(b []byte) []any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var out []any
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatalf("invalid JSON %s: %v", b, err)
			}
			out = append(out, tok)
		}
	}
	g, w := tokens(got), tokens(want)
	if len(g) != len(w) {
		t.Fatalf("JSON differs:\n got %s\nwant %s", got, want)
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("JSON differs at token %d (%v vs %v):\n got %s\nwant %s", i, g[i], w[i], got, want)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	values := []string{
		`{"b":1,"a":[1,2.50,"x"],"n":null,"t":true,"f":false}`,
		`{"id":12345678901234567890123,"tiny":1e-400,"huge":1E400,"neg":-0,"exp":6.02e23}`,
		`["true","null","123","","a: b","- x","#c","'q'","\"dq\"","multi\nline\n","tab\there","nul\u0000byte","emoji 🎉","<&>","  padded  ","~","yes","0x1F",".inf"]`,
		`{"":"empty key","key: colon":1,"- dash":2,"123":3,"true":4}`,
		`{"empty_obj":{},"empty_arr":[],"nested":{"a":{"b":{"c":[[],[{}]]}}}}`,
		`42`,
		`"just a string"`,
		`null`,
		`true`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
	}
	for i, v := range values {
		for _, ext := range []string{".json", ".yaml", ".yml"} {
			name := "v" + string(rune('a'+i)) + ext
			if _, err := tn.SaveState(name, json.RawMessage(v)); err != nil {
				t.Fatalf("SaveState(%s, %s): %v", name, v, err)
			}
			got, err := tn.GetState(name)
			if err != nil {
				t.Fatalf("GetState(%s): %v", name, err)
			}
			sameJSON(t, got, []byte(v))
			onDisk, err := os.ReadFile(filepath.Join(tn.WorkspaceDir(), "state", name))
			if err != nil {
				t.Fatal(err)
			}
			if ext == ".json" && string(onDisk) != v {
				t.Errorf("%s on disk = %q, want the value as given", name, onDisk)
			}
			raw, err := tn.GetStateFile(name)
			if err != nil || !bytes.Equal(raw, onDisk) {
				t.Errorf("GetStateFile(%s) = %q, %v; want the file", name, raw, err)
			}
		}
	}
	// YAML files really are YAML, readable by people and by sandboxed code.
	onDisk, _ := os.ReadFile(filepath.Join(tn.WorkspaceDir(), "state", "va.yaml"))
	if want := "b: 1\na:\n  - 1\n  - 2.50\n  - x\nn: null\nt: true\nf: false\n"; string(onDisk) != want {
		t.Errorf("va.yaml =\n%s\nwant\n%s", onDisk, want)
	}
}

func TestYAMLWrittenBySandboxedCode(t *testing.T) {
	m := newManager(t, Options{MaxStateBytes: 1 << 20})
	tn := mustTenant(t, m, "acme")
	tests := []struct {
		name, yaml, want, errHas string
	}{
		{name: "anchors and merge keys", yaml: `
base: &b {x: 1, y: 2}
derived:
  <<: *b
  y: 3
multi:
  <<: [{p: 1}, {p: 2, q: 2}]
  r: 0
list: [*b, *b]
`, want: `{"base":{"x":1,"y":2},"derived":{"x":1,"y":3},"multi":{"p":1,"q":2,"r":0},"list":[{"x":1,"y":2},{"x":1,"y":2}]}`},
		{name: "scalar types", yaml: `
when: 2026-01-02
bin: !!binary aGVsbG8=
hex: 0x1F
plus: +5
big: 123456789012345678901234567890
f: 1.5
custom: !thing text
key with spaces: ok
1: one
~: nullkey
true: yes
`, want: `{"when":"2026-01-02","bin":"aGVsbG8=","hex":31,"plus":5,"big":123456789012345678901234567890,"f":1.5,"custom":"text","key with spaces":"ok","1":"one","null":"nullkey","true":"yes"}`},
		{name: "empty document", yaml: "", want: `null`},
		{name: "comment only", yaml: "# nothing\n", want: `null`},
		{name: "infinity", yaml: "x: .inf\n", errHas: "no JSON form"},
		{name: "nan", yaml: "x: .nan\n", errHas: "no JSON form"},
		{name: "complex key", yaml: "? [a, b]\n: c\n", errHas: "not a scalar"},
		{name: "two documents", yaml: "a: 1\n---\nb: 2\n", errHas: "more than one document"},
		{name: "broken", yaml: "a: [1, 2\n", errHas: "invalid YAML"},
		{name: "alias bomb", yaml: aliasBomb(), errHas: "aliases and merge keys expand to more than 10000 nodes"},
		{name: "merge bomb", yaml: mergeBomb(), errHas: "aliases and merge keys expand to more than 10000 nodes"},
		{name: "deeply nested", yaml: strings.Repeat("[", 5000) + strings.Repeat("]", 5000), errHas: "nested deeper than 1000 levels"},
		{name: "deeply nested mappings", yaml: strings.Repeat("{a: ", 5000) + "1" + strings.Repeat("}", 5000), errHas: "nested deeper than 1000 levels"},
		{name: "many uses of one anchor", yaml: "a: &a {x: [1, 2, 3]}\nb: [" + strings.Repeat("*a, ", 500) + "*a]\n",
			want: `{"a":{"x":[1,2,3]},"b":[` + strings.Repeat(`{"x":[1,2,3]},`, 500) + `{"x":[1,2,3]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(tn.WorkspaceDir(), "state", "s.yaml"), []byte(tc.yaml))
			got, err := tn.GetState("s.yaml")
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("GetState = %s, %v; want an error about %q", got, err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetState: %v", err)
			}
			sameJSON(t, got, []byte(tc.want))
		})
	}
}

// aliasBomb is a "billion laughs" document: small on disk, 10^9 leaves.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// mergeBomb nests merge keys ten deep, ten merges each: the keys repeat, so
// the output stays small while a naive expansion does 10^10 merges.
func mergeBomb() string {
	var b strings.Builder
	b.WriteString("m0: &m0 {k: v}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [%s*m%d]}\n", i, i, strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 9), i-1)
	}
	return b.String()
}

func TestStateErrors(t *testing.T) {
	m := newManager(t, Options{MaxStateBytes: 1024})
	tn := mustTenant(t, m, "acme")
	stateDir := filepath.Join(tn.WorkspaceDir(), "state")

	tests := []struct {
		name  string
		value string
		is    error
	}{
		{"bad.json", `{"a":`, pluginapi.ErrInvalidArgument},
		{"bad.json", `{"a":1} {"b":2}`, pluginapi.ErrInvalidArgument},
		{"bad.json", "\"\xff\"", pluginapi.ErrInvalidArgument}, // JSON is UTF-8
		{"bad.yaml", `{"a":`, pluginapi.ErrInvalidArgument},
		{"bad.yaml", `[1] 2`, pluginapi.ErrInvalidArgument},
		{"big.json", `"` + strings.Repeat("x", 2000) + `"`, ErrTooLarge},
		{"data.pkl", `1`, pluginapi.ErrInvalidArgument},
		{"../escape.json", `1`, pluginapi.ErrInvalidArgument},
	}
	for _, tc := range tests {
		if _, err := tn.SaveState(tc.name, json.RawMessage(tc.value)); !errors.Is(err, tc.is) {
			t.Errorf("SaveState(%s, %.20s) = %v, want %v", tc.name, tc.value, err, tc.is)
		}
	}
	if _, err := tn.PutStateFile("p.yaml", []byte("a: [1\n")); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("PutStateFile with broken YAML = %v, want ErrInvalidArgument", err)
	}
	if _, err := tn.PutStateFile("p.json", []byte("{")); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("PutStateFile with broken JSON = %v, want ErrInvalidArgument", err)
	}
	entries, _ := os.ReadDir(stateDir)
	if len(entries) != 0 {
		t.Errorf("rejected writes left files: %v", entries)
	}

	if _, err := tn.GetState("missing.json"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("GetState(missing) = %v, want ErrNotFound", err)
	}
	writeFile(t, filepath.Join(stateDir, "junk.json"), []byte("not json"))
	if _, err := tn.GetState("junk.json"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("GetState(junk) = %v, want ErrInvalidArgument", err)
	}
	writeFile(t, filepath.Join(stateDir, "huge.json"), bytes.Repeat([]byte(" "), 2000))
	if _, err := tn.GetState("huge.json"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("GetState(huge) = %v, want ErrTooLarge", err)
	}
	if err := os.Mkdir(filepath.Join(stateDir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.GetState("dir.json"); err == nil {
		t.Error("GetState of a directory succeeded")
	}
	// A FIFO must not block the daemon.
	if err := syscall.Mkfifo(filepath.Join(stateDir, "fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := tn.GetState("fifo.json"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("GetState(fifo) = %v, want 'not a regular file'", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetState blocked on a FIFO")
	}
}

// TestStateRewrittenBySandboxedCode: GetState skips re-parsing only the
// exact bytes it knows to be valid; a file sandboxed code changed, even to
// the same size, is checked again. A replaced file's old content, moved
// aside, is removed.
func TestStateRewrittenBySandboxedCode(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	file := filepath.Join(tn.WorkspaceDir(), "state", "s.json")
	for i, v := range []string{`{"a":1}`, `{"a":2}`, `{"a":3, "a":4}`} {
		if _, err := tn.SaveState("s.json", json.RawMessage(v)); err != nil {
			t.Fatalf("SaveState %d: %v", i, err)
		}
		if got, err := tn.GetState("s.json"); err != nil || string(got) != v {
			t.Fatalf("GetState %d = %s, %v; want %s", i, got, err, v)
		}
	}
	tn.bg.Wait()
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 1 {
		t.Errorf("state folder after replacements = %v, want s.json alone", entries)
	}
	writeFile(t, file, []byte(`{"b":5, "b":6}`))
	if got, err := tn.GetState("s.json"); err != nil || string(got) != `{"b":5, "b":6}` {
		t.Errorf("GetState after a rewrite = %s, %v", got, err)
	}
	writeFile(t, file, []byte(`{"b":5, "b":6,`))
	if _, err := tn.GetState("s.json"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Errorf("GetState after a same-size broken rewrite = %v, want ErrInvalidArgument", err)
	}
}

func TestStateListAndDelete(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	for _, n := range []string{"b.yaml", "a.json", "c.yml"} {
		if _, err := tn.SaveState(n, json.RawMessage(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(tn.WorkspaceDir(), "state")
	writeFile(t, filepath.Join(stateDir, "model.pkl"), []byte("x"))
	writeFile(t, filepath.Join(stateDir, tempPrefix+"a.json-1"), []byte("x"))
	writeFile(t, filepath.Join(stateDir, "sub.json", "inner.json"), []byte("1"))
	list, err := tn.ListState()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name+":"+s.Format)
	}
	if got := strings.Join(names, " "); got != "a.json:json b.yaml:yaml c.yml:yaml" {
		t.Errorf("ListState = %s", got)
	}
	if err := tn.DeleteState("a.json"); err != nil {
		t.Fatal(err)
	}
	if err := tn.DeleteState("a.json"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Errorf("second DeleteState = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "a.json")); !os.IsNotExist(err) {
		t.Errorf("a.json still there: %v", err)
	}
}

func TestStateQuota(t *testing.T) {
	m := newManager(t, Options{DefaultQuota: Quota{DiskBytes: 10 << 10}})
	tn := mustTenant(t, m, "acme")
	stateDir := filepath.Join(tn.WorkspaceDir(), "state")
	blob := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }

	if _, err := tn.SaveState("one.json", blob(6<<10)); err != nil {
		t.Fatal(err)
	}
	_, err := tn.SaveState("two.json", blob(6<<10))
	if !errors.Is(err, ErrQuotaExceeded) || !errors.Is(err, pluginapi.ErrResourceExhausted) {
		t.Fatalf("SaveState over quota = %v, want ErrQuotaExceeded", err)
	}
	if !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("quota error should say nothing was written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "two.json")); !os.IsNotExist(err) {
		t.Errorf("two.json exists after a rejected write")
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 1 {
		t.Errorf("state dir holds %d entries, want only one.json", len(entries))
	}
	// Replacing a file counts only the difference.
	if _, err := tn.SaveState("one.json", blob(9<<10)); err != nil {
		t.Fatalf("growing one.json within quota: %v", err)
	}
	if u, _ := tn.DiskUsage(); u != 9<<10 {
		t.Errorf("DiskUsage = %d, want %d", u, 9<<10)
	}

	// Sandboxed code writes past the quota during an execution.
	run, err := tn.Begin("")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tn.WorkspaceDir(), "out", "dump.bin"), make([]byte, 5<<10))
	if _, err := run.Finish(Entry{Code: "dump()"}); err != nil && !errors.Is(err, ErrQuotaExceeded) {
		t.Fatal(err)
	}
	// The accountant measures in the background; the next execution is
	// refused with its figure.
	settle(tn)
	if _, err = tn.Begin(""); !errors.Is(err, ErrQuotaExceeded) || !strings.Contains(err.Error(), `tenant "acme" is over its disk quota: 14.0 KiB of 10.0 KiB used`) {
		t.Fatalf("Begin over quota = %v, want ErrQuotaExceeded naming the quota", err)
	}
	if _, err := tn.CheckQuota(); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("CheckQuota = %v, want ErrQuotaExceeded", err)
	}
	// Over quota: growing is refused, shrinking and deleting are allowed.
	if _, err := tn.SaveState("small.json", blob(10)); !errors.Is(err, ErrQuotaExceeded) {
		t.Errorf("new file while over quota = %v, want ErrQuotaExceeded", err)
	}
	if _, err := tn.SaveState("one.json", blob(1<<10)); err != nil {
		t.Errorf("shrinking while over quota: %v", err)
	}
	if u, err := tn.CheckQuota(); err != nil || u != 6<<10 {
		t.Errorf("CheckQuota after shrinking = %d, %v; want %d, nil", u, err, 6<<10)
	}
	if err := tn.DeleteState("one.json"); err != nil {
		t.Fatal(err)
	}
	if u, _ := tn.DiskUsage(); u != 5<<10 {
		t.Errorf("DiskUsage after delete = %d, want %d", u, 5<<10)
	}
}

func TestDiskUsageCache(t *testing.T) {
	m := newManager(t, Options{})
	tn := mustTenant(t, m, "acme")
	ws := tn.WorkspaceDir()
	writeFile(t, filepath.Join(ws, "a", "b", "c.txt"), make([]byte, 1000))
	if err := os.Symlink("a/b/c.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	want := int64(1000 + len("a/b/c.txt"))
	if u, err := tn.DiskUsage(); err != nil || u != want {
		t.Fatalf("DiskUsage = %d, %v; want %d", u, err, want)
	}
	// Outside an execution the cache holds; the host's writes update it.
	writeFile(t, filepath.Join(ws, "unseen.txt"), make([]byte, 50))
	if u, _ := tn.DiskUsage(); u != want {
		t.Errorf("cached DiskUsage = %d, want %d", u, want)
	}
	if _, err := tn.SaveState("s.json", json.RawMessage(`[1,2]`)); err != nil {
		t.Fatal(err)
	}
	if u, _ := tn.DiskUsage(); u != want+5 {
		t.Errorf("DiskUsage after SaveState = %d, want %d", u, want+5)
	}
	// After an execution the accountant measures again.
	release, err := tn.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	release()
	settle(tn)
	if u, _ := tn.DiskUsage(); u != want+5+50 {
		t.Errorf("DiskUsage after an execution = %d, want %d", u, want+55)
	}
}

func TestStateSymlinkEscapes(t *testing.T) {
	m := newManager(t, Options{})
	a := mustTenant(t, m, "a")
	b := mustTenant(t, m, "b")
	if _, err := a.SaveState("secret.json", json.RawMessage(`{"pin":1234}`)); err != nil {
		t.Fatal(err)
	}
	aState := filepath.Join(a.WorkspaceDir(), "state")
	bState := filepath.Join(b.WorkspaceDir(), "state")

	// Sandboxed code of b plants links to a's file.
	if err := os.Symlink(filepath.Join(aState, "secret.json"), filepath.Join(bState, "abs.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../a/workspace/state/secret.json", filepath.Join(bState, "rel.json")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"abs.json", "rel.json"} {
		if v, err := b.GetState(n); err == nil {
			t.Errorf("b.GetState(%s) read through a symlink: %s", n, v)
		}
		if raw, err := b.GetStateFile(n); err == nil {
			t.Errorf("b.GetStateFile(%s) read through a symlink: %s", n, raw)
		}
	}
	// Saving over a planted link replaces the link, never writes through it.
	if _, err := b.SaveState("abs.json", json.RawMessage(`"overwritten"`)); err != nil {
		t.Fatal(err)
	}
	if v, _ := a.GetState("secret.json"); string(v) != `{"pin":1234}` {
		t.Fatalf("a's state changed through b's symlink: %s", v)
	}

	// b replaces its whole state folder with a link to a's.
	if err := os.RemoveAll(bState); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(aState, bState); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SaveState("secret.json", json.RawMessage(`"pwned"`)); err == nil {
		t.Error("b.SaveState wrote through a state folder symlinked to a's")
	}
	if list, err := b.ListState(); err == nil && len(list) > 0 {
		t.Errorf("b.ListState listed a's files: %v", list)
	}
	if err := b.DeleteState("secret.json"); err == nil {
		t.Error("b.DeleteState deleted through a symlinked folder")
	}
	if v, _ := a.GetState("secret.json"); string(v) != `{"pin":1234}` {
		t.Fatalf("a's state changed: %s", v)
	}
	if u, err := b.CheckQuota(); err != nil || u > 100 {
		t.Errorf("b's usage %d, %v: the walk must not follow a link out of the workspace", u, err)
	}
}
