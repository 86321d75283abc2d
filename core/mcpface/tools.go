package mcpface

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cexec/cexec/internal/schemamsg"
	"github.com/cexec/cexec/pluginapi"
)

// Tool names, as agents see them.
const (
	ToolSearchTools = "search_tools"
	ToolListTools   = "list_tools"
	ToolExecuteCode = "execute_code"
	ToolExecuteTask = "execute_task"
	ToolCallTool    = "call_tool"
	ToolState       = "state"
	ToolSkills      = "skills"
)

// Detail levels of search_tools.
const (
	DetailName        = "name"
	DetailDescription = "description"
	DetailFull        = "full"
)

// toolDef is one tool as listed: the descriptions teach the workflow
// (search at full detail → one program that prints only what matters, or
// call_tool for a single call) and the
// whole tools/list stays within a small token budget, which a test checks.
type toolDef struct {
	name, desc, schema string
	readOnly           bool
	fn                 func(f *Face, ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply
}

// Every tool costs its schema's boilerplate in every agent's context, so
// related reads and writes share one tool whose arguments pick the action
// (list_tools browses the catalog; state and skills list, read and save).
var toolDefs = []toolDef{
	{ToolSearchTools,
		"Find upstream tools and skills for a task. detail_level full gives servers.PKG.FUNC(signature) -> return shape and the description: enough to call it.",
		`{"type":"object","properties":{"query":{"type":"string"},"detail_level":{"type":"string","enum":["name","description","full"],"default":"description"},"limit":{"type":"integer","minimum":1,"maximum":50,"default":8}},"required":["query"]}`,
		true, (*Face).searchTools},
	{ToolListTools,
		"Browse upstream tools: no arguments lists the servers; server lists its tools; server and tool show the tool's Python stub.",
		`{"type":"object","properties":{"server":{"type":"string"},"tool":{"type":"string"}}}`,
		true, (*Face).listTools},
	{ToolExecuteCode,
		"Run a Python 3 program that imports tools (from servers.PKG import FUNC) and calls them with keyword arguments (they return Python values, raise cexec.ToolError). Only its output comes back, capped: filter in the program, print what matters. Threads run independent calls. /workspace persists; cexec.result(obj) returns data, cexec.show(image_or_file) shows it; skills import from skills.NAME.",
		`{"type":"object","properties":{"code":{"type":"string"},"session":{"type":"string","description":"Runs of one session share its log and checkpoints, across connections; a new name starts one. Default: this connection's"},"persistent":{"type":"boolean","description":"Keep this program's variables and imports for the session's next persistent programs"}},"required":["code"]}`,
		false, (*Face).executeCode},
	{ToolCallTool,
		"Call one tool; returns its result as is.",
		`{"type":"object","properties":{"server":{"type":"string"},"tool":{"type":"string"},"arguments":{"type":"object"}},"required":["server","tool"]}`,
		false, (*Face).callTool},
	{ToolExecuteTask,
		"Describe a task in words; cexec writes a program with the tools it finds and returns its output, or says it cannot. Prefer execute_code when you can write the program.",
		`{"type":"object","properties":{"task_description":{"type":"string"},"show_code":{"type":"boolean","default":false,"description":"Also return the program"}},"required":["task_description"]}`,
		false, (*Face).executeTask},
	{ToolState,
		"Saved state: no arguments lists it; name reads one (and its version); name and value save a JSON value as NAME.json or .yaml, which programs see in /workspace/state; with version, only if unchanged since.",
		`{"type":"object","properties":{"name":{"type":"string"},"value":{},"version":{"type":"string"}}}`,
		false, (*Face).state},
	{ToolSkills,
		"Saved skills: no arguments lists them; name shows one; name (snake_case), description and code save Python code as skills.NAME. Give functions docstrings.",
		`{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},"code":{"type":"string"}}}`,
		false, (*Face).skills},
	{ToolWorkflow,
		"Stored workflows: list, start by name, status, or signal a run waiting for input.",
		`{"type":"object","properties":{"action":{"enum":["list","start","status","signal"]},"name":{"type":"string"},"input":{"type":"object"},"run":{"type":"string"},"event":{"type":"string"},"data":{}},"required":["action"]}`,
		false, (*Face).workflow},
}

func (f *Face) addTools() error {
	for _, d := range toolDefs {
		if d.name == ToolExecuteTask && f.o.Tasks == nil || d.name == ToolCallTool && f.o.Calls == nil ||
			d.name == ToolWorkflow && f.o.Workflows == nil {
			continue
		}
		t := mcp.NewToolWithRawSchema(d.name, d.desc, json.RawMessage(d.schema))
		if d.readOnly {
			t.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
		}
		if d.name == ToolExecuteCode {
			// A long program can run as a task the client polls.
			t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		}
		schema, err := compileInputSchema(d.name, d.schema)
		if err != nil {
			return err
		}
		takes, err := argumentNames(d.schema)
		if err != nil {
			return fmt.Errorf("input schema of %s: %w", d.name, err)
		}
		fn, name := d.fn, d.name
		f.srv.AddTool(t, traced(d.name, f.wrap(d.name, func(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
			if msg := unknownArguments(name, takes, req.GetArguments()); msg != "" {
				return errorReply("%s: %s", name, msg)
			}
			if msg := checkArguments(schema, req.GetArguments()); msg != "" {
				return errorReply("%s: %s", name, msg)
			}
			return fn(f, ctx, sc, req)
		})))
	}
	return nil
}

// compileInputSchema compiles a tool's input schema, to check arguments
// against it: mcp-go's own check words its errors as Go values
// (&{Missing:[code]}).
func compileInputSchema(name, schema string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "https://cexec.invalid/tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", name, err)
	}
	return sch, nil
}

