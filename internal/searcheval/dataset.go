// Package searcheval measures how well a tool selector ranks tools for
// tasks, and how fast it indexes and searches at catalogue scale.
//
// A dataset is a directory holding tools.jsonl (one MCP-shaped tool per
// line: server, name, description, inputSchema; a tool's id is
// "server/name") and queries.jsonl (one query per line: id, text and the ids
// of the relevant tools), the format of ../shared/eval.
package searcheval

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cexec/cexec/pluginapi/selector"
)

// Query is one evaluation query with its relevant (gold) tool ids.
type Query struct {
	ID       string   `json:"id"`
	Text     string   `json:"text"`
	Relevant []string `json:"relevant"`
}

// Dataset is a tool catalogue and the queries judged against it.
type Dataset struct {
	// Name is the directory's base name.
	Name    string
	Tools   []selector.Document
	Queries []Query
}

type toolLine struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Load reads dir/tools.jsonl and dir/queries.jsonl. Every relevant id must
// name a tool of the catalogue, so a typo cannot silently lower the scores.
func Load(dir string) (*Dataset, error) {
	ds := &Dataset{Name: filepath.Base(filepath.Clean(dir))}
	seen := map[string]bool{}
	err := readJSONL(filepath.Join(dir, "tools.jsonl"), func(line int, raw []byte) error {
		var t toolLine
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		if t.Server == "" || t.Name == "" {
			return fmt.Errorf("tool without server or name")
		}
		doc := ToolDocument(t.Server, t.Name, t.Description, t.InputSchema)
		if seen[doc.ID] {
			return fmt.Errorf("duplicate tool id %q", doc.ID)
		}
		seen[doc.ID] = true
		ds.Tools = append(ds.Tools, doc)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = readJSONL(filepath.Join(dir, "queries.jsonl"), func(line int, raw []byte) error {
		var q Query
		if err := json.Unmarshal(raw, &q); err != nil {
			return err
		}
		for _, id := range q.Relevant {
			if !seen[id] {
				return fmt.Errorf("query %q: relevant tool %q is not in tools.jsonl", q.ID, id)
			}
		}
		ds.Queries = append(ds.Queries, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// ToolDocument builds the selector document of an MCP tool, with a content
// hash over everything indexed.
func ToolDocument(server, name, description string, inputSchema json.RawMessage) selector.Document {
	h := sha256.New()
	for _, s := range []string{server, name, description, string(inputSchema)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return selector.Document{
		ID:          server + "/" + name,
		Kind:        "tool",
		Server:      server,
		Name:        name,
		Description: description,
		InputSchema: inputSchema,
		ContentHash: hex.EncodeToString(h.Sum(nil)),
	}
}

func readJSONL(path string, fn func(line int, raw []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open dataset file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		if err := fn(line, raw); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
