package guard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/metrics"
	"github.com/cexec/cexec/pluginapi"
	guardapi "github.com/cexec/cexec/pluginapi/guard"
)

// Plugin is what the host needs of a guard plugin. pluginhost's
// supervised handles (Host.Guard) and plugintest clients are Plugins.
type Plugin interface {
	CheckCode(ctx context.Context, req guardapi.CheckCodeRequest) (guardapi.Decision, error)
	CheckToolCall(ctx context.Context, req guardapi.CheckToolCallRequest) (guardapi.Decision, error)
	Detect(ctx context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error)
}

// Named is a guard plugin with the name it has in cexec.hcl.
type Named struct {
	Name   string
	Plugin Plugin
}

// Missing stands in for a configured guard plugin that could not be
// started (a required = false guard that failed to load): every hook
// fails with err, wrapped in pluginapi.ErrPluginShutdown, so strict
// tenants fail closed, and the others carry on with a warning but get no
// model-facing output (see Guards).
func Missing(err error) Plugin {
	return missing{err: fmt.Errorf("%w: %w", pluginapi.ErrPluginShutdown, err)}
}

type missing struct{ err error }

func (m missing) CheckCode(context.Context, guardapi.CheckCodeRequest) (guardapi.Decision, error) {
	return guardapi.Decision{}, m.err
}

func (m missing) CheckToolCall(context.Context, guardapi.CheckToolCallRequest) (guardapi.Decision, error) {
	return guardapi.Decision{}, m.err
}

func (m missing) Detect(context.Context, guardapi.DetectRequest) ([]guardapi.Span, error) {
	return nil, m.err
}

// DefaultChunk is the largest text one Detect call sends to a plugin.
// gRPC servers refuse messages over 4 MiB by default, and a third-party
// guard may not lift that.
const DefaultChunk = 1 << 20

// Guards runs every configured guard plugin's hooks and combines their
// answers: a call is allowed when no guard denies it, and Detect returns
// the spans of all guards. A hook a guard does not implement is skipped.
// A guard that fails (stopped, restarting, unreachable, or any error
// other than a denial) denies in strict mode, naming the guard, and is
// skipped with a warning otherwise; Detect fails closed in either mode
// unless detection may fail open. Guards is immutable and safe for
// concurrent use.
type Guards struct {
	plugins    []Named
	strict     bool
	detectOpen bool
	chunk      int
	log        hclog.Logger
}

// NewGuards returns the non-strict aggregate of plugins, in order.
func NewGuards(plugins []Named, log hclog.Logger) *Guards {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Guards{plugins: plugins, chunk: DefaultChunk, log: log}
}

// WithStrict returns a copy in the given mode: strict is per tenant, the
// plugins are shared.
func (g *Guards) WithStrict(strict bool) *Guards {
	c := *g
	c.strict = strict
	return &c
}

// WithDetectOpen returns a copy in which a failing Detect is skipped with
// a warning instead of failing the call (policy pii_fail_open), unless the
// copy is strict.
func (g *Guards) WithDetectOpen(open bool) *Guards {
	c := *g
	c.detectOpen = open
	return &c
}

// Strict reports whether a failing guard denies.
func (g *Guards) Strict() bool { return g.strict }

// Denial is a refusal by a guard plugin: its own decision, or, in strict
// mode, its failure to answer. It wraps pluginapi.ErrDenied and, for a
// failure, the plugin's error (so errors.Is(err,
// pluginapi.ErrPluginShutdown) tells a stopped guard).
type Denial struct {
	// Guard is the plugin's name in cexec.hcl.
	Guard string
	// Hook is CheckCode, CheckToolCall or Detect.
	Hook string
	// Reason says why, for the agent: the guard's diagnostics, or that
	// it is unavailable.
	Reason string
	// Diagnostics are the guard's own, for a decision.
	Diagnostics pluginapi.Diagnostics
	cause       error
}

// Error returns "guard <name>: <reason>".
func (d *Denial) Error() string { return "guard " + d.Guard + ": " + d.Reason }

// Unwrap returns pluginapi.ErrDenied and, for a failure, the cause.
func (d *Denial) Unwrap() []error {
	if d.cause != nil {
		return []error{pluginapi.ErrDenied, d.cause}
	}
	return []error{pluginapi.ErrDenied}
}

// failed decides what a guard's error means: nil to carry on without the
// guard, or the error to return.
func (g *Guards) failed(ctx context.Context, name, hook string, err error) error {
	switch {
	case errors.Is(err, pluginapi.ErrUnimplemented):
		return nil
	case errors.Is(err, pluginapi.ErrDenied):
		return &Denial{Guard: name, Hook: hook, Reason: err.Error()}
	case ctx.Err() != nil:
		// The caller gave up; that is not the guard's failure.
		return fmt.Errorf("guard %s: %s: %w", name, hook, ctx.Err())
	case g.strict:
		g.log.Warn("guard unavailable, denying (strict policy)", "guard", name, "hook", hook, "error", err)
		return &Denial{Guard: name, Hook: hook, cause: err,
			Reason: fmt.Sprintf("unavailable, and the tenant's policy is strict, so %s fails closed: %v", hook, err)}
	case hook == "Detect" && !g.detectOpen:
		// Text that cannot be checked may carry raw PII: it is withheld.
		g.log.Warn("guard unavailable, withholding model-facing output", "guard", name, "hook", hook, "error", err)
		reason := "unavailable (stopped or restarting), so nothing was returned; try again in a moment"
		if !Restarting(err) {
			reason = fmt.Sprintf("failed (%v), so nothing was returned", err)
		}
		return &Denial{Guard: name, Hook: hook, cause: err, Reason: reason}
	default:
		g.log.Warn("guard unavailable, continuing without it (policy not strict)", "guard", name, "hook", hook, "error", err)
		return nil
	}
}

