package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	mistralsdk "github.com/gage-technologies/mistral-go"
	openai "github.com/sashabaranov/go-openai"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/bedrock"
	"github.com/tmc/langchaingo/llms/googleai"
	"github.com/tmc/langchaingo/llms/mistral"
	"github.com/tmc/langchaingo/llms/ollama"
	"google.golang.org/api/option"
)

// Default endpoints of providers whose library has none we can reuse.
const defaultOllamaURL = "http://127.0.0.1:11434"

// message is one chat turn; role is "system", "user" or "assistant".
type message struct {
	role    string
	content string
}

// reply is a model's answer to one request.
type reply struct {
	text             string
	promptTokens     int64
	completionTokens int64
	// model is the model the server says answered; empty when it does not
	// say.
	model string
	// truncated is set when the model stopped at the token limit.
	truncated bool
}

// chatter sends one chat request. Implementations do no retrying and no
// logging: the generator does both, the same way for every provider.
type chatter interface {
	chat(ctx context.Context, msgs []message, q quirks) (reply, error)
	close() error
}

// newChatter builds the provider's client from a validated config. It makes
// no network calls.
func newChatter(ctx context.Context, c *config) (chatter, error) {
	switch c.Provider {
	case providerOpenAI, providerAzureOpenAI, providerOpenAICompatible:
		return newOpenAIChat(c), nil
	case providerAnthropic:
		opts := []anthropic.Option{anthropic.WithToken(c.APIKey), anthropic.WithModel(c.Model), anthropic.WithHTTPClient(newHTTPClient(nil))}
		if c.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(strings.TrimRight(c.BaseURL, "/")))
		}
		m, err := anthropic.New(opts...)
		if err != nil {
			return nil, err
		}
		return &langChat{llm: m, cfg: c}, nil
	case providerOllama:
		var headers http.Header
		if c.APIKey != "" {
			// For an Ollama behind an authenticating proxy.
			headers = http.Header{"Authorization": {"Bearer " + c.APIKey}}
		}
		base := c.BaseURL
		if base == "" {
			base = defaultOllamaURL
		}
		// ollama.WithServerURL exits the process on a bad URL; parseConfig
		// has already checked it.
		m, err := ollama.New(ollama.WithModel(c.Model), ollama.WithServerURL(strings.TrimRight(base, "/")), ollama.WithHTTPClient(newHTTPClient(headers)))
		if err != nil {
			return nil, err
		}
		return &langChat{llm: m, cfg: c}, nil
	case providerGoogleAI:
		// With a custom HTTP client the Google client libraries drop the API
		// key option, so the transport sends the key header itself.
		hc := newHTTPClient(http.Header{"X-Goog-Api-Key": {c.APIKey}})
		opts := []googleai.Option{
			googleai.WithAPIKey(c.APIKey), googleai.WithHTTPClient(hc),
			googleai.WithDefaultModel(c.Model), googleai.WithDefaultMaxTokens(c.maxTokens),
		}
		if c.BaseURL != "" {
			opts = append(opts, func(o *googleai.Options) {
				o.ClientOptions = append(o.ClientOptions, option.WithEndpoint(c.BaseURL))
			})
		}
		m, err := googleai.New(context.WithoutCancel(ctx), opts...)
		if err != nil {
			return nil, err
		}
		return &langChat{llm: m, cfg: c, closer: m.Close}, nil
	case providerMistral:
		opts := []mistral.Option{
			mistral.WithAPIKey(c.APIKey), mistral.WithModel(c.Model),
			// One try: mistral-go's own retry resends an emptied body; the
			// generator retries instead.
			mistral.WithMaxRetries(1), mistral.WithTimeout(c.requestTimeout),
		}
		if c.BaseURL != "" {
			opts = append(opts, mistral.WithEndpoint(strings.TrimRight(c.BaseURL, "/")))
		}
		m, err := mistral.New(opts...)
		if err != nil {
			return nil, err
		}
		return &langChat{llm: m, cfg: c, ignoresContext: true}, nil
	case providerBedrock:
		var headers http.Header
		awsCfg := aws.Config{
			Region: c.Region,
			// The generator retries; two retry loops would multiply.
			Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		}
		if c.APIKey != "" {
			// A Bedrock API key is a bearer token; anonymous credentials
			// keep the SDK from also signing the request.
			headers = http.Header{"Authorization": {"Bearer " + c.APIKey}}
			awsCfg.Credentials = aws.AnonymousCredentials{}
		} else {
			awsCfg.Credentials = credentials.NewStaticCredentialsProvider(c.AWSAccessKeyID, c.AWSSecretAccessKey, c.AWSSessionToken)
		}
		awsCfg.HTTPClient = newHTTPClient(headers)
		if c.BaseURL != "" {
			awsCfg.BaseEndpoint = aws.String(strings.TrimRight(c.BaseURL, "/"))
		}
		m, err := bedrock.New(bedrock.WithClient(bedrockruntime.NewFromConfig(awsCfg)), bedrock.WithModel(c.Model), bedrock.WithModelProvider(c.ModelProvider))
		if err != nil {
			return nil, err
		}
		return &langChat{llm: m, cfg: c}, nil
	}
	return nil, fmt.Errorf("unknown provider %q", c.Provider)
}

