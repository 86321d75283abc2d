package pipeline

import (
	"slices"
	"time"
)

// restore puts the real values back into everything the result shows an
// operator: the executions and the generators only saw tokens.
func (r *taskRun) restore() {
	start := time.Now()
	defer func() { r.res.Timings.Guard += time.Since(start) }()
	un := func(s *string) {
		if u, err := r.gs.Untokenize(*s); err == nil {
			*s = u
		}
	}
	un(&r.res.Code)
	for i := range r.res.Attempts {
		un(&r.res.Attempts[i].Code)
		un(&r.res.Attempts[i].Error)
	}
	for i := range r.res.Diagnostics {
		un(&r.res.Diagnostics[i].Detail)
	}
	out := r.res.Exec
	if out == nil || !out.Tokenized {
		return
	}
	for _, b := range []*[]byte{&out.Stdout, &out.Stderr} {
		s := string(*b)
		un(&s)
		*b = []byte(s)
	}
	if e := out.Error; e != nil {
		restored := *e
		un(&restored.Type)
		un(&restored.Message)
		un(&restored.Traceback)
		out.Error = &restored
	}
	if len(out.Result) > 0 {
		if u, err := r.gs.UntokenizeJSON(out.Result); err == nil {
			out.Result = u
		}
	}
	// tokenizeTexts tokenized the names of servers and tools too.
	calls := slices.Clone(out.ToolCalls)
	for i := range calls {
		un(&calls[i].Server)
		un(&calls[i].Tool)
		un(&calls[i].Error)
	}
	out.ToolCalls = calls
	tools := slices.Clone(out.Summary.Tools)
	for i := range tools {
		un(&tools[i].Server)
		un(&tools[i].Tool)
		un(&tools[i].LastError)
	}
	out.Summary.Tools = tools
	out.Tokenized = false
}
