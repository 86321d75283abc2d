// Package search is search_tools (ARCHITECTURE §6): it finds the tools and
// skills a task needs through the configured selector plugin and returns
// them at the detail level asked for. The control API's SearchTools and the
// MCP face's search_tools both call (*Service).Search.
//
// The service also keeps the selector's index in step with the catalog: it
// subscribes to catalog changes and turns them into selector.Index calls
// (the first with Reset, then upserts and deletes by tool id and content
// hash, at most BatchSize documents per call), re-indexes everything when
// asked to (after the selector plugin was restarted, which clears its
// index) and indexes the shared skills beside the tools.
//
// Without a selector, or while the selector fails or its index is being
// rebuilt, Search matches query words against names and descriptions in
// process and says so in Response.Warnings.
//
// Use:
//
//	svc := search.New(search.Options{Catalog: cat, Selector: sel, SelectorName: "embeddings", Skills: skills})
//	svc.Start()
//	defer svc.Close()
//	host.OnRestart(func(kind pluginapi.Kind, name string) { ... go svc.Reindex(ctx) })
//	res, err := svc.Search(ctx, search.Request{Query: "read a file", Detail: search.DetailFull, Limit: 5})
package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

// Detail levels of a search: how much of each hit is returned.
const (
	// DetailName returns ids, names and the import line.
	DetailName = "name"
	// DetailDescription adds the description (the default).
	DetailDescription = "description"
	// DetailFull adds the stub source and the input schema (for a skill,
	// its code).
	DetailFull = "full"
)

// Kinds of hits.
const (
	KindTool  = "tool"
	KindSkill = "skill"
)

// SkillsServer is the server name skills are indexed under, so that a server
// filter can ask for skills alone ("skills") or leave them out.
const SkillsServer = "skills"

// Limits of a search.
const (
	DefaultLimit = 8
	MaxLimit     = 50
)

// BatchSize is the most documents (upserts plus deletes) one selector.Index
// call carries, so that a large catalogue never makes one huge message.
const BatchSize = 1000

// DefaultIndexTimeout bounds one selector.Index call.
const DefaultIndexTimeout = 30 * time.Second

// Catalog is what the service needs of the tool catalog; *catalog.Catalog
// implements it.
type Catalog interface {
	Tools() []catalog.Tool
	Tool(server, name string) (catalog.Tool, bool)
	StubSource(id string) ([]byte, bool)
	Servers() []catalog.ServerStatus
	Subscribe(fn func(catalog.Change)) (cancel func())
}

// Skill is a shared skill as the service indexes it.
type Skill struct {
	Name        string
	Description string
	// Import is the module code imports: skills.<name>.
	Import string
}

// Skills lists the skills to index and reads one's code for DetailFull.
type Skills interface {
	ListSkills(ctx context.Context) ([]Skill, error)
	SkillCode(ctx context.Context, name string) (string, error)
}

// Options configure a Service.
type Options struct {
	Catalog Catalog
	// Selector ranks; nil means no selector is configured and every search
	// uses the in-process substring match.
	Selector selector.Selector
	// SelectorName names the selector plugin in warnings.
	SelectorName string
	// Skills may be nil: no skills are searched.
	Skills Skills
	// DefaultLimit applies when a request has no limit (default
	// DefaultLimit; at most MaxLimit).
	DefaultLimit int
	// IndexTimeout bounds one Index call (default DefaultIndexTimeout).
	IndexTimeout time.Duration
	Logger       hclog.Logger
}

// Request is one search.
type Request struct {
	Query string
	// Detail is DetailName, DetailDescription or DetailFull; "" means
	// DetailDescription.
	Detail string
	// Limit caps the hits; 0 means Options.DefaultLimit. At most MaxLimit.
	Limit int
	// Servers restricts hits to these servers (SkillsServer for skills).
	Servers []string
	// Kinds restricts hits to KindTool or KindSkill when not empty.
	Kinds []string
}

// Hit is one result, best first in a Response.
type Hit struct {
	// ID is "server/name" for tools and "skills/name" for skills.
	ID     string
	Kind   string
	Score  float64
	Server string
	Name   string
	// Import is the Python line that brings the tool or skill in.
	Import string
	// Description is set from DetailDescription up.
	Description string
	// StubSource (the stub module, a local tool's function, a skill's
	// code) and InputSchema (tools of upstream servers) are set at
	// DetailFull.
	StubSource  string
	InputSchema json.RawMessage
}

// Response holds the hits and what the caller should know about how they
// were found.
type Response struct {
	Hits []Hit
	// Warnings say when the substring fallback answered, or what the
	// selector reported (an embeddings endpoint falling back to BM25).
	Warnings []string
}