// argumentNames lists the arguments a tool's input schema declares, in
// order.
func argumentNames(schema string) ([]string, error) {
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		return nil, err
	}
	names := slices.Collect(maps.Keys(doc.Properties))
	slices.Sort(names)
	return names, nil
}

// unknownArguments refuses arguments tool does not take, naming them and
// the ones it does: ignored, a misspelt one ("sesion") would go unnoticed
// and the call would run otherwise than the agent meant. The advertised
// schemas leave additionalProperties out to keep tools/list short.
func unknownArguments(tool string, takes []string, args map[string]any) string {
	var unknown []string
	for k := range args {
		if !slices.Contains(takes, k) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	slices.Sort(unknown)
	what := "unexpected argument " + unknown[0]
	if len(unknown) > 1 {
		what = "unexpected arguments " + strings.Join(unknown, ", ")
	}
	if len(takes) == 0 {
		return what + "; " + tool + " takes none"
	}
	return what + "; " + tool + " takes " + strings.Join(takes, ", ")
}

// checkArguments validates a call's arguments and says in sentences what
// is wrong, or returns "".
func checkArguments(schema *jsonschema.Schema, args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return "arguments are not JSON: " + err.Error()
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "arguments are not JSON: " + err.Error()
	}
	var verr *jsonschema.ValidationError
	if err := schema.Validate(v); errors.As(err, &verr) {
		return schemamsg.Describe(verr)
	} else if err != nil {
		return err.Error()
	}
	return ""
}

// failure turns a service error into an isError reply: what failed, then
// the error's message as errorText words it. A message that starts by
// naming what failed ("skill big: …" for skills) stands alone, not to say
// it twice. For ErrNotFound the caller adds what exists.
func failure(what string, err error) reply {
	if errors.Is(err, context.Canceled) {
		return errorReply("%s: cancelled", what)
	}
	msg := errorText(err)
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timed out: " + msg
	} else if namesSubject(msg, what) {
		return errorReply("%s", msg)
	}
	return errorReply("%s: %s", what, msg)
}

// sentinels are the pluginapi errors services wrap with %w: their text at
// the end of a message (": invalid argument") is Go's classification, of
// no use to an agent, as the message already says what is wrong.
var sentinels = []error{pluginapi.ErrNotFound, pluginapi.ErrDenied, pluginapi.ErrInvalidArgument,
	pluginapi.ErrUnavailable, pluginapi.ErrResourceExhausted}

// errorText is an error's message without the sentinels' text at its end.
func errorText(err error) string {
	msg := err.Error()
	for cut := true; cut; {
		cut = false
		for _, s := range sentinels {
			if rest, ok := strings.CutSuffix(msg, ": "+s.Error()); ok && errors.Is(err, s) {
				msg, cut = rest, true
			}
		}
	}
	return msg
}

