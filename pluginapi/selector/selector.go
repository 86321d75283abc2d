// Package selector is the plugin API for tool selectors: a selector keeps an
// index of tools and skills in step with cexec's catalog and ranks them for a
// query.
package selector

import (
	"context"
	"encoding/json"

	"github.com/cexec/cexec/pluginapi"
)

// APIVersion is the selector API version this package implements.
const APIVersion = "v1"

// Document is one searchable item: an upstream tool, a local tool or a skill.
type Document struct {
	// ID is "server/name" for tools and "skills/name" for skills.
	ID          string
	Kind        string // "tool" or "skill"
	Server      string
	Name        string
	Description string
	// InputSchema is the tool's raw JSON Schema for its arguments.
	InputSchema json.RawMessage
	// ContentHash changes whenever anything above changes.
	ContentHash string
}

// IndexRequest applies upserts and deletes by document ID.
type IndexRequest struct {
	Upserts []Document
	Deletes []string
	// Reset drops everything indexed before applying Upserts.
	Reset bool
}

// IndexResponse reports the index size afterwards.
type IndexResponse struct {
	Documents   int64
	Diagnostics pluginapi.Diagnostics
}

// SearchRequest asks for the best documents for a query.
type SearchRequest struct {
	Query string
	Limit int
	// Servers restricts hits to these servers when not empty.
	Servers []string
	// Kinds restricts hits to these kinds ("tool", "skill") when not empty.
	Kinds []string
}

// Hit is one ranked document.
type Hit struct {
	ID    string
	Score float64
}

// SearchResponse holds hits, best first.
type SearchResponse struct {
	Hits        []Hit
	Diagnostics pluginapi.Diagnostics
}

// Selector is implemented by selector plugins and, on the host side, by the
// gRPC client that talks to one.
type Selector interface {
	pluginapi.Base
	Index(ctx context.Context, req IndexRequest) (IndexResponse, error)
	Search(ctx context.Context, req SearchRequest) (SearchResponse, error)
}
