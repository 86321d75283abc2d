package tokenbench

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// task is one scripted job, done by an ideal agent both ways. Each side
// checks that it got the answer, so the trajectories stay real.
type task struct {
	name, prompt string
	// tenant picks the servers: the reference ones or the catalog peer.
	tenant string
	// answer is the model's last message, the same both ways.
	answer string
	direct func(ctx context.Context, a *directAgent) error
	code   func(ctx context.Context, a *codeAgent) error
}

// directAgent calls upstream tools itself; every result lands in its
// context.
type directAgent struct {
	tr  *trajectory
	set *directSet
}

// call is one turn: the model calls server's tool and reads the result.
func (a *directAgent) call(ctx context.Context, server, tool string, args map[string]any) (string, error) {
	c := a.set.conns[server]
	a.tr.toolCall(tool, args, false)
	r, err := c.callTool(ctx, tool, args)
	if err != nil {
		return "", fmt.Errorf("%s/%s: %w", server, tool, err)
	}
	a.tr.toolResult(r.text)
	if r.isError {
		return "", fmt.Errorf("%s/%s failed: %s", server, tool, r.text)
	}
	return r.text, nil
}

// codeAgent works through cexec's face.
type codeAgent struct {
	tr *trajectory
	f  *face
}

func (a *codeAgent) call(ctx context.Context, tool string, args map[string]any) (string, error) {
	return a.callIn(ctx, tool, args, false)
}

