package workflow

import (
	"time"

	"github.com/serverlessworkflow/sdk-go/v3/model"

	"github.com/cexec/cexec/core/workflow/dsl"
)

// duration reads a DSL duration: inline (days … milliseconds) or ISO 8601
// (PT1M30S); dsl checks both when a document loads.
func duration(d *dsl.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	var out time.Duration
	var err error
	switch v := d.Value.(type) {
	case model.DurationInline:
		out, err = dsl.InlineDuration(int(v.Days), int(v.Hours), int(v.Minutes), int(v.Seconds), int(v.Milliseconds))
	default:
		out, err = dsl.ParseDuration(d.AsExpression())
	}
	if err != nil {
		return 0, errorf(ErrConfiguration, 400, "%v", err)
	}
	return out, nil
}
