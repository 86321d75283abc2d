package dsl

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

var isoDurationRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// errTooLong says a duration does not fit a time.Duration; converted, it
// would wrap round and end a wait or a timeout at once.
var errTooLong = fmt.Errorf("is longer than cexec can wait (%.0f years)", time.Duration(math.MaxInt64).Hours()/24/365)

// ParseDuration reads an ISO 8601 duration of days, hours, minutes and
// seconds (PT1M30S, P2D). Years, months and weeks have no fixed length and
// are refused.
func ParseDuration(s string) (time.Duration, error) {
	m := isoDurationRE.FindStringSubmatch(s)
	if m == nil || s == "P" || s == "PT" || s[len(s)-1] == 'T' {
		return 0, fmt.Errorf("duration %q is not ISO 8601 days to seconds (PT1M30S, P2D; no years, months or weeks) nor inline (seconds: 90)", s)
	}
	var secs float64
	for i, unit := range []float64{86400, 3600, 60, 1} {
		if m[i+1] == "" {
			continue
		}
		f, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		secs += f * unit
	}
	if secs*1e9 >= math.MaxInt64 {
		return 0, fmt.Errorf("duration %q %w", s, errTooLong)
	}
	return time.Duration(secs * 1e9), nil
}

// InlineDuration sums an inline duration's fields.
func InlineDuration(days, hours, minutes, seconds, milliseconds int) (time.Duration, error) {
	ms := float64(days)*86400e3 + float64(hours)*3600e3 + float64(minutes)*60e3 + float64(seconds)*1e3 + float64(milliseconds)
	if ms*1e6 >= math.MaxInt64 {
		return 0, fmt.Errorf("duration %w", errTooLong)
	}
	return time.Duration(ms * 1e6), nil
}

// inlineUnits are the fields of an inline duration.
var inlineUnits = []string{"days", "hours", "minutes", "seconds", "milliseconds"}

// duration checks a duration node (ISO 8601 or inline) where the document
// gives one; what names it in the message.
func (c *checker) duration(what string, n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		// The SDK takes a duration's string for ISO 8601 and refuses an
		// expression there (once per path it validates the task by), and
		// the engine has nothing to evaluate one with: one clear line.
		if IsExpr(n.Value) {
			c.at(n, "%s: duration %q is an expression; cexec takes a duration as written: ISO 8601 (PT1M30S) or inline (seconds: 90)", what, n.Value)
			return
		}
		if _, err := ParseDuration(n.Value); err != nil {
			c.early(n, "%s: %v", what, err)
		}
	case yaml.MappingNode:
		var f [5]int
		for _, p := range pairs(n) {
			i := slices.Index(inlineUnits, p[0].Value)
			if i < 0 {
				continue // the SDK names unknown fields
			}
			v, err := strconv.Atoi(p[1].Value)
			if p[1].Kind != yaml.ScalarNode || err != nil || v < 0 {
				c.early(p[1], "%s: %s must be a whole number of at least 0", what, p[0].Value)
				return
			}
			f[i] = v
		}
		if _, err := InlineDuration(f[0], f[1], f[2], f[3], f[4]); err != nil {
			c.early(n, "%s: %v", what, err)
		}
	}
}
