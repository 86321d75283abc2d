package mcpface

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/pluginapi"
)

// Resource URIs: the stub tree mirrors the files sandboxed code imports
// (cexec://servers/<package>/<function>.py), skills are cexec://skills/<name>.
const (
	StubURITemplate  = "cexec://servers/{server}/{tool}.py"
	SkillURITemplate = "cexec://skills/{name}"
	stubURIPrefix    = "cexec://"
	skillURIPrefix   = "cexec://skills/"
	pythonMIME       = "text/x-python"
	markdownMIME     = "text/markdown"
)

func (f *Face) addResources() {
	f.addResource(
		mcp.NewResourceTemplate(StubURITemplate, "tool stub",
			mcp.WithTemplateDescription("Python stub of an upstream tool, as sandboxed code imports it"),
			mcp.WithTemplateMIMEType(pythonMIME)),
		f.readStub, f.findStub)
	f.addResource(
		mcp.NewResourceTemplate(SkillURITemplate, "skill",
			mcp.WithTemplateDescription("A saved skill: instructions and code"),
			mcp.WithTemplateMIMEType(markdownMIME)),
		f.readSkill, f.findSkill)
	if f.o.Attachments != nil {
		f.addResource(
			mcp.NewResourceTemplate(WorkspaceURITemplate, "saved attachment",
				mcp.WithTemplateDescription("Content a program showed that was too large to return inline")),
			f.readWorkspace, f.findWorkspace)
	}
}

// resourceReader is a resource template and how to tell whether a URI it
// matches names anything (see steerNotFound).
type resourceReader struct {
	tpl  mcp.ResourceTemplate
	find resourceFinder
}

// resourceFinder returns, for a URI that names nothing, why (a hint for
// the agent), else "": cheaply, without reading the resource whole or
// tokenizing it. An error it cannot tell from is left to the handler.
type resourceFinder func(ctx context.Context, uri string) string

func (f *Face) addResource(tpl mcp.ResourceTemplate, read server.ResourceTemplateHandlerFunc, find resourceFinder) {
	f.readers = append(f.readers, resourceReader{tpl: tpl, find: find})
	f.srv.AddResourceTemplate(tpl, f.tokenizedErrors(read))
}

// notFound is a read of a URI that names nothing; it says what to look at
// instead.
type notFound struct{ uri, hint string }

func (e notFound) Error() string { return e.uri + ": " + e.hint }

// steerNotFound is a BeforeReadResource hook that gets a URI naming nothing
// answered with -32002 (resource not found), as the MCP spec asks. mcp-go
// answers any error of a resource handler with -32603 (internal error), and
// -32002 only for a URI no template matches; so the URI is looked up here
// first and, if it names nothing, given a suffix that no template matches
// (they allow no space) and that says why, which mcp-go quotes.
func (f *Face) steerNotFound(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
	for _, r := range f.readers {
		if !r.tpl.URITemplate.Regexp().MatchString(req.Params.URI) {
			continue
		}
		if hint := r.find(ctx, req.Params.URI); hint != "" {
			req.Params.URI += " (" + hint + ")"
		}
		return
	}
}

// tokenizedErrors passes a resource handler's error message through the
// PII tokenizer: it quotes the URI and what the services said (a skill's
// file that does not parse, an upstream's error), all of which reaches the
// model. An error that cannot be checked is replaced.
func (f *Face) tokenizedErrors(read server.ResourceTemplateHandlerFunc) server.ResourceTemplateHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		res, err := read(ctx, req)
		if err == nil {
			return res, nil
		}
		sc, serr := f.scope(ctx)
		if serr != nil {
			return nil, serr
		}
		var nf notFound
		text := errorText(err)
		if errors.As(err, &nf) {
			// The hint alone: the URI is the client's own, which mcp-go
			// quotes with the hint (steerNotFound).
			text = nf.hint
		}
		msg, terr := f.o.PII.Tokenize(ctx, sc, text)
		if terr != nil {
			if f.tokenizerFailed(ctx, "resource error", terr, "tenant", sc.Tenant) {
				return nil, errors.New("cexec withheld this error because the PII tokenizer failed")
			}
			return nil, ctx.Err()
		}
		if nf.uri != "" {
			return nil, notFound{uri: nf.uri, hint: msg}
		}
		return nil, errors.New(msg)
	}
}

