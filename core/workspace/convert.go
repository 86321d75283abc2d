package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/cexec/cexec/internal/bytesize"
)

// maxDepth bounds nesting in both directions, so a hostile document cannot
// exhaust the stack.
const maxDepth = 1000

// maxAliasNodes bounds how many nodes aliases and merge keys may add to a
// YAML document beyond its own. Without it a 1.4 KB "billion laughs" state
// file cost seconds and 100 MB per read before the output cap stopped it;
// with it the walk stops after this many extra nodes.
const maxAliasNodes = 10000

// jsonToYAML turns one JSON value into a YAML document. It walks JSON tokens
// instead of decoding into maps, so key order and the exact text of numbers
// survive (a 20-digit id does not become a float).
func jsonToYAML(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	node, err := jsonNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the value")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func jsonNode(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("JSON value nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				n.Content = append(n.Content, strNode(k.(string)))
			}
			child, err := jsonNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, child)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return n, nil
	case string:
		return strNode(v), nil
	case json.Number:
		n := &yaml.Node{Kind: yaml.ScalarNode, Value: v.String()}
		// Plain YAML resolves a JSON number to !!int or !!float by itself,
		// except one out of float64 range, which would read back as a
		// string without an explicit tag.
		if _, err := strconv.ParseFloat(v.String(), 64); err != nil {
			n.Tag = "!!float"
		}
		return n, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("invalid JSON: unexpected token %v", tok)
}

// strNode tags strings explicitly so the encoder quotes those that would
// otherwise read back as something else ("true", "123", "null").
func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// yamlToJSON is the bounded reader of YAML from tenants: it turns one
// document into one JSON value, compact. Anchors and merge keys (<<) are
// expanded, but to at most maxAliasNodes nodes beyond the document's own;
// nesting stops at maxDepth and the output at max bytes. Values JSON cannot
// hold (.inf, .nan, non-scalar keys) are errors that say where they are.
func yamlToJSON(data []byte, max int64) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return []byte("null"), nil
		}
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("invalid YAML: more than one document")
	}
	c := &yamlConv{max: max, nodes: maxAliasNodes + countNodes(&doc, 0)}
	if err := c.value(&doc, 0); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

type yamlConv struct {
	buf bytes.Buffer
	max int64
	// nodes is how many more nodes the walk may visit: the document's own
	// plus maxAliasNodes for what aliases and merge keys repeat.
	nodes int
}

func (c *yamlConv) tooManyNodes(n *yaml.Node) error {
	return fmt.Errorf("YAML aliases and merge keys expand to more than %d nodes beyond the document's own (at line %d); write the repeated values out or use fewer aliases: %w", maxAliasNodes, n.Line, ErrTooLarge)
}

// countNodes counts the nodes written in the document, not following
// aliases; the parser already bounds its depth.
func countNodes(n *yaml.Node, depth int) int {
	if depth > maxDepth {
		return 0 // value refuses the document at this depth anyway
	}
	c := 1
	for _, e := range n.Content {
		c += countNodes(e, depth+1)
	}
	return c
}

var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

func (c *yamlConv) write(b []byte) error {
	c.buf.Write(b)
	if c.max > 0 && int64(c.buf.Len()) > c.max {
		return fmt.Errorf("YAML value expands to more than %s of JSON: %w", bytesize.Format(c.max), ErrTooLarge)
	}
	return nil
}

func (c *yamlConv) value(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("YAML value nested deeper than %d levels (or a recursive alias) at line %d", maxDepth, n.Line)
	}
	if c.nodes--; c.nodes < 0 {
		return c.tooManyNodes(n)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return c.write([]byte("null"))
		}
		return c.value(n.Content[0], depth+1)
	case yaml.AliasNode:
		return c.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		if err := c.write([]byte{'['}); err != nil {
			return err
		}
		for i, e := range n.Content {
			if i > 0 {
				if err := c.write([]byte{','}); err != nil {
					return err
				}
			}
			if err := c.value(e, depth+1); err != nil {
				return err
			}
		}
		return c.write([]byte{']'})
	case yaml.MappingNode:
		pairs, err := c.mappingPairs(n, depth)
		if err != nil {
			return err
		}
		if err := c.write([]byte{'{'}); err != nil {
			return err
		}
		for i, p := range pairs {
			if i > 0 {
				if err := c.write([]byte{','}); err != nil {
					return err
				}
			}
			if err := c.write(append(mustJSON(p.key), ':')); err != nil {
				return err
			}
			if err := c.value(p.val, depth+1); err != nil {
				return err
			}
		}
		return c.write([]byte{'}'})
	case yaml.ScalarNode:
		b, err := scalarJSON(n)
		if err != nil {
			return err
		}
		return c.write(b)
	}
	return fmt.Errorf("unsupported YAML node at line %d", n.Line)
}

type yamlPair struct {
	key string
	val *yaml.Node
}

// mappingPairs lists a mapping's entries in order with merge keys expanded:
// explicit keys win over merged ones, the last explicit duplicate wins, and
// among merged mappings the first wins (YAML merge key semantics). Each
// merged entry is charged to the node budget, since merges of merges
// repeat work without adding output.
func (c *yamlConv) mappingPairs(n *yaml.Node, depth int) ([]yamlPair, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("YAML merge keys nested deeper than %d levels at line %d", maxDepth, n.Line)
	}
	var out []yamlPair
	index := map[string]int{}
	explicit := map[string]bool{}
	add := func(p yamlPair, isExplicit bool) {
		i, seen := index[p.key]
		switch {
		case !seen:
			index[p.key] = len(out)
			out = append(out, p)
		case isExplicit:
			out[i] = p
		default:
			return
		}
		if isExplicit {
			explicit[p.key] = true
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			sources := []*yaml.Node{deref(v)}
			if sources[0].Kind == yaml.SequenceNode {
				sources = sources[0].Content
			}
			for _, src := range sources {
				src = deref(src)
				if src.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("YAML merge key at line %d must refer to a mapping", k.Line)
				}
				merged, err := c.mappingPairs(src, depth+1)
				if err != nil {
					return nil, err
				}
				if c.nodes -= len(merged); c.nodes < 0 {
					return nil, c.tooManyNodes(src)
				}
				for _, p := range merged {
					if !explicit[p.key] {
						add(p, false)
					}
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("YAML mapping key at line %d is not a scalar; JSON keys are strings", k.Line)
		}
		key := k.Value
		if k.ShortTag() == "!!null" {
			key = "null"
		}
		add(yamlPair{key, v}, true)
	}
	return out, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// scalarJSON converts one YAML scalar. Numbers keep their text when it is
// already valid JSON, so big integers and exact decimals round-trip.
func scalarJSON(n *yaml.Node) ([]byte, error) {
	switch n.ShortTag() {
	case "!!null":
		return []byte("null"), nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("YAML boolean at line %d: %w", n.Line, err)
		}
		return []byte(strconv.FormatBool(b)), nil
	case "!!int", "!!float":
		if jsonNumberRE.MatchString(n.Value) {
			return []byte(n.Value), nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("YAML number at line %d: %w", n.Line, err)
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("YAML number %s at line %d has no JSON form", n.Value, n.Line)
		}
		return json.Marshal(v)
	}
	// Strings, timestamps, binary (base64 text) and custom tags keep their
	// text.
	return json.Marshal(n.Value)
}
