package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// FormatDiagnostics writes one entry per diagnostic, starting with
// "file:line:column: error: summary", then the detail and the offending
// source line. files supplies the sources (Config.Files); a file it lacks
// is read from disk. Entries are sorted by position.
func FormatDiagnostics(w io.Writer, diags hcl.Diagnostics, files map[string]*hcl.File) error {
	sorted := append(hcl.Diagnostics(nil), diags...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].Subject, sorted[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		default:
			return a.Start.Column < b.Start.Column
		}
	})
	sources := map[string][]byte{}
	for name, f := range files {
		if f != nil {
			sources[name] = f.Bytes
		}
	}
	var buf bytes.Buffer
	for _, d := range sorted {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject == nil {
			fmt.Fprintf(&buf, "%s: %s\n", sev, d.Summary)
		} else {
			fmt.Fprintf(&buf, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
		}
		if d.Detail != "" {
			for _, line := range strings.Split(d.Detail, "\n") {
				fmt.Fprintf(&buf, "    %s\n", line)
			}
		}
		if d.Subject != nil {
			if line, ok := sourceLine(sources, d.Subject); ok {
				fmt.Fprintf(&buf, "    %4d | %s\n", d.Subject.Start.Line, line)
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// sourceLine returns the first line of rng's source, reading the file from
// disk when sources does not have it.
func sourceLine(sources map[string][]byte, rng *hcl.Range) (string, bool) {
	src, ok := sources[rng.Filename]
	if !ok {
		b, err := os.ReadFile(rng.Filename)
		if err != nil {
			b = nil
		}
		sources[rng.Filename] = b
		src = b
	}
	if src == nil || rng.Start.Line < 1 {
		return "", false
	}
	lines := bytes.Split(src, []byte("\n"))
	if rng.Start.Line > len(lines) {
		return "", false
	}
	return strings.TrimRight(string(lines[rng.Start.Line-1]), "\r"), true
}
