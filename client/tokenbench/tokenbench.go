// Package tokenbench measures what a model reads to do a task with MCP
// tools, both ways: calling the tools directly (every tool definition of
// every connected server, every call and every result in the context) and
// in code mode through cexecd's MCP face (its tools/list, the searches an
// agent needs, the programs and the daemon's real replies). The agents are
// scripted and ideal: each makes the fewest calls the task allows. The
// servers are real (the MCP reference servers, and a catalog peer serving a
// tool-retrieval set's definitions), the daemon is a real cexecd, and the
// tokens are counted with OpenAI's o200k_base and cl100k_base encodings.
// `cexecctl bench tokens` prints the report.
package tokenbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

// Options say where the binaries are and how large the data is.
type Options struct {
	// Cexecd is the daemon binary; PluginDir holds its plugins
	// (sandbox-bwrap, selector-embeddings, guard-pii).
	Cexecd, PluginDir string
	// Peers is the directory of the reference servers' launchers
	// (test/peers/node_modules/.bin).
	Peers string
	// CatalogPeer is the catalog peer binary (internal/tools/catalogpeer)
	// and CatalogTools the tools.jsonl it serves.
	CatalogPeer, CatalogTools string
	Scale                     Scale
	// Progress, when set, is told what runs.
	Progress func(format string, args ...any)
}

// Encodings are the tokenizers counted with.
var Encodings = []string{"o200k_base", "cl100k_base"}

// Side is one way of doing a task.
type Side struct {
	// Tokens is what the model read and wrote, per encoding: the context
	// at the end of the task, every message once.
	Tokens map[string]int `json:"tokens"`
	// Turns counts the model's messages (one per round of tool calls, and
	// the answer).
	Turns int `json:"turns"`
	// Calls are the tool calls the model made, in order.
	Calls []string `json:"calls"`
	// Steps are the context's messages in order, with their o200k_base
	// tokens: where the tokens went.
	Steps []Step `json:"steps"`
}

// Step is one message of a context.
type Step struct {
	// Role is "system" (tool definitions, server instructions), "user",
	// "assistant" (a tool call or the answer) or "tool" (a result).
	Role string `json:"role"`
	// Tool is the tool called, or whose result this is.
	Tool   string `json:"tool,omitempty"`
	Tokens int    `json:"o200k_base"`
}

// Task is one task's figures.
type Task struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt"`
	Direct Side   `json:"direct"`
	Code   Side   `json:"code"`
	// ReductionPct is how many fewer tokens code mode took, per encoding.
	ReductionPct map[string]float64 `json:"reduction_pct"`
}

// Report is the benchmark's result.
type Report struct {
	Scale Scale  `json:"scale"`
	Tasks []Task `json:"tasks"`
	// FaceToolsList is the tokens of cexec's tools/list, per encoding: the
	// fixed cost of code mode in every context.
	FaceToolsList map[string]int `json:"face_tools_list_tokens"`
	// FaceInstructions is the tokens of the face's initialize instructions.
	FaceInstructions map[string]int `json:"face_instructions_tokens"`
}

// counter counts tokens with each encoding.
type counter map[string]tokenizer.Codec

func newCounter() (counter, error) {
	c := counter{}
	for _, name := range Encodings {
		enc, err := tokenizer.Get(tokenizer.Encoding(name))
		if err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", name, err)
		}
		c[name] = enc
	}
	return c, nil
}

func (c counter) count(text string) map[string]int {
	out := map[string]int{}
	for name, enc := range c {
		n, _ := enc.Count(text)
		out[name] = n
	}
	return out
}

// message is one entry of a model's context.
type message struct {
	role, tool, text string
	// parallel marks a call made in the same model message as the one
	// before it (parallel tool calls): no new turn.
	parallel bool
}

// trajectory is what a model's context holds at the end of a task.
type trajectory struct {
	msgs  []message
	calls []string
}

func (t *trajectory) add(role, text string) { t.msgs = append(t.msgs, message{role: role, text: text}) }

// toolCall adds the model's call as it writes it: name and JSON
// arguments; parallel says it is in the same message as the last call.
func (t *trajectory) toolCall(name string, args any, parallel bool) {
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	t.msgs = append(t.msgs, message{role: "assistant", tool: name, text: string(b), parallel: parallel})
	t.calls = append(t.calls, name)
}

// toolResult adds the result of the last call.
func (t *trajectory) toolResult(text string) {
	t.msgs = append(t.msgs, message{role: "tool", tool: t.calls[len(t.calls)-1], text: text})
}

func (t *trajectory) side(c counter) Side {
	s := Side{Tokens: map[string]int{}, Calls: t.calls}
	for _, m := range t.msgs {
		counts := c.count(m.text)
		for name, n := range counts {
			s.Tokens[name] += n
		}
		s.Steps = append(s.Steps, Step{Role: m.role, Tool: m.tool, Tokens: counts[Encodings[0]]})
		if m.role == "assistant" && !m.parallel {
			s.Turns++
		}
	}
	return s
}

