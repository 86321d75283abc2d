package workflow

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/serverlessworkflow/sdk-go/v3/model"

	"github.com/cexec/cexec/core/workflow/dsl"
)

var isoRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// duration reads a DSL duration: inline (days … milliseconds) or ISO 8601
// (PT1M30S).
func duration(d *dsl.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	switch v := d.Value.(type) {
	case model.DurationInline:
		return time.Duration(v.Days)*24*time.Hour + time.Duration(v.Hours)*time.Hour +
			time.Duration(v.Minutes)*time.Minute + time.Duration(v.Seconds)*time.Second +
			time.Duration(v.Milliseconds)*time.Millisecond, nil
	}
	s := d.AsExpression()
	m := isoRE.FindStringSubmatch(s)
	if m == nil || s == "P" || s == "PT" {
		return 0, errorf(ErrConfiguration, 400, "duration %q is not ISO 8601 (PT1M30S) nor inline (seconds: 90)", s)
	}
	var out time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		f, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		out += time.Duration(f * float64(unit))
	}
	return out, nil
}
