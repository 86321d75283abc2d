package catalog

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestCheckDiscover(t *testing.T) {
	for _, tt := range []struct {
		method, result string
		wantErr        bool
	}{
		{"server/discover", `{}`, true},
		{"server/discover", `{"supportedVersions":[]}`, true},
		{"server/discover", `{"supportedVersions":["2026-07-28"],"capabilities":{}}`, false},
		{"tools/list", `{}`, false},
	} {
		resp := &transport.JSONRPCResponse{Result: json.RawMessage(tt.result)}
		checkDiscover(transport.JSONRPCRequest{Method: tt.method}, resp)
		if got := resp.Error != nil; got != tt.wantErr {
			t.Errorf("%s %s: error %v, want %v", tt.method, tt.result, resp.Error, tt.wantErr)
		}
		if tt.wantErr && resp.Error.Code != mcp.METHOD_NOT_FOUND {
			t.Errorf("%s %s: code %d, want method not found", tt.method, tt.result, resp.Error.Code)
		}
	}
}