// Run prepares the data, starts cexecd and the direct servers, runs every
// task both ways and counts.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	count, err := newCounter()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cexec-bench-tokens-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	o.Progress("writing the data (%d notes, %d CSV rows, %d entities)", o.Scale.Notes, o.Scale.CSVRows, o.Scale.Entities)
	d, err := writeData(dir, o.Scale)
	if err != nil {
		return nil, fmt.Errorf("write data: %w", err)
	}
	servers, err := o.servers(dir, d)
	if err != nil {
		return nil, err
	}

	o.Progress("starting cexecd")
	dm, err := startDaemon(ctx, o, dir, d, servers)
	if err != nil {
		return nil, err
	}
	defer dm.stop()

	o.Progress("starting the servers for direct calls")
	direct, err := dialDirect(ctx, dir, d, servers)
	if err != nil {
		return nil, err
	}
	defer direct.close()

	rep := &Report{Scale: o.Scale}
	faces := map[string]*face{}
	for _, tenant := range []string{tenantRef, tenantCatalog} {
		f, err := dm.face(ctx, tenant)
		if err != nil {
			return nil, err
		}
		defer f.close()
		faces[tenant] = f
	}
	ref := faces[tenantRef]
	rep.FaceToolsList = count.count(ref.toolsJSON)
	rep.FaceInstructions = count.count(ref.instructions)

	for _, t := range tasks(d) {
		o.Progress("task %s", t.name)
		var dt, ct trajectory
		if err := direct.begin(ctx, &dt, t); err != nil {
			return nil, fmt.Errorf("%s, direct: %w", t.name, err)
		}
		if err := t.direct(ctx, &directAgent{tr: &dt, set: direct}); err != nil {
			return nil, fmt.Errorf("%s, direct: %w", t.name, err)
		}
		f := faces[t.tenant]
		f.begin(&ct, t.prompt)
		if err := t.code(ctx, &codeAgent{tr: &ct, f: f}); err != nil {
			return nil, fmt.Errorf("%s, code mode: %w", t.name, err)
		}
		dt.add("assistant", t.answer)
		ct.add("assistant", t.answer)
		task := Task{Name: t.name, Prompt: t.prompt, Direct: dt.side(count), Code: ct.side(count), ReductionPct: map[string]float64{}}
		for _, enc := range Encodings {
			if n := task.Direct.Tokens[enc]; n > 0 {
				task.ReductionPct[enc] = 100 * float64(n-task.Code.Tokens[enc]) / float64(n)
			}
		}
		rep.Tasks = append(rep.Tasks, task)
	}
	return rep, nil
}

// The daemon's tenants: the reference servers' tasks see those three; the
// catalog task sees only the catalog peer, as its direct agent does.
const (
	tenantRef     = "ref"
	tenantCatalog = "catalog"
)

// server is an upstream as both sides start it.
type server struct {
	name, tenant, command string
	args                  []string
	// memory is set for server-memory, which gets a fresh graph file per
	// side (the doc task writes to it).
	memory bool
}

func (o Options) servers(dir string, d *data) ([]server, error) {
	bin := func(name string) (string, error) {
		p := filepath.Join(o.Peers, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("reference server %s (run `make deps`): %w", name, err)
		}
		return p, nil
	}
	var out []server
	for _, s := range []struct{ name, bin string }{{"filesystem", "mcp-server-filesystem"}, {"memory", "mcp-server-memory"}, {"everything", "mcp-server-everything"}} {
		p, err := bin(s.bin)
		if err != nil {
			return nil, err
		}
		srv := server{name: s.name, tenant: tenantRef, command: p, memory: s.name == "memory"}
		switch s.name {
		case "filesystem":
			srv.args = []string{d.dir}
		case "everything":
			srv.args = []string{"stdio"}
		}
		out = append(out, srv)
	}
	if _, err := os.Stat(o.CatalogPeer); err != nil {
		return nil, fmt.Errorf("catalog peer: %w", err)
	}
	if _, err := os.Stat(o.CatalogTools); err != nil {
		return nil, fmt.Errorf("catalog tools: %w", err)
	}
	out = append(out, server{name: "livemcpbench", tenant: tenantCatalog, command: o.CatalogPeer, args: []string{"-tools", o.CatalogTools}})
	return out, nil
}

// Table formats the report for people.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %10s %8s %7s %8s %10s %8s %7s\n", "task", "direct", "code", "cut", "turns", "direct", "code", "cut")
	fmt.Fprintf(&b, "%-12s %27s %8s %29s\n", "", "o200k_base", "d/c", "cl100k_base")
	for _, t := range r.Tasks {
		o, c := Encodings[0], Encodings[1]
		fmt.Fprintf(&b, "%-12s %10d %8d %6.1f%% %4d/%-3d %10d %8d %6.1f%%\n", t.Name,
			t.Direct.Tokens[o], t.Code.Tokens[o], t.ReductionPct[o], t.Direct.Turns, t.Code.Turns,
			t.Direct.Tokens[c], t.Code.Tokens[c], t.ReductionPct[c])
	}
	fmt.Fprintf(&b, "cexec tools/list: %d tokens (o200k_base), %d (cl100k_base); instructions %d (o200k_base)\n",
		r.FaceToolsList[Encodings[0]], r.FaceToolsList[Encodings[1]], r.FaceInstructions[Encodings[0]])
	return b.String()
}
