package daemon

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/forms"
	"github.com/cexec/cexec/core/workspace"
)

// builtinServers are the servers built into cexecd, which an mcp_server
// block with transport = "builtin" enables; each tenant's instance works on
// that tenant's workspace only.
func builtinServers(ws *workspace.Manager) map[string]catalog.Builtin {
	return map[string]catalog.Builtin{
		forms.Name: func(tenant string) (*server.MCPServer, error) {
			return forms.NewServer(func() (forms.Workspace, error) {
				t, err := ws.Tenant(tenant)
				if err != nil {
					return forms.Workspace{}, err
				}
				w := forms.Workspace{Dir: t.WorkspaceDir(), UID: -1, GID: -1}
				if o := t.Owner(); o != nil {
					w.UID, w.GID = o.UID, o.GID
				}
				return w, nil
			}), nil
		},
	}
}
