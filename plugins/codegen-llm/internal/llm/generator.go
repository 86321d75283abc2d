// Package llm is the codegen-llm plugin: its Generator writes programs with
// a language model from one of several providers (the OpenAI protocol
// through go-openai, the others through langchaingo), retries what is worth
// retrying and hands back only programs that compile.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/internal/ctxsleep"
	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

// Generator writes programs with a language model. Everything it holds
// comes from the last successful Configure.
type Generator struct {
	log hclog.Logger
	// sleep waits between retries; nil means a real timer. Tests replace it
	// to see the delays without waiting them out.
	sleep func(ctx context.Context, d time.Duration) error

	mu sync.RWMutex
	st *state
}

// New returns a generator that has no configuration yet; Configure gives
// it one.
func New(log hclog.Logger) *Generator {
	return &Generator{log: log}
}

// state is one configuration in use.
type state struct {
	cfg    *config
	chat   chatter
	quirks *quirkBook
	redact *strings.Replacer
}

func (g *Generator) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "llm",
		Kind:         pluginapi.KindCodegen,
		Version:      version.Version,
		APIVersions:  []string{codegen.APIVersion},
		ConfigSchema: schema,
	}, nil
}

// Configure validates the block and builds the provider's client. It makes
// no network calls, so a daemon starts offline and a wrong key shows up on
// the first task, as a diagnostic naming the provider's complaint.
func (g *Generator) Configure(ctx context.Context, raw json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindCodegen, []string{codegen.APIVersion}, apiVersion); diags.HasErrors() {
		return diags, nil
	}
	cfg, diags := parseConfig(ctx, raw)
	if cfg == nil {
		return diags, nil
	}
	chat, err := newChatter(ctx, cfg)
	if err != nil {
		red := newRedactor(cfg.secrets())
		return append(diags, pluginapi.Errorf("provider", "cannot set up provider "+cfg.Provider, red.Replace(err.Error()))), nil
	}
	st := &state{cfg: cfg, chat: chat, quirks: &quirkBook{}, redact: newRedactor(cfg.secrets())}
	g.mu.Lock()
	old := g.st
	g.st = st
	g.mu.Unlock()
	if old != nil {
		if err := old.chat.close(); err != nil {
			g.log.Debug("closing the previous provider client failed", "error", old.redact.Replace(err.Error()))
		}
	}
	g.log.Info("configured", "provider", cfg.Provider, "model", cfg.Model,
		"base_url", st.redact.Replace(redactURL(cfg.BaseURL)), "stream", cfg.Stream, "reasoning", cfg.Reasoning,
		"max_tokens", cfg.maxTokens, "request_timeout", cfg.requestTimeout.String(), "max_retries", cfg.maxRetries)
	return diags, nil
}

// Generate asks the model for a program and returns it once it compiles.
// A reply with no code, or code that does not compile, gets compile_repairs
// more turns in the same conversation with Python's error; that is cheaper
// and surer than handing back code-less and letting the pipeline start
// over. Provider failures (after retries) come back as a code-less response
// with an error diagnostic, so the pipeline tries its next generator; only
// a cancelled call and an unusable plugin are errors.
func (g *Generator) Generate(ctx context.Context, req codegen.GenerateRequest) (codegen.GenerateResponse, error) {
	g.mu.RLock()
	st := g.st
	g.mu.RUnlock()
	if st == nil {
		return codegen.GenerateResponse{}, fmt.Errorf("generate: plugin not configured: %w", pluginapi.ErrUnavailable)
	}
	if req.Language != "" && req.Language != "python" {
		return codegen.GenerateResponse{Diagnostics: pluginapi.Diagnostics{
			pluginapi.Errorf("", "unsupported language "+req.Language, "the llm generator writes Python only")}}, nil
	}
	cfg := st.cfg
	system := systemPrompt
	if cfg.SystemPrompt != nil {
		system = *cfg.SystemPrompt
	}
	user := buildPrompt(req)
	msgs := []message{{role: "system", content: system}, {role: "user", content: user}}
	g.log.Debug("prompt built", "approx_tokens", approxTokens(system)+approxTokens(user),
		"tools", len(req.Tools), "skills", len(req.Skills), "files", len(req.WorkspaceListing), "repair", req.Previous != nil)

	resp := codegen.GenerateResponse{Model: cfg.Model}
	start := time.Now()
	for round := 0; ; round++ {
		r, err := g.complete(ctx, st, msgs)
		if err != nil {
			if ctx.Err() != nil {
				return codegen.GenerateResponse{}, fmt.Errorf("generate: %w", ctx.Err())
			}
			detail := st.redact.Replace(decodeHint(err))
			g.log.Warn("model request failed", "provider", cfg.Provider, "model", cfg.Model, "status", errStatus(err), "error", detail)
			resp.Diagnostics = append(resp.Diagnostics, pluginapi.Errorf("", cfg.Provider+" request failed", detail+statusHint(errStatus(err))))
			return resp, nil
		}
		resp.Usage.PromptTokens += r.promptTokens
		resp.Usage.CompletionTokens += r.completionTokens
		if r.model != "" {
			resp.Model = r.model
		}
		problem := ""
		code := extractCode(r.text)
		if code == "" {
			problem = "The reply holds no Python program."
			if r.truncated {
				problem = fmt.Sprintf("The reply stopped at the token limit (max_tokens = %d) before the program was complete.", cfg.maxTokens)
			}
		} else if err := checkCompiles(ctx, cfg.python, code); err != nil {
			var se *syntaxError
			if !errors.As(err, &se) {
				if ctx.Err() != nil {
					return codegen.GenerateResponse{}, fmt.Errorf("generate: %w", ctx.Err())
				}
				return codegen.GenerateResponse{}, fmt.Errorf("generate: %w: %w", err, pluginapi.ErrUnavailable)
			}
			problem = se.msg
			if r.truncated {
				problem += fmt.Sprintf("\n(The reply stopped at the token limit, max_tokens = %d.)", cfg.maxTokens)
			}
		} else {
			resp.Code = code
			g.log.Info("generated", "model", resp.Model, "prompt_tokens", resp.Usage.PromptTokens,
				"completion_tokens", resp.Usage.CompletionTokens, "rounds", round+1, "duration", time.Since(start).Round(time.Millisecond).String())
			return resp, nil
		}
		if round >= cfg.compileRepairs {
			g.log.Warn("no usable program", "model", resp.Model, "rounds", round+1, "problem", st.redact.Replace(lastLine(problem)))
			summary := "the model's program does not compile"
			if code == "" {
				summary = "the model's reply holds no program"
			}
			resp.Diagnostics = append(resp.Diagnostics, pluginapi.Errorf("", summary, st.redact.Replace(problem)))
			return resp, nil
		}
		g.log.Info("asking the model to fix its reply", "model", resp.Model, "problem", st.redact.Replace(lastLine(problem)))
		msgs = append(msgs, message{role: "assistant", content: r.text}, message{role: "user", content: fixPrompt(problem)})
	}
}

