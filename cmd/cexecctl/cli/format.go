package cli

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Bytes renders a size for people: 512 B, 1.5 KiB, 3.0 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

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
