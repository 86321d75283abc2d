package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/pipeline"
)

// faceAsker is the MCP face's Asker as the pipeline wants it: the agent's
// client on its own session, for upstream elicitations and approvals.
type faceAsker struct{ a *mcpface.Asker }

func (f faceAsker) Elicit(ctx context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	res, err := f.a.Elicit(ctx, p)
	if errors.Is(err, mcpface.ErrCannotElicit) {
		return nil, fmt.Errorf("%w: %w", pipeline.ErrCannotAsk, err)
	}
	return res, err
}

func (f faceAsker) CanAsk(mode string) bool { return f.a.CanElicit(mode) }

func (f faceAsker) ElicitationComplete(ctx context.Context, id string) error {
	return f.a.ElicitationComplete(ctx, id)
}

// askerOf is the asker of the MCP tool call ctx belongs to (nil: none).
func askerOf(ctx context.Context) pipeline.Asker {
	a := mcpface.AskerFrom(ctx)
	if a == nil {
		return nil
	}
	return faceAsker{a}
}