// namesSubject reports whether msg's first word is what, or what in the
// singular.
func namesSubject(msg, what string) bool {
	first, _, _ := strings.Cut(msg, " ")
	first = strings.TrimRight(first, ":")
	return first == what || first+"s" == what
}

func (f *Face) searchTools(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	query := strings.TrimSpace(req.GetString("query", ""))
	if query == "" {
		return errorReply("query is empty: describe what you want to do, e.g. \"read a CSV file\"")
	}
	detail := req.GetString("detail_level", DetailDescription)
	if detail != DetailName && detail != DetailDescription && detail != DetailFull {
		return errorReply("detail_level must be name, description or full; got %q", detail)
	}
	limit := req.GetInt("limit", f.o.SearchLimit)
	if limit < 1 || limit > MaxSearchLimit {
		return errorReply("limit must be between 1 and %d; got %d", MaxSearchLimit, limit)
	}
	hits, err := f.o.Searcher.Search(ctx, *sc, query, limit)
	if err != nil {
		return failure("search_tools", err)
	}
	// Details come from the catalog, which also drops hits the tenant may
	// not use.
	all, err := f.o.Catalog.Tools(ctx, *sc, "")
	if err != nil {
		return failure("search_tools", err)
	}
	byID := make(map[string]*Tool, len(all))
	for i := range all {
		byID[all[i].Server+"/"+all[i].Name] = &all[i]
	}
	// Skills resolve through the tenant's list, where its own skill of a
	// name hides the shared one. A failed list still leaves the tools.
	skills, err := f.o.Skills.ListSkills(ctx, *sc)
	if err != nil {
		f.log.Warn("search_tools: skills left out: listing them failed", "tenant", sc.Tenant, "error", err)
	}
	skillByName := make(map[string]*Skill, len(skills))
	for i := range skills {
		skillByName[skills[i].Name] = &skills[i]
	}
	var b strings.Builder
	n, untyped := 0, false
	shown := map[string]bool{}
	writeSkillHit := func(s *Skill) {
		if n == limit || shown[s.Name] {
			return
		}
		n++
		shown[s.Name] = true
		if detail == DetailFull {
			// The code is read for the function signatures only.
			if full, err := f.o.Skills.GetSkill(ctx, *sc, s.Name); err == nil {
				s = &full
			}
		}
		writeSkill(&b, s, detail)
	}
	// The tenant's own skills are not in the search index (one index
	// serves every tenant): they are matched here and come first, since
	// the agent saved them for tasks like this one, but take at most half
	// the places.
	for _, s := range matchOwnSkills(query, skills, (limit+1)/2) {
		writeSkillHit(s)
	}
	for _, h := range hits {
		if h.Skill != "" {
			if s := skillByName[h.Skill]; s != nil {
				writeSkillHit(s)
			}
			continue
		}
		t := byID[h.Server+"/"+h.Tool]
		if t == nil || n == limit {
			continue
		}
		n++
		writeTool(&b, t, detail)
		untyped = untyped || !t.Local && len(t.OutputSchema) == 0
	}
	if n == 0 {
		return textReply("No tools match %q. Try other words, or browse with list_tools.", cutRunes(query, maxQuoted))
	}
	if detail == DetailFull && untyped {
		// Said once rather than for every tool without an output schema.
		b.WriteString("-> Any: " + noSchemaReturn + "\n")
	}
	if detail == DetailFull && len(shown) > 0 {
		b.WriteString("skills(name) shows a skill's instructions and code.\n")
	}
	return reply{text: b.String()}
}

