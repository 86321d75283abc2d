package daemon

import (
	"context"

	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/workspace"
)

// attachmentView serves a tenant's saved attachments to the MCP face: the
// tenant is the scope's, never one named in the URI.
type attachmentView struct{ ws *workspace.Manager }

// ReadAttachment reads path from sc's tenant's workspace.
func (v attachmentView) ReadAttachment(_ context.Context, sc mcpface.Scope, path string) ([]byte, error) {
	t, err := v.ws.Tenant(sc.Tenant)
	if err != nil {
		return nil, err
	}
	return t.ReadAttachment(path)
}