// openAIChat speaks OpenAI chat completions through go-openai: OpenAI,
// Azure OpenAI and every server that copies the protocol.
type openAIChat struct {
	client *openai.Client
	cfg    *config
}

func newOpenAIChat(c *config) *openAIChat {
	var oc openai.ClientConfig
	switch c.Provider {
	case providerAzureOpenAI:
		oc = openai.DefaultAzureConfig(c.APIKey, c.BaseURL)
		oc.APIVersion = c.APIVersion
		deployment := c.Deployment
		if deployment == "" {
			deployment = c.Model
		}
		oc.AzureModelMapperFunc = func(string) string { return deployment }
	default:
		oc = openai.DefaultConfig(c.APIKey)
		if c.BaseURL != "" {
			oc.BaseURL = strings.TrimRight(c.BaseURL, "/")
		}
	}
	oc.HTTPClient = newHTTPClient(nil)
	return &openAIChat{client: openai.NewClientWithConfig(oc), cfg: c}
}

func (o *openAIChat) close() error { return nil }

func (o *openAIChat) chat(ctx context.Context, msgs []message, q quirks) (reply, error) {
	req := openai.ChatCompletionRequest{Model: o.cfg.Model}
	for _, m := range msgs {
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: m.role, Content: m.content})
	}
	if q.maxCompletionTokens {
		req.MaxCompletionTokens = o.cfg.maxTokens
	} else {
		//lint:ignore SA1019 max_tokens is deprecated at OpenAI only for reasoning models; OpenAI-compatible servers and older Azure API versions know nothing else.
		req.MaxTokens = o.cfg.maxTokens
	}
	if t := o.cfg.Temperature; t != nil && !q.noTemperature {
		req.Temperature = float32(*t)
		if *t == 0 {
			// go-openai omits a zero temperature; the smallest positive
			// float32 is its documented way to send "0".
			req.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if o.cfg.Stream {
		return o.stream(ctx, req)
	}
	resp, err := o.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return reply{}, err
	}
	if len(resp.Choices) == 0 {
		return reply{}, errors.New("the reply has no choices")
	}
	ch := resp.Choices[0]
	return reply{
		text:             ch.Message.Content,
		promptTokens:     int64(resp.Usage.PromptTokens),
		completionTokens: int64(resp.Usage.CompletionTokens),
		model:            resp.Model,
		truncated:        ch.FinishReason == openai.FinishReasonLength,
	}, nil
}