// complete sends msgs with retries, adapting the request once per refused
// parameter when the server says a parameter is not supported by the model
// (OpenAI-protocol providers) and remembering that for the model.
func (g *Generator) complete(ctx context.Context, st *state, msgs []message) (reply, error) {
	cfg := st.cfg
	sleep := g.sleep
	if sleep == nil {
		sleep = ctxsleep.Sleep
	}
	policy := &retryPolicy{
		maxRetries: cfg.maxRetries,
		timeout:    cfg.requestTimeout,
		sleep:      sleep,
		onRetry: func(attempt, status int, delay time.Duration, err error) {
			g.log.Warn("retrying model request", "attempt", attempt, "status", status,
				"delay", delay.Round(time.Millisecond).String(), "error", st.redact.Replace(err.Error()))
		},
	}
	initial := func() quirks {
		family := reasoningFamily(cfg.Model)
		return quirks{
			maxCompletionTokens: family || (cfg.Reasoning && cfg.Provider != providerOpenAICompatible),
			noTemperature:       family || cfg.Reasoning,
		}
	}
	for adapted := 0; ; adapted++ {
		q := st.quirks.get(cfg.Model, initial)
		var r reply
		_, err := policy.do(ctx, func(ctx context.Context) error {
			var err error
			r, err = st.chat.chat(ctx, msgs, q)
			return err
		})
		if err == nil {
			return r, nil
		}
		if cfg.openAIProtocol() && adapted < 3 && ctx.Err() == nil {
			if nq, what, ok := learn(err, q); ok {
				st.quirks.set(cfg.Model, nq)
				g.log.Info("the model refused a request parameter; adapting and remembering for this model",
					"model", cfg.Model, "now", what)
				continue
			}
		}
		return reply{}, err
	}
}

// decodeHint words an error decoding the server's reply: go-openai and
// langchaingo return encoding/json's bare "unexpected EOF" or "invalid
// character '<' looking for beginning of value", which do not say that the
// server answered something other than the API's JSON.
func decodeHint(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the reply is not valid JSON (" + err.Error() + "); check that base_url is the provider's API (a proxy's or login page, or a server cut off mid-reply, are the usual causes)"
	}
	return err.Error()
}

// statusHint adds advice to a failed request's diagnostic.
func statusHint(status int) string {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return " (check api_key, and that the key may use this model)"
	case http.StatusNotFound:
		return " (check model, base_url and, for azure_openai, deployment)"
	case http.StatusTooManyRequests:
		return " (rate limited; raise max_retries or lower the request rate)"
	}
	return ""
}

// newRedactor replaces every secret, raw and URL-encoded, with a marker.
// Secrets shorter than four bytes are not real keys and replacing them
// would garble every message.
func newRedactor(secrets []string) *strings.Replacer {
	var pairs []string
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		pairs = append(pairs, s, "(sensitive)")
		if e := url.QueryEscape(s); e != s {
			pairs = append(pairs, e, "(sensitive)")
		}
	}
	return strings.NewReplacer(pairs...)
}

// lastLine returns the last line of s: where Python puts the exception
// message, and short enough for a log line.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