// writeTool writes one tool at a detail level: "server/tool", a one-line
// summary, or everything needed to call it without list_tools: where to
// import it from, the signature, what it returns and the whole
// description. At full detail the import and the signature are one line,
// servers.PKG.FUNC(...), which call_tool also takes apart (package and
// function names resolve to the MCP names).
func writeTool(b *strings.Builder, t *Tool, detail string) {
	if detail == DetailFull {
		if qual, ok := qualifiedSignature(t); ok {
			b.WriteString(qual + "\n")
		} else {
			b.WriteString(t.Server + "/" + t.Name + "\n")
			if t.Import != "" {
				b.WriteString("  " + t.Import + "\n")
			}
			if t.Signature != "" {
				b.WriteString("  " + fullSignature(t) + "\n")
			}
		}
		if d := strings.TrimSpace(t.Description); d != "" {
			b.WriteString("  " + strings.ReplaceAll(d, "\n", "\n  ") + "\n")
		}
		return
	}
	b.WriteString(t.Server)
	b.WriteByte('/')
	b.WriteString(t.Name)
	if detail == DetailDescription {
		if s := summary(t); s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	b.WriteByte('\n')
}

// writeSkill writes one skill at a detail level: its module, a one-line
// summary, or the import line with the signatures of the functions it
// exports and the whole description.
func writeSkill(b *strings.Builder, s *Skill, detail string) {
	module := skillModule(s)
	if detail == DetailFull {
		fns := skillFunctions(s.Code)
		names := make([]string, len(fns))
		for i, fn := range fns {
			names[i], _, _ = strings.Cut(fn, "(")
		}
		if len(names) == 0 {
			names = []string{"..."}
		}
		b.WriteString("from " + module + " import " + strings.Join(names, ", ") + "\n")
		for _, fn := range fns {
			b.WriteString("  " + fn + "\n")
		}
		if d := strings.TrimSpace(s.Description); d != "" {
			b.WriteString("  " + strings.ReplaceAll(d, "\n", "\n  ") + "\n")
		}
		return
	}
	b.WriteString(module + " (skill)")
	if detail == DetailDescription {
		if d := firstLine(s.Description); d != "" {
			b.WriteString(": " + d)
		}
	}
	b.WriteByte('\n')
}

// skillModule is the module code imports a skill from.
func skillModule(s *Skill) string {
	if s.Import != "" {
		return s.Import
	}
	return "skills." + s.Name
}

// maxSkillFunctions bounds the signatures search_tools shows of one skill;
// skills(name) shows the rest.
const maxSkillFunctions = 8

// skillFunctions are the signatures of a skill module's public top-level
// functions, each on one line, as name(params) -> annotation.
func skillFunctions(code string) []string {
	var out []string
	lines := strings.Split(code, "\n")
	for i := 0; i < len(lines) && len(out) < maxSkillFunctions; i++ {
		rest, ok := strings.CutPrefix(lines[i], "def ")
		if !ok {
			rest, ok = strings.CutPrefix(lines[i], "async def ")
		}
		if !ok || strings.HasPrefix(rest, "_") {
			continue
		}
		// A long signature spans lines until its brackets close.
		sig := strings.TrimSpace(rest)
		for depth(sig) > 0 && i+1 < len(lines) {
			i++
			sig += " " + strings.TrimSpace(lines[i])
		}
		sig = strings.NewReplacer("( ", "(", ", )", ")", ",)", ")", " )", ")").Replace(sig)
		if j := strings.LastIndexByte(sig, ':'); j > strings.LastIndexByte(sig, ')') {
			sig = strings.TrimSpace(sig[:j])
		}
		out = append(out, sig)
	}
	return out
}

// depth is how many brackets s opens and leaves open.
func depth(s string) int {
	d := 0
	for _, r := range s {
		switch r {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
		}
	}
	return d
}

// matchOwnSkills are up to most of the tenant's own skills whose name or
// description hold at least half the query's words, most words first.
func matchOwnSkills(query string, skills []Skill, most int) []*Skill {
	words := queryWords(query)
	if len(words) == 0 {
		return nil
	}
	type match struct {
		s *Skill
		n int
	}
	var ms []match
	for i := range skills {
		if skills[i].Shared {
			continue
		}
		text := strings.ToLower(strings.ReplaceAll(skills[i].Name, "_", " ") + " " + skills[i].Description)
		n := 0
		for _, w := range words {
			if strings.Contains(text, w) {
				n++
			}
		}
		if 2*n >= len(words) {
			ms = append(ms, match{&skills[i], n})
		}
	}
	slices.SortStableFunc(ms, func(a, b match) int { return b.n - a.n })
	out := make([]*Skill, 0, min(len(ms), most))
	for _, m := range ms[:min(len(ms), most)] {
		out = append(out, m.s)
	}
	return out
}

// stopwords say nothing about what a skill does.
var stopwords = map[string]bool{
	"and": true, "any": true, "are": true, "for": true, "from": true, "how": true, "into": true, "its": true,
	"some": true, "that": true, "the": true, "this": true, "use": true, "using": true, "want": true, "what": true,
	"with": true,
}

// queryWords are a query's words of three letters or more, lowercased,
// without stopwords and repeats.
func queryWords(query string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len([]rune(w)) >= 3 && !stopwords[w] && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// qualifiedSignature is the signature of a tool imported as
// "from MODULE import FUNC" written as MODULE.FUNC(...) -> shape, or false
// when the import is of another form.
func qualifiedSignature(t *Tool) (string, bool) {
	rest, ok := strings.CutPrefix(t.Import, "from ")
	if !ok {
		return "", false
	}
	module, fn, ok := strings.Cut(rest, " import ")
	if !ok || strings.ContainsAny(fn, " ,()") || !strings.HasPrefix(t.Signature, fn+"(") {
		return "", false
	}
	return module + "." + fullSignature(t), true
}

// fullSignature is a tool's signature with what it returns: the shape of
// its output schema in place of the stub's TypedDict name, which the
// agent could only read in the stub.
func fullSignature(t *Tool) string {
	if t.Local || len(t.OutputSchema) == 0 || string(t.OutputSchema) == "null" {
		return t.Signature
	}
	sig := t.Signature
	if i := strings.LastIndex(sig, " -> "); i >= 0 {
		sig = sig[:i]
	}
	return sig + " -> " + returnShape(t.OutputSchema)
}

// summary is a tool's first line of description (or title), cut short.
func summary(t *Tool) string {
	s := strings.TrimSpace(t.Description)
	if s == "" {
		s = t.Title
	}
	return firstLine(s)
}

// firstLine is the first line of s, cut short.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return cutRunes(s, 160)
}

// maxQuoted is how much of an argument an error message quotes: enough to
// recognise it, while a megabyte of junk is not sent back whole.
const maxQuoted = 80

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// listTools browses the catalog: the servers, one server's tools, or one
// tool's stub.
func (f *Face) listTools(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	server := strings.TrimSpace(req.GetString("server", ""))
	tool := strings.TrimSpace(req.GetString("tool", ""))
	switch {
	case server == "" && tool == "":
		return f.listServers(ctx, sc)
	case server == "":
		return errorReply("list_tools: tool %q needs its server; search_tools finds both", cutRunes(tool, maxQuoted))
	case tool == "":
		return f.getServerTools(ctx, sc, server)
	}
	return f.getTool(ctx, sc, server, tool)
}

func (f *Face) listServers(ctx context.Context, sc *Scope) reply {
	servers, err := f.o.Catalog.Servers(ctx, *sc)
	if err != nil {
		return failure("list_tools", err)
	}
	if len(servers) == 0 {
		return textReply("No servers are available to tenant %s; the operator adds them as mcp_server blocks in cexec.hcl.", sc.Tenant)
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "%s (servers.%s): %d tools, %s", s.Name, s.Package, s.Tools, s.State)
		if s.Error != "" {
			fmt.Fprintf(&b, ": %s", s.Error)
		}
		b.WriteByte('\n')
	}
	return reply{text: b.String()}
}