// listResources fills resources/list with the tenant's stubs and skills.
// The lists are per tenant and change with the catalog, so they are built
// per request rather than registered. A hook cannot fail the request, so a
// failing service leaves its part out and is logged.
func (f *Face) listResources(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
	sc, err := f.scope(ctx)
	if err != nil {
		f.log.Warn("resources/list without a scope", "error", err)
		return
	}
	tools, err := f.o.Catalog.Tools(ctx, sc, "")
	if err != nil {
		f.log.Warn("resources/list: cannot list tools", "tenant", sc.Tenant, "error", err)
	}
	out := make([]mcp.Resource, 0, len(tools))
	// Several local tools can share a module file, which is one resource.
	seen := make(map[string]bool, len(tools))
	for i := range tools {
		t := &tools[i]
		uri := stubURIPrefix + t.Path
		if t.Path == "" || seen[uri] {
			continue
		}
		seen[uri] = true
		name := t.Server + "/" + t.Name
		if t.Local {
			// Named by its file, as it may hold more tools than this one.
			name = strings.TrimPrefix(t.Path, "servers/")
		}
		out = append(out, mcp.NewResource(uri, name, mcp.WithMIMEType(pythonMIME)))
	}
	skills, err := f.o.Skills.ListSkills(ctx, sc)
	if err != nil {
		f.log.Warn("resources/list: cannot list skills", "tenant", sc.Tenant, "error", err)
	}
	for _, s := range skills {
		out = append(out, mcp.NewResource(skillURIPrefix+s.Name, "skill "+s.Name, mcp.WithMIMEType(markdownMIME)))
	}
	res.Resources = append(res.Resources, out...)
}

// readStub serves cexec://servers/<package>/<file>.py: a generated stub, or
// a local tools module read from the servers folder.
func (f *Face) readStub(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	sc, err := f.scope(ctx)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	path := strings.TrimPrefix(uri, stubURIPrefix)
	tools, err := f.o.Catalog.Tools(ctx, sc, "")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	t, file := stubAt(tools, path)
	if t == nil {
		return nil, notFound{uri, noStub}
	}
	var src string
	if t.Local && file {
		src, err = f.o.Catalog.LocalFile(ctx, sc, path)
	} else {
		src, err = f.o.Catalog.StubSource(ctx, sc, t.Server, t.Name)
	}
	if errors.Is(err, pluginapi.ErrNotFound) {
		return nil, notFound{uri, noStub}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	return f.textContents(ctx, sc, uri, pythonMIME, src)
}

const noStub = "no such stub or local tools module; resources/list or search_tools shows the tools there are"

// findStub is readStub's lookup without the read.
func (f *Face) findStub(ctx context.Context, uri string) string {
	sc, err := f.scope(ctx)
	if err != nil {
		return ""
	}
	tools, err := f.o.Catalog.Tools(ctx, sc, "")
	if err != nil {
		return ""
	}
	if t, _ := stubAt(tools, strings.TrimPrefix(uri, stubURIPrefix)); t == nil {
		return noStub
	}
	return ""
}

// stubAt finds the tool a path of the stub tree names: the one whose file
// it is, else the local tool it would be the stub of
// (servers/<package>/<function>.py, as a generated stub's is) though its
// function is in a module of another name; file says which.
func stubAt(tools []Tool, path string) (t *Tool, file bool) {
	for i := range tools {
		if tools[i].Path == path {
			return &tools[i], true
		}
	}
	for i := range tools {
		if tools[i].Local && "servers/"+tools[i].Server+"/"+tools[i].Name+".py" == path {
			return &tools[i], false
		}
	}
	return nil, false
}

// readSkill serves cexec://skills/<name>.
func (f *Face) readSkill(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	sc, err := f.scope(ctx)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	name := strings.TrimPrefix(uri, skillURIPrefix)
	s, err := f.o.Skills.GetSkill(ctx, sc, name)
	if errors.Is(err, pluginapi.ErrNotFound) {
		return nil, notFound{uri, noSkill}
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	return f.textContents(ctx, sc, uri, markdownMIME, renderSkill(&s))
}

const noSkill = "no such skill; skills() lists the skills there are"

// findSkill is readSkill's lookup (a skill is small) without the render.
func (f *Face) findSkill(ctx context.Context, uri string) string {
	sc, err := f.scope(ctx)
	if err != nil {
		return ""
	}
	if _, err := f.o.Skills.GetSkill(ctx, sc, strings.TrimPrefix(uri, skillURIPrefix)); errors.Is(err, pluginapi.ErrNotFound) {
		return noSkill
	}
	return ""
}

// textContents passes a resource's text through the PII tokenizer.
func (f *Face) textContents(ctx context.Context, sc Scope, uri, mime, text string) ([]mcp.ResourceContents, error) {
	text, err := f.o.PII.Tokenize(ctx, sc, text)
	if err != nil {
		if f.tokenizerFailed(ctx, "resource", err, "uri", uri, "tenant", sc.Tenant) {
			return nil, errors.New("cexec withheld this resource because the PII tokenizer failed")
		}
		return nil, ctx.Err()
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: text}}, nil
}
