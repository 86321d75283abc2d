package bridge

import (
	"bytes"
	"fmt"
	neturl "net/url"
	"regexp"
	"sync"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cexec/cexec/core/catalog"
)

// patternTimeout bounds one ECMAScript pattern match, whose engine
// backtracks: the patterns come from upstream servers and the strings from
// sandboxed code.
const patternTimeout = 100 * time.Millisecond

// compiled is a tool's input schema compiled for one version (hash) of it.
type compiled struct {
	hash   string
	schema *jsonschema.Schema // nil when the schema does not compile
}

// schemas caches compiled input schemas by tool ID and hash.
type schemas struct {
	mu    sync.Mutex
	byID  map[string]*compiled
	onErr func(id string, err error)
}

// get returns t's compiled input schema, or nil when it has none that
// compiles (the call then goes out unvalidated: the server still validates).
func (s *schemas) get(t *catalog.Tool) *jsonschema.Schema {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byID[t.ID]; ok && c.hash == t.Hash {
		return c.schema
	}
	sch, err := compileSchema(t.ID, t.InputSchema)
	if err != nil {
		s.onErr(t.ID, err)
	}
	s.byID[t.ID] = &compiled{hash: t.Hash, schema: sch}
	return sch
}

func compileSchema(id string, raw []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode input schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	// MCP says schemas without $schema are 2020-12.
	c.DefaultDraft(jsonschema.Draft2020)
	// No loaders: a schema from an upstream server must not make cexecd
	// read local files (file://) or fetch URLs. Known metaschemas are
	// built in; any other external $ref fails compilation.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	c.UseRegexpEngine(compilePattern)
	// A hierarchical base URL, so relative $refs resolve to URLs that fail
	// to load (nothing loads) rather than to the schema itself.
	url := "https://tools.cexec.invalid/" + neturl.PathEscape(id) + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("load input schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile input schema: %w", err)
	}
	return sch, nil
}

// compilePattern prefers Go's linear-time regexp and falls back to an
// ECMAScript engine (with a match timeout) for the patterns Go rejects,
// such as lookaheads from zod-generated schemas.
func compilePattern(s string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(s); err == nil {
		return re, nil
	}
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = patternTimeout
	return (*ecmaRegexp)(re), nil
}

type ecmaRegexp regexp2.Regexp

func (re *ecmaRegexp) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	return err == nil && ok
}

func (re *ecmaRegexp) String() string { return (*regexp2.Regexp)(re).String() }
