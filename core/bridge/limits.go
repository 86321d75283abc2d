package bridge

import (
	"bytes"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/pluginapi/sandbox"
)

// Default caps of one tool call: large enough for documents and batches,
// small enough that one program cannot crash a shared upstream or the
// daemon with a single call.
const (
	DefaultMaxArgument = 1 << 20
	DefaultMaxResult   = 16 << 20
)

// CallLimits cap the size of one tool call. Zero fields take the
// defaults (Limits.Default, then DefaultMax*).
type CallLimits struct {
	// MaxArgument bounds the arguments' JSON, in bytes.
	MaxArgument int64
	// MaxResult bounds the result the upstream returned, in bytes.
	MaxResult int64
}

// Limits are the bridge's caps: Default for every server, Servers for
// per-server overrides (an mcp_server's own max_argument_size and
// max_result_size).
type Limits struct {
	Default CallLimits
	Servers map[string]CallLimits
}

// forServer is the caps that apply to server's calls.
func (l Limits) forServer(server string) CallLimits {
	c := l.Servers[server]
	if c.MaxArgument <= 0 {
		c.MaxArgument = l.Default.MaxArgument
	}
	if c.MaxArgument <= 0 {
		c.MaxArgument = DefaultMaxArgument
	}
	if c.MaxResult <= 0 {
		c.MaxResult = l.Default.MaxResult
	}
	if c.MaxResult <= 0 {
		c.MaxResult = DefaultMaxResult
	}
	return c
}

// checkArgument refuses arguments over the cap before anything (guards,
// validation, the upstream) reads them.
func (b *Bridge) checkArgument(id, server string, size int) error {
	if limit := b.limits.forServer(server).MaxArgument; int64(size) > limit {
		return &sandbox.CallError{Type: TypeArgumentTooLarge, Message: fmt.Sprintf(
			"%s was not called: its arguments are %s, over the limit of %s per call (max_argument_size); send less data per call, for example in several smaller calls",
			id, formatSize(int64(size)), formatSize(limit))}
	}
	return nil
}

// checkResult fails a call whose result is over the cap, before it is
// decoded or copied, so that the oversized result is dropped at once.
func (b *Bridge) checkResult(id, server string, res *mcp.CallToolResult) error {
	limit := b.limits.forServer(server).MaxResult
	if size := resultSize(res); size > limit {
		return &sandbox.CallError{Type: TypeResultTooLarge, Message: fmt.Sprintf(
			"%s returned %s, over the limit of %s per call (max_result_size); ask for less per call, for example with a narrower query or paging",
			id, formatSize(size), formatSize(limit))}
	}
	return nil
}

// resultSize is about the size of res as the program would get it (see
// decodeResult): its structured content, else its texts and binary data.
func resultSize(res *mcp.CallToolResult) int64 {
	if sc := bytes.TrimSpace(res.RawStructuredContent); len(sc) > 0 && !bytes.Equal(sc, []byte("null")) {
		return int64(len(sc))
	}
	var n int64
	for _, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			n += int64(len(c.Text))
		case mcp.ImageContent:
			n += int64(len(c.Data))
		case mcp.AudioContent:
			n += int64(len(c.Data))
		case mcp.EmbeddedResource:
			switch r := c.Resource.(type) {
			case mcp.TextResourceContents:
				n += int64(len(r.Text))
			case mcp.BlobResourceContents:
				n += int64(len(r.Blob))
			}
		}
	}
	return n
}

// formatSize writes a byte count as the config writes sizes.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
