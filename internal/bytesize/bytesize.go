// Package bytesize writes sizes for people, in the binary units cexec's
// configuration and limits use.
package bytesize

import "fmt"

// Format renders n bytes as 512 B, 1.5 KiB, 3.0 MiB, 2.0 GiB and so on.
func Format(n int64) string {
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