// unknownServer is the message for a server the tenant cannot see: it lists
// the ones it can.
func (f *Face) unknownServer(ctx context.Context, sc Scope, name string) reply {
	name = cutRunes(name, maxQuoted)
	servers, err := f.o.Catalog.Servers(ctx, sc)
	if err != nil {
		return failure("list servers", err)
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	if len(names) == 0 {
		return errorReply("unknown server %q: no servers are available", name)
	}
	return errorReply("unknown server %q; known servers: %s", name, strings.Join(names, ", "))
}

// serverTools returns the tools of a server named by its MCP name or its
// Python package name, or an error reply listing the known servers.
func (f *Face) serverTools(ctx context.Context, sc Scope, server string) ([]Tool, *reply) {
	if server == "" {
		r := errorReply("server is empty; list_tools() lists the servers")
		return nil, &r
	}
	tools, err := f.o.Catalog.Tools(ctx, sc, server)
	if errors.Is(err, pluginapi.ErrNotFound) {
		// Agents often pass the Python package name from an import line
		// or a search hit, with or without "servers.".
		pkg := strings.TrimPrefix(server, "servers.")
		servers, serr := f.o.Catalog.Servers(ctx, sc)
		if serr == nil {
			for _, s := range servers {
				if s.Package == pkg && s.Name != server {
					tools, err = f.o.Catalog.Tools(ctx, sc, s.Name)
					break
				}
			}
		}
	}
	if errors.Is(err, pluginapi.ErrNotFound) {
		r := f.unknownServer(ctx, sc, server)
		return nil, &r
	}
	if err != nil {
		r := failure("list tools of "+cutRunes(server, maxQuoted), err)
		return nil, &r
	}
	return tools, nil
}

func (f *Face) getServerTools(ctx context.Context, sc *Scope, server string) reply {
	tools, r := f.serverTools(ctx, *sc, server)
	if r != nil {
		return *r
	}
	if len(tools) == 0 {
		return textReply("Server %s has no tools right now (list_tools() shows its status).", server)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d tools; list_tools(server, tool) shows one's stub\n", tools[0].Server, len(tools))
	for i := range tools {
		b.WriteString(tools[i].Name)
		if s := summary(&tools[i]); s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
		b.WriteByte('\n')
	}
	return reply{text: b.String()}
}

// functionName is the Python name of a tool: its stub file's base name.
func functionName(t *Tool) string {
	base := t.Path[strings.LastIndexByte(t.Path, '/')+1:]
	return strings.TrimSuffix(base, ".py")
}

func (f *Face) getTool(ctx context.Context, sc *Scope, server, name string) reply {
	tools, r := f.serverTools(ctx, *sc, server)
	if r != nil {
		return *r
	}
	var t *Tool
	for i := range tools {
		// The MCP name or the Python function name both work.
		if tools[i].Name == name || (tools[i].Path != "" && functionName(&tools[i]) == name) {
			t = &tools[i]
			break
		}
	}
	if t == nil {
		names := make([]string, len(tools))
		for i := range tools {
			names[i] = tools[i].Name
		}
		quoted := cutRunes(name, maxQuoted)
		if guess := closest(name, names); guess != "" {
			return errorReply("server %s has no tool %q; did you mean %q? list_tools(%q) lists them all", server, quoted, guess, server)
		}
		return errorReply("server %s has no tool %q; list_tools(%q) lists its tools", server, quoted, server)
	}
	src, err := f.o.Catalog.StubSource(ctx, *sc, t.Server, t.Name)
	if err != nil {
		return failure("list_tools", err)
	}
	var b strings.Builder
	if t.Import != "" {
		b.WriteString(t.Import + "\n\n")
	}
	b.WriteString(stubInterface(src))
	return reply{text: b.String()}
}

// closest returns the candidate nearest to name by edit distance, if it is
// near enough to be a likely typo.
func closest(name string, candidates []string) string {
	best, bestD := "", len(name)/2+2
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func (f *Face) executeCode(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	code := req.GetString("code", "")
	if strings.TrimSpace(code) == "" {
		return errorReply("code is empty: pass a Python program that prints what you need")
	}
	// The session is reported only when the argument changed it: the
	// connection's own is implied.
	changed := ""
	if s := strings.TrimSpace(req.GetString("session", "")); s != "" {
		if !validSessionID(s) {
			return errorReply("invalid session %q: use 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit", cutRunes(s, maxQuoted))
		}
		if s != sc.Session {
			changed = s
		}
		sc.Session = s
	}
	ex, err := f.o.Executor.Execute(f.withProgress(ctx, req), *sc, Program{Code: code, Persistent: req.GetBool("persistent", false)})
	if err != nil {
		return failure("execute_code", err)
	}
	return uninitializedNote(ctx, f.executionReply(ex, changed, nil, false))
}

func (f *Face) callTool(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	server := strings.TrimSpace(req.GetString("server", ""))
	tool := strings.TrimSpace(req.GetString("tool", ""))
	if server == "" || tool == "" {
		return errorReply("server and tool are required: for servers.PKG.FUNC from search_tools, server PKG and tool FUNC")
	}
	var args json.RawMessage
	if a, ok := req.GetArguments()["arguments"]; ok && a != nil {
		if _, isObject := a.(map[string]any); !isObject {
			return errorReply("arguments must be a JSON object of the tool's parameters")
		}
		var err error
		if args, err = json.Marshal(a); err != nil {
			return errorReply("arguments: %v", err)
		}
	}
	// Agents copy names from import lines too: servers.<package> and the
	// function name resolve to the MCP names. A name not found goes on as
	// it is, for the bridge's did-you-mean.
	tools, r := f.serverTools(ctx, *sc, server)
	if r != nil {
		return *r
	}
	if len(tools) > 0 {
		server = tools[0].Server
	}
	for i := range tools {
		if tools[i].Name == tool || (tools[i].Path != "" && functionName(&tools[i]) == tool) {
			tool = tools[i].Name
			break
		}
	}
	ex, err := f.o.Calls.CallTool(f.withProgress(ctx, req), *sc, server, tool, args)
	if err != nil {
		return failure("call_tool", err)
	}
	if e := ex.Error; e != nil {
		return uninitializedNote(ctx, reply{text: e.Type + ": " + e.Message, isError: true, tokenized: ex.Tokenized})
	}
	return uninitializedNote(ctx, reply{text: resultText(ex.Result), tokenized: ex.Tokenized, attachments: ex.Attachments})
}

// resultText is a call's value as the agent reads it: a string as it is,
// anything else as JSON.
func resultText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func (f *Face) executeTask(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	task := strings.TrimSpace(req.GetString("task_description", ""))
	if task == "" {
		return errorReply("task_description is empty: say what you want done")
	}
	res, err := f.o.Tasks.RunTask(f.withProgress(ctx, req), *sc, task)
	if err != nil {
		return failure("execute_task", err)
	}
	return f.executionReply(res.Execution, "", &res, req.GetBool("show_code", false))
}

// state lists, reads or (with a value) saves a state file.
func (f *Face) state(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	name := strings.TrimSpace(req.GetString("name", ""))
	if v, ok := req.GetArguments()["value"]; ok {
		return f.saveState(ctx, sc, name, v, req.GetArguments())
	}
	if name == "" {
		files, err := f.o.State.ListState(ctx, *sc)
		if err != nil {
			return failure("state", err)
		}
		if len(files) == 0 {
			return textReply("No state saved yet; state(name, value) saves some, as do programs writing /workspace/state.")
		}
		var b strings.Builder
		for _, s := range files {
			fmt.Fprintf(&b, "%s (%d bytes, %s)\n", s.Name, s.Size, s.Modified.UTC().Format("2006-01-02 15:04:05Z"))
		}
		return reply{text: b.String()}
	}
	var (
		v       json.RawMessage
		version string
		err     error
	)
	vs, versioned := f.o.State.(VersionedState)
	if versioned {
		v, version, err = vs.LoadState(ctx, *sc, name)
	} else {
		v, err = f.o.State.GetState(ctx, *sc, name)
	}
	if errors.Is(err, pluginapi.ErrNotFound) {
		quoted := cutRunes(name, maxQuoted)
		files, lerr := f.o.State.ListState(ctx, *sc)
		if lerr == nil && len(files) > 0 {
			names := make([]string, len(files))
			for i, s := range files {
				names[i] = s.Name
			}
			return errorReply("no state named %q; saved: %s", quoted, strings.Join(names, ", "))
		}
		return errorReply("no state named %q; nothing is saved yet", quoted)
	}
	if err != nil {
		return failure("state", err)
	}
	if versioned {
		return reply{text: string(v) + "\nversion: " + version, structured: map[string]any{"name": name, "version": version}}
	}
	return reply{text: string(v)}
}

func (f *Face) saveState(ctx context.Context, sc *Scope, name string, v any, args map[string]any) reply {
	if name == "" {
		return errorReply("name is empty: to save a value, name it with .json or .yaml, e.g. progress.json")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return errorReply("value is not JSON: %v", err)
	}
	if version, ok := args["version"]; ok {
		vs, versioned := f.o.State.(VersionedState)
		vstr, isString := version.(string)
		switch {
		case !versioned:
			return errorReply("version: this server does not version state; save without it")
		case !isString:
			return errorReply("version must be a string, the one state reported with the value")
		}
		err := vs.SaveStateIf(ctx, *sc, name, raw, vstr)
		if errors.Is(err, ErrStateConflict) {
			return errorReply("%s changed since version %q was read; nothing was saved: read it again and retry", name, cutRunes(vstr, maxQuoted))
		}
		if err != nil {
			return failure("state", err)
		}
		return textReply("Saved %s (%d bytes); programs read it from /workspace/state/%s.", name, len(raw), name)
	}
	if err := f.o.State.SaveState(ctx, *sc, name, raw); err != nil {
		return failure("state", err)
	}
	return textReply("Saved %s (%d bytes); programs read it from /workspace/state/%s.", name, len(raw), name)
}

// skills lists the skills, shows one, or (with code or a description)
// saves one.
func (f *Face) skills(ctx context.Context, sc *Scope, req mcp.CallToolRequest) reply {
	name := strings.TrimSpace(req.GetString("name", ""))
	args := req.GetArguments()
	_, hasCode := args["code"]
	_, hasDesc := args["description"]
	switch {
	case hasCode || hasDesc:
		return f.saveSkill(ctx, sc, name, strings.TrimSpace(req.GetString("description", "")), req.GetString("code", ""))
	case name != "":
		return f.getSkill(ctx, sc, name)
	}
	return f.listSkills(ctx, sc)
}

func (f *Face) saveSkill(ctx context.Context, sc *Scope, name, desc, code string) reply {
	switch {
	case name == "":
		return errorReply("name is empty: use a snake_case identifier, e.g. summarize_csv")
	case desc == "":
		return errorReply("description is empty: say in one line what the skill does, so search finds it")
	case strings.TrimSpace(code) == "":
		return errorReply("code is empty: pass the Python module's source")
	}
	s, err := f.o.Skills.SaveSkill(ctx, *sc, name, desc, code)
	if err != nil {
		return failure("skills", err)
	}
	return textReply("Saved skill %s; programs use it with: from %s import ...", s.Name, skillModule(&s))
}

func (f *Face) listSkills(ctx context.Context, sc *Scope) reply {
	skills, err := f.o.Skills.ListSkills(ctx, *sc)
	if err != nil {
		return failure("skills", err)
	}
	broken, err := f.o.Skills.BrokenSkills(ctx, *sc)
	if err != nil {
		return failure("skills", err)
	}
	if len(skills) == 0 && len(broken) == 0 {
		return textReply("No skills yet; skills(name, description, code) stores code for reuse.")
	}
	var b strings.Builder
	for _, s := range skills {
		b.WriteString(s.Name)
		if s.Shared {
			b.WriteString(" (shared)")
		}
		if s.Description != "" {
			b.WriteString(": " + cutRunes(s.Description, 200))
		}
		b.WriteByte('\n')
	}
	for _, s := range broken {
		fmt.Fprintf(&b, "%s (not usable: %s; fix /workspace/skills/%s/SKILL.md, or save it again with skills(name, description, code))\n",
			s.Name, cutRunes(s.Problem, 300), s.Name)
	}
	return reply{text: b.String()}
}

func (f *Face) getSkill(ctx context.Context, sc *Scope, name string) reply {
	s, err := f.o.Skills.GetSkill(ctx, *sc, name)
	if errors.Is(err, pluginapi.ErrNotFound) {
		return f.unknownSkill(ctx, *sc, name)
	}
	if err != nil {
		return failure("skills", err)
	}
	return reply{text: renderSkill(&s)}
}

func (f *Face) unknownSkill(ctx context.Context, sc Scope, name string) reply {
	quoted := cutRunes(name, maxQuoted)
	skills, err := f.o.Skills.ListSkills(ctx, sc)
	if err != nil || len(skills) == 0 {
		return errorReply("no skill named %q; none are saved yet", quoted)
	}
	names := make([]string, len(skills))
	for i, s := range skills {
		names[i] = s.Name
	}
	if c := closest(name, names); c != "" {
		return errorReply("no skill named %q; did you mean %q? known skills: %s", quoted, c, strings.Join(names, ", "))
	}
	return errorReply("no skill named %q; known skills: %s", quoted, strings.Join(names, ", "))
}

// renderSkill is a skill as Markdown: its title once, how to import it,
// its instructions and its code.
func renderSkill(s *Skill) string {
	imp := skillModule(s)
	title, body := "# "+s.Name, strings.TrimSpace(s.Instructions)
	// SKILL.md bodies usually open with their own title.
	if strings.HasPrefix(body, "# ") {
		title, body, _ = strings.Cut(body, "\n")
		body = strings.TrimSpace(body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\nImport: from %s import ...\n", title, s.Description, imp)
	if body != "" && body != strings.TrimSpace(s.Description) {
		b.WriteString("\n" + body + "\n")
	}
	if s.Code != "" {
		b.WriteString("\n```python\n" + strings.TrimRight(s.Code, "\n") + "\n```\n")
	}
	return b.String()
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