// Service is search_tools and the index synchronisation behind it. Its
// methods are safe for concurrent use.
type Service struct {
	o   Options
	log hclog.Logger

	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	// idx serialises indexing: catalog changes, re-indexes and skill
	// refreshes reach the selector in order.
	idx       sync.Mutex
	cancelSub func()
	// dirty: the last Index call failed, so the selector may hold a
	// partial index; the next change re-indexes everything.
	dirty      bool
	skillHash  map[string]string // by skill name, what the selector holds
	generation uint64            // counts full re-indexes, for tests and logs

	mu sync.RWMutex
	// synced: the selector holds the whole current catalogue.
	synced bool
	skills []Skill
	// syncErr is why the selector's index is not in step.
	syncErr error
	// closed: Close was called; no more background work starts.
	closed bool
}

// New returns a service; Start begins following the catalog.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.DefaultLimit <= 0 {
		o.DefaultLimit = DefaultLimit
	}
	o.DefaultLimit = min(o.DefaultLimit, MaxLimit)
	if o.IndexTimeout <= 0 {
		o.IndexTimeout = DefaultIndexTimeout
	}
	if o.SelectorName == "" {
		o.SelectorName = "selector"
	}
	life, stop := context.WithCancel(context.Background())
	return &Service{o: o, log: o.Logger, life: life, stop: stop, skillHash: map[string]string{}}
}

// Start subscribes to the catalog: the selector gets every tool and shared
// skill now (in the background) and every change after. Without a selector
// it only reads the skills.
func (s *Service) Start() {
	if s.o.Selector == nil {
		s.log.Warn("no selector plugin is configured: search_tools matches words in names and descriptions instead of ranking")
		s.wg.Go(func() {
			skills := s.listSkills(s.life)
			s.mu.Lock()
			s.skills = skills
			s.mu.Unlock()
		})
		return
	}
	s.idx.Lock()
	defer s.idx.Unlock()
	s.cancelSub = s.o.Catalog.Subscribe(s.onChange)
}

// Close stops following the catalog and waits for indexing in progress.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.idx.Lock()
	cancel := s.cancelSub
	s.cancelSub = nil
	s.idx.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
}

// Search finds the best tools and skills for req.Query. Invalid requests
// are errors wrapping pluginapi.ErrInvalidArgument; a server filter naming
// no known server wraps pluginapi.ErrNotFound. A failing selector is not an
// error: the substring match answers and a warning says so.
func (s *Service) Search(ctx context.Context, req Request) (Response, error) {
	if err := s.check(&req); err != nil {
		return Response{}, err
	}
	var res Response
	start := time.Now()
	ranked, warn, via := s.rank(ctx, req)
	if ctx.Err() != nil {
		return Response{}, ctx.Err()
	}
	defer func() { metrics.Search(via, time.Since(start)) }()
	res.Warnings = warn
	skills := s.skillsByName()
	for _, r := range ranked {
		h, ok := s.hit(ctx, r, req.Detail, skills)
		if !ok {
			continue // gone from the catalog since it was indexed
		}
		res.Hits = append(res.Hits, h)
		if len(res.Hits) == req.Limit {
			break
		}
	}
	return res, nil
}

func (s *Service) check(req *Request) error {
	req.Query = strings.TrimSpace(req.Query)
	if req.Query == "" {
		return fmt.Errorf("search: the query is empty: %w", pluginapi.ErrInvalidArgument)
	}
	switch req.Detail {
	case "":
		req.Detail = DetailDescription
	case DetailName, DetailDescription, DetailFull:
	default:
		return fmt.Errorf("search: detail level must be name, description or full, not %q: %w", req.Detail, pluginapi.ErrInvalidArgument)
	}
	switch {
	case req.Limit == 0:
		req.Limit = s.o.DefaultLimit
	case req.Limit < 0 || req.Limit > MaxLimit:
		return fmt.Errorf("search: limit must be between 1 and %d, not %d: %w", MaxLimit, req.Limit, pluginapi.ErrInvalidArgument)
	}
	for _, k := range req.Kinds {
		if k != KindTool && k != KindSkill {
			return fmt.Errorf("search: kind must be %s or %s, not %q: %w", KindTool, KindSkill, k, pluginapi.ErrInvalidArgument)
		}
	}
	if len(req.Servers) == 0 {
		return nil
	}
	known := s.serverNames()
	for _, name := range req.Servers {
		if !slices.Contains(known, name) {
			return fmt.Errorf("search: unknown server %q (servers: %s): %w", name, strings.Join(known, ", "), pluginapi.ErrNotFound)
		}
	}
	return nil
}

