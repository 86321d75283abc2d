package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cexec/cexec/core/control"
	"github.com/cexec/cexec/core/pipeline"
)

// operatorAsker is the operator at a `cexecctl exec` terminal as the
// pipeline's Asker: elicitations and approvals go to the terminal.
type operatorAsker struct{ op control.Operator }

func (o operatorAsker) Elicit(ctx context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	params, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode question: %w", err)
	}
	raw, err := o.op.Ask(ctx, params)
	if errors.Is(err, control.ErrOperatorGone) {
		return nil, fmt.Errorf("%w: %w", pipeline.ErrCannotAsk, err)
	}
	if err != nil {
		return nil, err
	}
	var res mcp.ElicitationResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the operator's answer is not an elicitation result: %w", err)
	}
	switch res.Action {
	case mcp.ElicitationResponseActionAccept, mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel:
		return &res, nil
	}
	return nil, fmt.Errorf("the operator's answer has action %q; want accept, decline or cancel", res.Action)
}

// CanAsk: the terminal puts forms and shows URLs (a sign-in link the
// operator opens on the cexecd host).
func (o operatorAsker) CanAsk(mode string) bool {
	return mode == "" || mode == mcp.ElicitationModeForm || mode == mcp.ElicitationModeURL
}

// operatorOf is the asker of the control API request ctx belongs to: the
// operator of an ExecInteractive stream, or nil.
func operatorOf(ctx context.Context) pipeline.Asker {
	op := control.OperatorFrom(ctx)
	if op == nil {
		return nil
	}
	return operatorAsker{op}
}
