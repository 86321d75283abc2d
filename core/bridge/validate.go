package bridge

import (
	"bytes"
	"fmt"
	neturl "net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

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

var printer = message.NewPrinter(language.English)

// maxProblems is how many validation problems one error message lists.
const maxProblems = 3

// describe turns the library's error tree into a short message naming the
// arguments at fault: the leaves of the tree (the keywords that failed),
// at most maxProblems of them.
func describe(err *jsonschema.ValidationError) string {
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if m := problem(e); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(err)
	if len(msgs) > maxProblems {
		msgs = append(msgs[:maxProblems], fmt.Sprintf("and %d more", len(msgs)-maxProblems))
	}
	return strings.Join(msgs, "; ")
}

// problem words one failed keyword: `argument "path": expected string, got
// number`; below the top level the JSON pointer says where:
// `argument "entities" at /entities/0/name: expected string, got number`.
func problem(e *jsonschema.ValidationError) string {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(loc) == 0 {
			return plural("missing required argument", k.Missing) + " " + quoteList(k.Missing)
		}
		return where(loc) + ": " + plural("missing required property", k.Missing) + " " + quoteList(k.Missing)
	case *kind.AdditionalProperties:
		if len(loc) == 0 {
			return plural("unexpected argument", k.Properties) + " " + quoteList(k.Properties)
		}
		return where(loc) + ": " + plural("unexpected property", k.Properties) + " " + quoteList(k.Properties)
	case *kind.Type:
		if len(loc) == 0 {
			return fmt.Sprintf("arguments must be %s, got %s", article(k.Want), k.Got)
		}
		return fmt.Sprintf("%s: expected %s, got %s", where(loc), strings.Join(k.Want, " or "), k.Got)
	}
	msg := e.ErrorKind.LocalizedString(printer)
	if len(loc) == 0 {
		return "arguments: " + msg
	}
	return where(loc) + ": " + msg
}

func where(loc []string) string {
	arg := fmt.Sprintf("argument %q", loc[0])
	if len(loc) == 1 {
		return arg
	}
	return arg + " at " + pointer(loc)
}

// pointer is the RFC 6901 JSON pointer of an instance location.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func plural(noun string, items []string) string {
	switch {
	case len(items) < 2:
		return noun
	case strings.HasSuffix(noun, "y"):
		return noun[:len(noun)-1] + "ies"
	default:
		return noun + "s"
	}
}

// quoteList quotes names in sorted order: the validator collects them from
// a map, and a message should not change from one call to the next.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	slices.Sort(q)
	return strings.Join(q, ", ")
}

func article(types []string) string {
	if len(types) == 1 && types[0] == "object" {
		return "an object"
	}
	return strings.Join(types, " or ")
}
