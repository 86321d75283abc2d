package llm

import (
	"errors"
	"net/http"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// quirks are the request shapes a model insists on. They start from the
// model's name and the reasoning attribute and are corrected by the
// server's own 400 errors, once per model.
type quirks struct {
	// maxCompletionTokens sends the output limit as max_completion_tokens
	// (OpenAI reasoning models) instead of max_tokens.
	maxCompletionTokens bool
	// noTemperature omits temperature (reasoning models accept only their
	// default).
	noTemperature bool
}

// reasoningFamily reports whether an OpenAI model name belongs to a family
// that takes max_completion_tokens and refuses temperature: o1, o3, o4,
// gpt-5 and later. The same prefixes make go-openai refuse max_tokens
// before sending. A "vendor/" prefix (routers, proxies) is ignored.
func reasoningFamily(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") || strings.HasPrefix(m, p+"_") {
			return true
		}
	}
	return false
}

// quirkBook remembers quirks per model for the life of the plugin.
type quirkBook struct {
	mu      sync.Mutex
	byModel map[string]quirks
}

func (b *quirkBook) get(model string, initial func() quirks) quirks {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q, ok := b.byModel[model]; ok {
		return q
	}
	q := initial()
	if b.byModel == nil {
		b.byModel = map[string]quirks{}
	}
	b.byModel[model] = q
	return q
}

func (b *quirkBook) set(model string, q quirks) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byModel == nil {
		b.byModel = map[string]quirks{}
	}
	b.byModel[model] = q
}

// learn reads a failed request's error and returns the quirks that would
// avoid it, and false when the error is not about the request's shape.
// It recognises OpenAI's and Azure's 400s ("Unsupported parameter:
// 'max_tokens' is not supported with this model. Use
// 'max_completion_tokens' instead.", "Unsupported value: 'temperature'
// does not support 0.2 with this model. Only the default (1) value is
// supported.") by their param field or wording, the same complaints from
// OpenAI-compatible servers, the reverse complaint about
// max_completion_tokens from servers that only know max_tokens, and
// go-openai's own refusals before sending.
func learn(err error, q quirks) (quirks, string, bool) {
	switch {
	case errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated):
		if !q.maxCompletionTokens {
			q.maxCompletionTokens = true
			return q, "max_completion_tokens", true
		}
	case errors.Is(err, openai.ErrReasoningModelLimitationsOther), errors.Is(err, openai.ErrReasoningSamplingUnsupported):
		if !q.noTemperature {
			q.noTemperature = true
			return q, "no temperature", true
		}
	}
	if errStatus(err) != http.StatusBadRequest && errStatus(err) != http.StatusUnprocessableEntity {
		return q, "", false
	}
	param, msg := "", strings.ToLower(err.Error())
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		msg = strings.ToLower(apiErr.Message)
		if apiErr.Param != nil {
			param = *apiErr.Param
		}
	}
	refused := func(name string) bool {
		if param == name {
			return true
		}
		i := strings.Index(msg, name)
		if i < 0 {
			return false
		}
		// Naming the parameter is not enough ("max_tokens is too large"):
		// the wording must say it was refused.
		for _, w := range []string{"not supported", "unsupported", "does not support", "not allowed", "unrecognized", "unknown", "extra inputs", "only the default", "not permitted", "deprecated"} {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	switch {
	case !q.maxCompletionTokens && refused("max_tokens") && !strings.HasPrefix(param, "max_completion"):
		q.maxCompletionTokens = true
		return q, "max_completion_tokens", true
	case q.maxCompletionTokens && refused("max_completion_tokens"):
		q.maxCompletionTokens = false
		return q, "max_tokens", true
	case !q.noTemperature && refused("temperature"):
		q.noTemperature = true
		return q, "no temperature", true
	}
	return q, "", false
}
