package daemon

import (
	"github.com/cexec/cexec/core/mcpface"
	"github.com/cexec/cexec/core/pipeline"
)

// progressTo adapts the face's progress sink to the pipeline's reports; nil
// when the agent asked for no progress.
func progressTo(fn func(mcpface.Progress)) func(pipeline.Progress) {
	if fn == nil {
		return nil
	}
	return func(p pipeline.Progress) {
		fn(mcpface.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
	}
}
