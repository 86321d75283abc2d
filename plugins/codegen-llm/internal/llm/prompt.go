package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cexec/cexec/pluginapi/codegen"
)

// systemPrompt teaches the program contract. It is sent with every request,
// so every word costs: about 200 tokens (TestPromptBudget measures it).
const systemPrompt = `You write one Python 3 program that does the user's task. It runs unattended in a sandbox whose working directory is /workspace (the user's files); there is no network and nobody to ask.

Rules:
- Reach tools only through their stubs: ` + "`from servers.<server> import <function>`" + `, called with keyword arguments as the signature shows. A tool returns parsed JSON (dict or list) or text; a failed call raises cexec.ToolError.
- Listed skills import the same way: ` + "`from skills.<skill> import ...`" + `.
- Keep intermediate data inside the program. Print only what answers the task, briefly and readably.
- Optionally ` + "`import cexec`" + ` and call ` + "`cexec.result(obj)`" + ` with the answer as a JSON-serializable value.
- Use the standard library besides the tools. Never call input().
- If the listed tools cannot do the task, print why.

Reply with the complete program in one ` + "```python" + ` block and nothing else.`

// Caps that keep one prompt bounded whatever the pipeline sends.
const (
	maxListing       = 200
	maxPreviousCode  = 20000
	maxPreviousError = 4000
	maxSkillSource   = 4000
)

// buildPrompt writes the user message: the task, the selected tools' stubs
// (signatures and docstrings only; bodies are noise to the model), matching
// skills, the workspace listing and, on repair, the failed attempt.
func buildPrompt(req codegen.GenerateRequest) string {
	var b strings.Builder
	b.WriteString("Task:\n")
	b.WriteString(strings.TrimSpace(req.Task))
	b.WriteString("\n")

	if len(req.Tools) > 0 {
		b.WriteString("\nTools:\n")
		for _, t := range req.Tools {
			module := t.Module
			if module == "" {
				module = "servers." + t.Server
			}
			function := t.Function
			if function == "" {
				function = t.Name
			}
			fmt.Fprintf(&b, "\nfrom %s import %s\n", module, function)
			src := compactStub(t.StubSource)
			if strings.TrimSpace(src) == "" {
				src = schemaStub(t, function)
			}
			b.WriteString(fence("python", src))
		}
	}

	if len(req.Skills) > 0 {
		b.WriteString("\nSkills:\n")
		for _, s := range req.Skills {
			fmt.Fprintf(&b, "\nskills.%s", s.Name)
			if d := strings.TrimSpace(s.Description); d != "" {
				b.WriteString(": " + d)
			}
			b.WriteString("\n")
			if src := strings.TrimSpace(compactStub(s.Source)); src != "" {
				b.WriteString(fence("python", capHead(src, maxSkillSource)))
			}
		}
	}

	if len(req.WorkspaceListing) > 0 {
		fmt.Fprintf(&b, "\nFiles in /workspace (%d):\n", len(req.WorkspaceListing))
		for i, p := range req.WorkspaceListing {
			if i == maxListing {
				fmt.Fprintf(&b, "... and %d more\n", len(req.WorkspaceListing)-maxListing)
				break
			}
			b.WriteString(p + "\n")
		}
	} else {
		b.WriteString("\n/workspace is empty.\n")
	}

	if p := req.Previous; p != nil {
		b.WriteString("\nYour previous program failed:\n")
		b.WriteString(fence("python", capHead(p.Code, maxPreviousCode)))
		b.WriteString("Error:\n")
		b.WriteString(fence("", capTail(p.Error, maxPreviousError)))
		b.WriteString("Write the corrected complete program.\n")
	}
	return b.String()
}

// fixPrompt asks for a corrected reply after one that held no usable code.
func fixPrompt(problem string) string {
	return "Your reply cannot be run:\n" + fence("", capTail(problem, maxPreviousError)) +
		"Reply with the corrected complete program in one ```python block and nothing else."
}

// fence wraps body in a code fence longer than any backtick run inside it.
func fence(lang, body string) string {
	n, run := 3, 0
	for _, r := range body {
		if r == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	return f + lang + "\n" + strings.TrimRight(body, "\n") + "\n" + f + "\n"
}

// capHead keeps the first n bytes of s, cut at a line end.
func capHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return cut + "\n# ... (truncated)"
}

// capTail keeps the last n bytes of s: the end of a traceback says most.
func capTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[len(s)-n:]
	if i := strings.IndexByte(cut, '\n'); i >= 0 && i < len(cut)-1 {
		cut = cut[i+1:]
	}
	return "... (truncated)\n" + cut
}