func (a *codeAgent) callIn(ctx context.Context, tool string, args map[string]any, parallel bool) (string, error) {
	a.tr.toolCall(tool, args, parallel)
	r, err := a.f.c.callTool(ctx, tool, args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	a.tr.toolResult(r.text)
	if r.isError {
		return "", fmt.Errorf("%s failed: %s", tool, r.text)
	}
	return r.text, nil
}

// query is one search_tools call: what the agent asks and how many hits.
type query struct {
	text  string
	limit int
}

// search is search_tools at full detail, which is enough to write the
// program; several queries go out in one model message. need names the
// functions the program imports (servers.PKG.FUNC): one that no search
// found costs a list_tools turn for its stub, as it would cost a real agent
// one.
func (a *codeAgent) search(ctx context.Context, qs []query, need ...string) error {
	var all strings.Builder
	for i, q := range qs {
		text, err := a.callIn(ctx, "search_tools", map[string]any{"query": q.text, "detail_level": "full", "limit": q.limit}, i > 0)
		if err != nil {
			return err
		}
		all.WriteString(text)
	}
	for _, fn := range need {
		if strings.Contains(all.String(), fn+"(") {
			continue
		}
		pkg, tool, _ := strings.Cut(strings.TrimPrefix(fn, "servers."), ".")
		if _, err := a.call(ctx, "list_tools", map[string]any{"server": pkg, "tool": tool}); err != nil {
			return err
		}
	}
	return nil
}

// single is call_tool: one call whose result the agent reads as is.
func (a *codeAgent) single(ctx context.Context, server, tool string, args map[string]any) (string, error) {
	return a.call(ctx, "call_tool", map[string]any{"server": server, "tool": tool, "arguments": args})
}

func (a *codeAgent) program(ctx context.Context, code string) (string, error) {
	return a.call(ctx, "execute_code", map[string]any{"code": code})
}

func expect(out string, want ...string) error {
	for _, w := range want {
		if !strings.Contains(out, w) {
			return fmt.Errorf("the reply lacks %q:\n%s", w, cut(out, 2000))
		}
	}
	return nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// fileNames are the [FILE] entries of list_directory's text.
var fileNames = regexp.MustCompile(`(?m)^\[FILE\] (.+)$`)

func tasks(d *data) []task {
	notes := filepath.Join(d.dir, "notes")
	csv := filepath.Join(d.dir, "sales.csv")
	doc := filepath.Join(d.dir, "design-review.md")
	tiny := filepath.Join(d.dir, "settings.ini")
	return []task{
		{
			name:   "notes",
			tenant: tenantRef,
			prompt: fmt.Sprintf("Which of the notes in %s mention %q?", notes, Phrase),
			answer: fmt.Sprintf("%d notes mention it: %s.", len(d.notes), strings.Join(d.notes, ", ")),
			direct: func(ctx context.Context, a *directAgent) error {
				list, err := a.call(ctx, "filesystem", "list_directory", map[string]any{"path": notes})
				if err != nil {
					return err
				}
				var paths []string
				for _, m := range fileNames.FindAllStringSubmatch(list, -1) {
					paths = append(paths, filepath.Join(notes, m[1]))
				}
				out, err := a.call(ctx, "filesystem", "read_multiple_files", map[string]any{"paths": paths})
				if err != nil {
					return err
				}
				return expect(out, Phrase)
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"list a directory and read text files", 4}}, "servers.filesystem.list_directory", "servers.filesystem.read_text_file"); err != nil {
					return err
				}
				out, err := a.program(ctx, fmt.Sprintf(`from concurrent.futures import ThreadPoolExecutor
from servers.filesystem import list_directory, read_text_file
d = %q
names = [l[7:] for l in list_directory(path=d)["content"].splitlines() if l.startswith("[FILE] ")]
with ThreadPoolExecutor(8) as ex:
    texts = ex.map(lambda n: read_text_file(path=f"{d}/{n}")["content"], names)
hits = [n for n, t in zip(names, texts) if %q in t.lower()]
print(len(hits), "of", len(names), "notes:", ", ".join(hits))
`, notes, Phrase))
				if err != nil {
					return err
				}
				return expect(out, d.notes...)
			},
		},
		{
			name:   "csv",
			tenant: tenantRef,
			prompt: fmt.Sprintf("List the rows of %s whose product is flux-capacitor.", csv),
			answer: "The 5 flux-capacitor rows:\n" + strings.Join(d.csvRows, "\n"),
			direct: func(ctx context.Context, a *directAgent) error {
				out, err := a.call(ctx, "filesystem", "read_text_file", map[string]any{"path": csv})
				if err != nil {
					return err
				}
				return expect(out, d.csvRows...)
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"read a text file", 3}}, "servers.filesystem.read_text_file"); err != nil {
					return err
				}
				out, err := a.program(ctx, fmt.Sprintf(`import csv, io
from servers.filesystem import read_text_file
rows = csv.reader(io.StringIO(read_text_file(path=%q)["content"]))
for r in rows:
    if r[3] == "flux-capacitor":
        print(",".join(r))
`, csv))
				if err != nil {
					return err
				}
				return expect(out, d.csvRows...)
			},
		},
		{
			name:   "doc-copy",
			tenant: tenantRef,
			prompt: fmt.Sprintf("Save the document %s in the knowledge graph as the observation of a new entity \"Design review\" of type document.", doc),
			answer: "Saved the design review in the knowledge graph.",
			direct: func(ctx context.Context, a *directAgent) error {
				text, err := a.call(ctx, "filesystem", "read_text_file", map[string]any{"path": doc})
				if err != nil {
					return err
				}
				out, err := a.call(ctx, "memory", "create_entities", map[string]any{"entities": []map[string]any{
					{"name": "Design review", "entityType": "document", "observations": []string{text}}}})
				if err != nil {
					return err
				}
				return expect(out, "Design review")
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"read a text file", 2}, {"create entities in the knowledge graph", 2}}, "servers.filesystem.read_text_file", "servers.memory.create_entities"); err != nil {
					return err
				}
				out, err := a.program(ctx, fmt.Sprintf(`from servers.filesystem import read_text_file
from servers.memory import create_entities
doc = read_text_file(path=%q)["content"]
made = create_entities(entities=[{"name": "Design review", "entityType": "document", "observations": [doc]}])
print("saved", len(doc), "characters:", [e["name"] for e in made["entities"]])
`, doc))
				if err != nil {
					return err
				}
				return expect(out, fmt.Sprintf("saved %d characters: ['Design review']", d.docLen))
			},
		},
		{
			name:   "527-tools",
			tenant: tenantCatalog,
			prompt: "What is NVIDIA's current stock price (symbol NVDA)?",
			answer: "NVDA's current price is as the tool reported.",
			direct: func(ctx context.Context, a *directAgent) error {
				out, err := a.call(ctx, "livemcpbench", "yahoo-finance__get_current_stock_price", map[string]any{"symbol": "NVDA"})
				if err != nil {
					return err
				}
				return expect(out, "NVDA")
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"current stock price of a symbol", 3}}, "servers.livemcpbench.yahoo_finance__get_current_stock_price"); err != nil {
					return err
				}
				out, err := a.single(ctx, "livemcpbench", "yahoo-finance__get_current_stock_price", map[string]any{"symbol": "NVDA"})
				if err != nil {
					return err
				}
				return expect(out, "NVDA")
			},
		},
		{
			name:   "memory",
			tenant: tenantRef,
			prompt: "Who in the knowledge graph works on project Falcon?",
			answer: "Project Falcon: " + strings.Join(d.falcon, ", ") + ".",
			direct: func(ctx context.Context, a *directAgent) error {
				out, err := a.call(ctx, "memory", "search_nodes", map[string]any{"query": "Falcon"})
				if err != nil {
					return err
				}
				return expect(out, d.falcon...)
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"search the knowledge graph", 3}}, "servers.memory.search_nodes"); err != nil {
					return err
				}
				out, err := a.program(ctx, `from servers.memory import search_nodes
print(", ".join(e["name"] for e in search_nodes(query="Falcon")["entities"]))
`)
				if err != nil {
					return err
				}
				return expect(out, d.falcon...)
			},
		},
		{
			name:   "tiny-file",
			tenant: tenantRef,
			prompt: fmt.Sprintf("Which port is set in %s?", tiny),
			answer: "Port 8443.",
			direct: func(ctx context.Context, a *directAgent) error {
				out, err := a.call(ctx, "filesystem", "read_text_file", map[string]any{"path": tiny})
				if err != nil {
					return err
				}
				return expect(out, "port = 8443")
			},
			code: func(ctx context.Context, a *codeAgent) error {
				if err := a.search(ctx, []query{{"read a text file", 2}}, "servers.filesystem.read_text_file"); err != nil {
					return err
				}
				out, err := a.single(ctx, "filesystem", "read_text_file", map[string]any{"path": tiny})
				if err != nil {
					return err
				}
				return expect(out, "port = 8443")
			},
		},
	}
}
