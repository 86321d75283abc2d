package mcpface

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
)

// unservedRevision refuses a request that declares, in its _meta, a
// revision the face does not serve (2026-07-28: see protocolVersions),
// with the error that lists the ones it does, so that the client falls
// back to initialize. mcp-go checks a request's revision against each
// transport's list for streamable HTTP only; over SSE it takes any it
// implements, and a client's server/discover probe would settle on one
// without sessions.
func unservedRevision(body []byte) *mcp.JSONRPCError {
	if !bytes.Contains(body, []byte(mcp.MetaKeyProtocolVersion)) {
		return nil
	}
	var req struct {
		ID     *mcp.RequestId `json:"id"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || req.ID == nil {
		return nil
	}
	v := req.Params.Meta.ProtocolVersion()
	if !mcp.IsModernProtocol(v) || slices.Contains(protocolVersions, v) {
		return nil
	}
	reply := mcp.UnsupportedProtocolVersionError{Version: v, Supported: protocolVersions}.JSONRPCError()
	reply.ID = *req.ID
	return &reply
}
