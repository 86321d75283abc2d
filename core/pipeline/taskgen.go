package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

// generate runs the chain once, in config order, and returns the first
// program that is not one that already failed, with its attempt (nil when
// no generator wrote one).
func (r *taskRun) generate(ctx context.Context, round int, prev *codegen.Attempt, failed map[string]bool) (string, *Attempt) {
	base := codegen.GenerateRequest{
		Task:             r.task,
		Skills:           r.skills,
		Language:         "python",
		Previous:         prev,
		WorkspaceListing: r.listing,
	}
	for _, name := range r.p.Config.Codegen {
		if ctx.Err() != nil {
			return "", nil
		}
		gen, err := r.p.Plugins.Codegen(name)
		if err != nil {
			r.attempt(&Attempt{Generator: name, Round: round, Error: err.Error()})
			continue
		}
		att, answered := r.call(ctx, name, gen, base, round, false)
		if answered && att.Code == "" && r.p.modelFree(name, att) {
			if fb := r.fallbackScope(); len(fb) > len(r.selected) {
				att, _ = r.call(ctx, name, gen, base, round, true)
			}
		}
		if att.Code == "" {
			continue
		}
		if failed[att.Code] {
			att.Error = "wrote the program that already failed"
			continue
		}
		return att.Code, att
	}
	return "", nil
}

// call asks one generator for a program within its deadline and records
// the attempt. answered is false when the call itself failed.
func (r *taskRun) call(ctx context.Context, name string, gen codegen.Codegen, req codegen.GenerateRequest, round int, fallback bool) (att *Attempt, answered bool) {
	req.Tools = r.selected
	if fallback {
		req.Tools = r.fallback
	}
	if r.gs != nil {
		tokenized, err := r.tokenizeRequest(ctx, req)
		if err != nil {
			// Fail closed: a request that could not be checked for
			// sensitive data does not reach the generator.
			att = r.attempt(&Attempt{Generator: name, Round: round, Fallback: fallback, Tools: len(req.Tools),
				Error: fmt.Sprintf("not asked: the request could not be checked for sensitive data: %v", err)})
			return att, false
		}
		req = tokenized
	}
	timeout := r.p.Config.GenerateTimeouts[name]
	if timeout <= 0 {
		timeout = DefaultGenerateTimeout
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	resp, err := gen.Generate(gctx, req)
	elapsed := time.Since(start)
	cancel()
	r.res.Timings.Generate += elapsed
	att = r.attempt(&Attempt{Generator: name, Round: round, Fallback: fallback, Tools: len(req.Tools), Duration: elapsed})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s (the plugin's timeout): %w", timeout, err)
		}
		att.Error = fmt.Sprintf("generate: %v", err)
		r.log.Warn("generator failed; trying the next", "generator", name, "error", err)
		return att, false
	}
	att.Model, att.Usage, att.Diagnostics, att.Code = resp.Model, resp.Usage, resp.Diagnostics, resp.Code
	if resp.Usage != (codegen.Usage{}) {
		r.p.usesModel.Store(name, true)
	}
	r.res.Usage.PromptTokens += resp.Usage.PromptTokens
	r.res.Usage.CompletionTokens += resp.Usage.CompletionTokens
	if resp.Code == "" {
		att.Error = noCodeReason(resp.Diagnostics)
	}
	return att, true
}

// modelFree says whether a generator that wrote no code is model-free, and
// so may be asked again with the fallback scope: it spent no tokens, named no
// model (an LLM generator names its model even when its request failed;
// the rules generator names a rule only when one wrote code) and has never
// reported token usage.
func (p *Tasks) modelFree(name string, a *Attempt) bool {
	if a.Usage != (codegen.Usage{}) || a.Model != "" {
		return false
	}
	_, uses := p.usesModel.Load(name)
	return !uses
}

// attempt records a; later outcomes (the program's failure) land on it.
func (r *taskRun) attempt(a *Attempt) *Attempt {
	r.attempts = append(r.attempts, a)
	return a
}

// noCode explains, per generator, why the chain wrote no program.
func (r *taskRun) noCode() pluginapi.Diagnostics {
	if len(r.p.Config.Codegen) == 0 {
		return pluginapi.Diagnostics{pluginapi.Errorf("", "no code generator is configured",
			"add a plugin \"codegen\" block (rules works offline) and name it in pipeline.codegen")}
	}
	var out pluginapi.Diagnostics
	for _, a := range r.attempts {
		if a.Error != "" && !(a.Code == "" && !a.Fallback && r.retriedFallback(a)) {
			out = append(out, pluginapi.Errorf("", "codegen "+a.Generator, a.Error))
		}
	}
	return out
}

// retriedFallback reports whether a's generator was asked again, with the fallback scope, in the
// same round: only that answer then explains the outcome.
func (r *taskRun) retriedFallback(a *Attempt) bool {
	for _, b := range r.attempts {
		if b.Fallback && b.Generator == a.Generator && b.Round == a.Round {
			return true
		}
	}
	return false
}

func noCodeReason(d pluginapi.Diagnostics) string {
	if msg := d.Error(); msg != "" {
		return "wrote no program: " + msg
	}
	return "wrote no program"
}

// listWorkspace lists up to max paths under dir, relative to it,
// directories with a trailing slash, in lexical order. Symlinks are listed,
// not followed: sandboxed code may have planted them.
func listWorkspace(dir string, max int) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		if len(out) >= max {
			return fs.SkipAll
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	return out
}
