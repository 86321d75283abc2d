package exec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// prompter asks the operator the daemon's questions (an upstream server's
// elicitation, a call waiting for approval) on a terminal: it prints the
// question and reads the answers line by line. One question at a time.
type prompter struct {
	mu    sync.Mutex
	lines chan string
	out   io.Writer
}

// newPrompter reads answers from in and writes questions to out.
func newPrompter(in io.Reader, out io.Writer) *prompter {
	p := &prompter{lines: make(chan string), out: out}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

var errNoAnswer = errors.New("no more input to answer with")

func (p *prompter) line(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(p.out, prompt)
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", errNoAnswer
		}
		return strings.TrimSpace(l), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// question is the part of MCP elicitation params the prompt shows.
type question struct {
	Message         string `json:"message"`
	Mode            string `json:"mode"`
	URL             string `json:"url"`
	RequestedSchema struct {
		Properties map[string]field `json:"properties"`
		Required   []string         `json:"required"`
	} `json:"requestedSchema"`
}

type field struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Enum        []any           `json:"enum"`
	Default     json.RawMessage `json:"default"`
}

// ask is the client.AskFunc of a terminal.
func (p *prompter) ask(ctx context.Context, paramsJSON string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var q question
	if err := json.Unmarshal([]byte(paramsJSON), &q); err != nil {
		return "", fmt.Errorf("read the daemon's question: %w", err)
	}
	fmt.Fprintf(p.out, "\ncexec asks: %s\n", q.Message)
	if q.Mode == "url" {
		fmt.Fprintf(p.out, "  open: %s\n", q.URL)
	}
	for {
		l, err := p.line(ctx, "answer? [a]ccept, [d]ecline or [c]ancel: ")
		if err != nil {
			return "", err
		}
		switch strings.ToLower(l) {
		case "a", "accept", "y", "yes":
			if q.Mode == "url" {
				return `{"action":"accept"}`, nil
			}
			content, err := p.form(ctx, q)
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(map[string]any{"action": "accept", "content": content})
			return string(b), err
		case "d", "decline", "n", "no":
			return `{"action":"decline"}`, nil
		case "c", "cancel":
			return `{"action":"cancel"}`, nil
		}
	}
}

// form asks for each field of the schema, required ones first.
func (p *prompter) form(ctx context.Context, q question) (map[string]any, error) {
	names := make([]string, 0, len(q.RequestedSchema.Properties))
	for n := range q.RequestedSchema.Properties {
		names = append(names, n)
	}
	required := func(n string) bool { return slices.Contains(q.RequestedSchema.Required, n) }
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := required(a), required(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	content := map[string]any{}
	for _, n := range names {
		f := q.RequestedSchema.Properties[n]
		label := n
		if f.Title != "" {
			label = f.Title
		}
		hint := f.Type
		if len(f.Enum) > 0 {
			hint = "one of " + fmt.Sprint(f.Enum...)
		}
		if f.Description != "" {
			fmt.Fprintf(p.out, "  %s: %s\n", label, f.Description)
		}
		suffix := ""
		switch {
		case required(n):
			suffix = ", required"
		case len(f.Default) > 0:
			suffix = ", default " + string(f.Default)
		default:
			suffix = ", empty to skip"
		}
		for {
			l, err := p.line(ctx, fmt.Sprintf("  %s (%s%s): ", label, hint, suffix))
			if err != nil {
				return nil, err
			}
			if l == "" {
				if required(n) {
					continue
				}
				if len(f.Default) > 0 {
					var v any
					if json.Unmarshal(f.Default, &v) == nil {
						content[n] = v
					}
				}
				break
			}
			v, err := parseValue(f, l)
			if err != nil {
				fmt.Fprintf(p.out, "  %v\n", err)
				continue
			}
			content[n] = v
			break
		}
	}
	return content, nil
}

// parseValue reads one answer as the field's type.
func parseValue(f field, s string) (any, error) {
	var v any
	switch f.Type {
	case "boolean":
		switch strings.ToLower(s) {
		case "y", "yes", "true", "1":
			v = true
		case "n", "no", "false", "0":
			v = false
		default:
			return nil, errors.New("answer yes or no")
		}
	case "integer":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, errors.New("answer a whole number")
		}
		v = n
	case "number":
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errors.New("answer a number")
		}
		v = n
	default:
		v = s
	}
	if len(f.Enum) > 0 && !slices.ContainsFunc(f.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return nil, fmt.Errorf("answer one of %v", f.Enum)
	}
	return v, nil
}