func (o *openAIChat) stream(ctx context.Context, req openai.ChatCompletionRequest) (reply, error) {
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := o.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return reply{}, err
	}
	defer st.Close()
	var r reply
	var text strings.Builder
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return reply{}, err
		}
		if chunk.Model != "" {
			r.model = chunk.Model
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason == openai.FinishReasonLength {
				r.truncated = true
			}
		}
		if chunk.Usage != nil {
			r.promptTokens = int64(chunk.Usage.PromptTokens)
			r.completionTokens = int64(chunk.Usage.CompletionTokens)
		}
	}
	r.text = text.String()
	return r, nil
}

// langChat sends requests through a langchaingo model.
type langChat struct {
	llm    llms.Model
	cfg    *config
	closer func() error
	// ignoresContext marks libraries that take no context (mistral-go):
	// the call runs in its own goroutine and is abandoned, bounded by the
	// library's own timeout, when ctx ends.
	ignoresContext bool
}

func (l *langChat) close() error {
	if l.closer != nil {
		return l.closer()
	}
	return nil
}

func (l *langChat) chat(ctx context.Context, msgs []message, q quirks) (reply, error) {
	content := make([]llms.MessageContent, 0, len(msgs))
	for _, m := range msgs {
		role := llms.ChatMessageTypeHuman
		switch m.role {
		case "system":
			role = llms.ChatMessageTypeSystem
		case "assistant":
			role = llms.ChatMessageTypeAI
		}
		content = append(content, llms.TextParts(role, m.content))
	}
	opts := []llms.CallOption{llms.WithModel(l.cfg.Model), llms.WithMaxTokens(l.cfg.maxTokens)}
	if t := l.cfg.Temperature; t != nil && !q.noTemperature {
		opts = append(opts, llms.WithTemperature(*t))
	}
	var resp *llms.ContentResponse
	var err error
	if l.ignoresContext {
		type result struct {
			resp *llms.ContentResponse
			err  error
		}
		done := make(chan result, 1)
		go func() {
			r, err := l.llm.GenerateContent(context.WithoutCancel(ctx), content, opts...)
			done <- result{r, err}
		}()
		select {
		case r := <-done:
			resp, err = r.resp, r.err
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	} else {
		resp, err = l.llm.GenerateContent(ctx, content, opts...)
	}
	if err != nil {
		return reply{}, err
	}
	var r reply
	var parts []string
	for _, ch := range resp.Choices {
		if ch == nil {
			continue
		}
		if ch.Content != "" {
			parts = append(parts, ch.Content)
		}
		switch strings.ToLower(ch.StopReason) {
		case "max_tokens", "length", "max_output_tokens":
			r.truncated = true
		}
		if r.promptTokens == 0 && r.completionTokens == 0 {
			r.promptTokens, r.completionTokens = usageFrom(ch.GenerationInfo)
		}
		if m, ok := ch.GenerationInfo["model"].(string); ok && m != "" {
			r.model = m
		}
	}
	if len(parts) == 0 {
		return reply{}, errors.New("the reply has no text")
	}
	r.text = strings.Join(parts, "\n")
	return r, nil
}

// usageKeys are the GenerationInfo keys langchaingo providers report token
// counts under (ollama and googleai, anthropic, bedrock).
var usageKeys = [][2]string{
	{"PromptTokens", "CompletionTokens"},
	{"InputTokens", "OutputTokens"},
	{"input_tokens", "output_tokens"},
}

// usageFrom reads token counts from a langchaingo GenerationInfo.
func usageFrom(info map[string]any) (prompt, completion int64) {
	for _, k := range usageKeys {
		p, okp := toInt64(info[k[0]])
		c, okc := toInt64(info[k[1]])
		if okp || okc {
			return p, c
		}
	}
	switch u := info["usage"].(type) { // mistral
	case mistralsdk.UsageInfo:
		return int64(u.PromptTokens), int64(u.CompletionTokens)
	case *mistralsdk.UsageInfo:
		if u != nil {
			return int64(u.PromptTokens), int64(u.CompletionTokens)
		}
	}
	return 0, 0
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case float64:
		return int64(n), true
	case float32:
		return int64(n), true
	}
	return 0, false
}