// schemaStub describes a tool that came without stub source: a signature
// the model can call and the input schema.
func schemaStub(t codegen.Tool, function string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "def %s(**arguments) -> Any:\n", function)
	if d := strings.TrimSpace(t.Description); d != "" {
		fmt.Fprintf(&b, "    %q\n", d)
	}
	if len(t.InputSchema) > 0 {
		var compact bytes.Buffer
		if err := json.Compact(&compact, t.InputSchema); err == nil {
			fmt.Fprintf(&b, "    # arguments follow this JSON schema: %s\n", compact.String())
		}
	}
	b.WriteString("    ...\n")
	return b.String()
}

// compactStub drops what the model does not need from a stub module: the
// generated-code banner, typing and runtime imports, __all__, and the
// bodies of top-level functions after their docstrings. TypedDicts and
// aliases stay: they are the argument and result types. Source it cannot
// follow is returned unchanged rather than mangled.
func compactStub(src string) string {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "# Code generated"),
			strings.HasPrefix(l, "from typing import"),
			strings.HasPrefix(l, "import typing"),
			strings.HasPrefix(l, "from __future__ import"),
			strings.HasPrefix(l, "from cexec import"),
			strings.HasPrefix(l, "__all__"):
			// Skip the whole statement, also when it wraps.
			for depth := bracketDelta(l); depth > 0 && i+1 < len(lines); depth += bracketDelta(lines[i]) {
				i++
			}
			continue
		case strings.HasPrefix(l, "def ") || strings.HasPrefix(l, "async def "):
			end, doc, ok := functionHead(lines, i)
			if !ok {
				return src
			}
			out = append(out, lines[i:end]...)
			if !doc {
				out = append(out, "    ...")
			}
			// Skip the body: every following line that is indented or blank,
			// up to the next top-level statement.
			j := end
			for j < len(lines) && (lines[j] == "" || lines[j][0] == ' ' || lines[j][0] == '\t') {
				j++
			}
			if j < len(lines) {
				out = append(out, "")
			}
			i = j - 1
			continue
		}
		out = append(out, l)
	}
	return strings.TrimSpace(collapseBlank(strings.Join(out, "\n"))) + "\n"
}

// functionHead returns the index just past the signature and docstring of
// the function defined at lines[i], and whether it has a docstring.
func functionHead(lines []string, i int) (end int, doc, ok bool) {
	depth, j := 0, i
	for ; j < len(lines) && j < i+400; j++ {
		depth += bracketDelta(lines[j])
		if depth == 0 && strings.HasSuffix(strings.TrimSpace(stripComment(lines[j])), ":") {
			break
		}
	}
	if j >= len(lines) || j == i+400 {
		return 0, false, false
	}
	sigEnd := j + 1
	for j = sigEnd; j < len(lines) && strings.TrimSpace(lines[j]) == ""; j++ {
	}
	if j >= len(lines) {
		return sigEnd, false, true
	}
	first := strings.TrimLeft(strings.TrimSpace(lines[j]), "rRbBuU")
	var q string
	switch {
	case strings.HasPrefix(first, `"""`):
		q = `"""`
	case strings.HasPrefix(first, `'''`):
		q = `'''`
	default:
		return sigEnd, false, true
	}
	if strings.Count(first, q) >= 2 {
		return j + 1, true, true
	}
	for k := j + 1; k < len(lines); k++ {
		if strings.Contains(lines[k], q) {
			return k + 1, true, true
		}
	}
	return 0, false, false
}

// scanCode calls visit for each byte of a line of Python outside string
// literals, up to a comment, and returns where the comment starts (len(l)
// when there is none).
func scanCode(l string, visit func(c byte)) int {
	inStr := byte(0)
	for p := 0; p < len(l); p++ {
		c := l[p]
		switch {
		case inStr != 0:
			if c == '\\' {
				p++
			} else if c == inStr {
				inStr = 0
			}
		case c == '"' || c == '\'':
			inStr = c
		case c == '#':
			return p
		case visit != nil:
			visit(c)
		}
	}
	return len(l)
}

// bracketDelta is how many brackets a line of Python opens minus how many
// it closes, outside string literals and comments.
func bracketDelta(l string) int {
	d := 0
	scanCode(l, func(c byte) {
		switch c {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
		}
	})
	return d
}

// stripComment removes a trailing comment that is outside string literals.
func stripComment(l string) string {
	return l[:scanCode(l, nil)]
}

// collapseBlank turns runs of blank lines into one.
func collapseBlank(s string) string {
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return s
}

// approxTokens estimates a text's token count the way providers' rules of
// thumb do (about four bytes of English or code per token); the figure is
// for logs, not for billing.
func approxTokens(s string) int {
	return (len(s) + 3) / 4
}
