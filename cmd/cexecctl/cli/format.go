package cli

import (
	"strings"
	"time"
	"unicode/utf8"
)

// UnixMs renders a time in Unix milliseconds as local RFC 3339 to the
// second, or "-" for zero (never).
func UnixMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}

// FirstLine is s's first line, at most n runes: a longer one ends in "…".
func FirstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