// serverNames lists the upstream servers, the local tool packages and
// SkillsServer when skills are searched.
func (s *Service) serverNames() []string {
	var out []string
	for _, st := range s.o.Catalog.Servers() {
		out = append(out, st.Name)
	}
	for _, t := range s.o.Catalog.Tools() {
		if !slices.Contains(out, t.Server) {
			out = append(out, t.Server)
		}
	}
	if s.o.Skills != nil {
		out = append(out, SkillsServer)
	}
	return out
}

// ranked is one ranked document id with its score.
type ranked struct {
	id    string
	score float64
}

// What answered a search, for metrics.
const (
	viaSelector = "selector"
	viaFallback = "fallback"
)

// rank asks the selector when it holds the current catalogue, and falls
// back to the substring match otherwise.
func (s *Service) rank(ctx context.Context, req Request) (_ []ranked, warnings []string, via string) {
	if s.o.Selector == nil {
		return s.fallback(req), []string{"no selector plugin is configured: results come from a substring match on names and descriptions, not from a ranking"}, viaFallback
	}
	s.mu.RLock()
	synced, syncErr := s.synced, s.syncErr
	s.mu.RUnlock()
	if !synced {
		why := "its index is still being built"
		if syncErr != nil {
			why = "its index is out of date (" + syncErr.Error() + ")"
		}
		return s.fallback(req), []string{fmt.Sprintf("selector %s not used: %s; results come from a substring match on names and descriptions", s.o.SelectorName, why)}, viaFallback
	}
	// Ask for a few more than needed: hits for tools removed since they
	// were indexed are dropped.
	resp, err := s.o.Selector.Search(ctx, selector.SearchRequest{
		Query: req.Query, Limit: req.Limit + 4, Servers: req.Servers, Kinds: req.Kinds,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, viaSelector
		}
		s.log.Warn("selector search failed; using the substring match", "selector", s.o.SelectorName, "error", err)
		return s.fallback(req), []string{fmt.Sprintf("selector %s failed (%v): results come from a substring match on names and descriptions", s.o.SelectorName, err)}, viaFallback
	}
	for _, d := range resp.Diagnostics {
		w := d.Summary
		if d.Detail != "" {
			w += ": " + d.Detail
		}
		warnings = append(warnings, w)
	}
	out := make([]ranked, len(resp.Hits))
	for i, h := range resp.Hits {
		out[i] = ranked{id: h.ID, score: h.Score}
	}
	return out, warnings, viaSelector
}

// hit fills one result from the catalog or the skills at the detail level.
func (s *Service) hit(ctx context.Context, r ranked, detail string, skills map[string]Skill) (Hit, bool) {
	if name, ok := strings.CutPrefix(r.id, SkillsServer+"/"); ok {
		sk, ok := skills[name]
		if !ok {
			return Hit{}, false
		}
		h := Hit{ID: r.id, Kind: KindSkill, Score: r.score, Server: SkillsServer, Name: sk.Name, Import: "import " + sk.Import}
		if detail != DetailName {
			h.Description = sk.Description
		}
		if detail == DetailFull {
			code, err := s.o.Skills.SkillCode(ctx, sk.Name)
			if err != nil {
				s.log.Warn("read skill code", "skill", sk.Name, "error", err)
			}
			h.StubSource = code
		}
		return h, true
	}
	server, name, ok := strings.Cut(r.id, "/")
	if !ok {
		return Hit{}, false
	}
	t, ok := s.o.Catalog.Tool(server, name)
	if !ok {
		return Hit{}, false
	}
	h := Hit{ID: t.ID, Kind: KindTool, Score: r.score, Server: t.Server, Name: t.Name, Import: t.Stub.Import}
	if detail != DetailName {
		h.Description = description(t)
	}
	if detail == DetailFull {
		if src, ok := s.o.Catalog.StubSource(t.ID); ok {
			h.StubSource = string(src)
		}
		h.InputSchema = t.InputSchema
	}
	return h, true
}

func description(t catalog.Tool) string {
	if t.Description != "" {
		return t.Description
	}
	return t.Title
}

func (s *Service) skillsByName() map[string]Skill {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Skill, len(s.skills))
	for _, sk := range s.skills {
		out[sk.Name] = sk
	}
	return out
}

// listSkills reads the skills, logging (not failing) when that is not
// possible: tools stay searchable.
func (s *Service) listSkills(ctx context.Context) []Skill {
	if s.o.Skills == nil {
		return nil
	}
	skills, err := s.o.Skills.ListSkills(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("skills are not searchable: listing them failed", "error", err)
	}
	return skills
}