// Restarting reports whether a guard's error is its plugin being down
// (stopped, crashed or restarting), which passes, rather than a failure
// that a retry would meet again.
func Restarting(err error) bool {
	return errors.Is(err, pluginapi.ErrPluginShutdown) || errors.Is(err, pluginapi.ErrUnavailable)
}

// CheckCode asks every guard whether code may run. It returns nil when
// none denies, else a *Denial (or the context's error).
func (g *Guards) CheckCode(ctx context.Context, req guardapi.CheckCodeRequest) error {
	for _, p := range g.plugins {
		d, err := p.Plugin.CheckCode(ctx, req)
		if err != nil {
			if err := g.failed(ctx, p.Name, "CheckCode", err); err != nil {
				return err
			}
			continue
		}
		if !d.Allow {
			return denial(p.Name, "CheckCode", "refused the code", d)
		}
	}
	return nil
}

// CheckToolCall asks every guard whether an upstream call may go ahead.
// Pass the real (untokenized) arguments.
func (g *Guards) CheckToolCall(ctx context.Context, req guardapi.CheckToolCallRequest) error {
	for _, p := range g.plugins {
		d, err := p.Plugin.CheckToolCall(ctx, req)
		if err != nil {
			if err := g.failed(ctx, p.Name, "CheckToolCall", err); err != nil {
				return err
			}
			continue
		}
		if !d.Allow {
			return denial(p.Name, "CheckToolCall", fmt.Sprintf("refused the call of %s/%s", req.Server, req.Tool), d)
		}
	}
	return nil
}

func denial(name, hook, what string, d guardapi.Decision) *Denial {
	var reasons []string
	for _, diag := range d.Diagnostics {
		if diag.Severity != pluginapi.SeverityError {
			continue
		}
		r := diag.Summary
		if diag.Detail != "" {
			r += ": " + diag.Detail
		}
		reasons = append(reasons, r)
	}
	reason := what
	if len(reasons) > 0 {
		reason = strings.Join(reasons, "; ")
	}
	return &Denial{Guard: name, Hook: hook, Reason: reason, Diagnostics: d.Diagnostics}
}

// Detect returns the spans every guard finds in req.Text, in no
// particular order and possibly overlapping (the vault merges them). Text
// longer than the chunk size is sent in pieces cut at line ends; a piece
// that must start inside a line repeats the end of the one before. A guard
// that fails fails the call, so nothing goes out unchecked; only with
// detection allowed to fail open (and not strict) are its spans missing,
// with a warning. It implements vault.Detector.
func (g *Guards) Detect(ctx context.Context, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	if len(g.plugins) == 0 || req.Text == "" {
		return nil, nil
	}
	results := make([][]guardapi.Span, len(g.plugins))
	errs := make([]error, len(g.plugins))
	var wg sync.WaitGroup
	for i, p := range g.plugins {
		wg.Go(func() { results[i], errs[i] = g.detect(ctx, p, req) })
	}
	wg.Wait()
	var spans []guardapi.Span
	for i, p := range g.plugins {
		if errs[i] != nil {
			if err := g.failed(ctx, p.Name, "Detect", errs[i]); err != nil {
				return nil, err
			}
			continue
		}
		spans = append(spans, results[i]...)
	}
	countDetections(spans)
	return spans, nil
}

// countDetections adds spans to cexec_guard_detections_total by type. A
// type is a guard's short constant (EMAIL, PHONE); anything longer counts
// as "other", so a guard cannot mint series.
func countDetections(spans []guardapi.Span) {
	for i := 0; i < len(spans); {
		typ, n := spans[i].Type, 1
		for i+n < len(spans) && spans[i+n].Type == typ {
			n++
		}
		if len(typ) > 32 {
			typ = "other"
		}
		metrics.Detection(typ, n)
		i += n
	}
}

// chunkOverlap is how much of the previous chunk a chunk starting inside a
// line repeats, so that a value the cut fell in is seen whole: longer than
// any e-mail, card, IBAN or key a guard looks for.
const chunkOverlap = 4 << 10

func (g *Guards) detect(ctx context.Context, p Named, req guardapi.DetectRequest) ([]guardapi.Span, error) {
	var spans []guardapi.Span
	text := req.Text
	for off := 0; off < len(text); {
		end := cut(text, off, g.chunk)
		// A chunk that starts inside a line (cut at a space or anywhere)
		// starts earlier, at a character boundary: the cut may have
		// fallen inside a value, and neither half need look like one.
		from := off
		if off > 0 && text[off-1] != '\n' {
			from = max(off-chunkOverlap, 0)
			for from > 0 && !utf8.RuneStart(text[from]) {
				from--
			}
		}
		part, err := p.Plugin.Detect(ctx, guardapi.DetectRequest{Text: text[from:end], Types: req.Types})
		if err != nil {
			return nil, err
		}
		for _, s := range part {
			s.Start += from
			s.End += from
			if s.End <= off && from < off {
				continue // inside the previous chunk, which found it
			}
			spans = append(spans, s)
		}
		off = end
	}
	return spans, nil
}

// cut returns the end of the chunk starting at off: after the last line
// end within size bytes when there is one in its second half, else after
// the last space, else on a UTF-8 boundary. Values rarely span lines, so
// cutting there loses none.
func cut(text string, off, size int) int {
	if len(text)-off <= size {
		return len(text)
	}
	window := text[off : off+size]
	if i := strings.LastIndexByte(window, '\n'); i >= size/2 {
		return off + i + 1
	}
	if i := strings.LastIndexByte(window, ' '); i >= size/2 {
		return off + i + 1
	}
	end := off + size
	for end > off+1 && text[end]&0xC0 == 0x80 {
		end--
	}
	return end
}
