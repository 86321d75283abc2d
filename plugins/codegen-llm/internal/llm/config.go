package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cexec/cexec/pluginapi"
)

// The providers a config may name. The first three speak the OpenAI chat
// completions protocol through go-openai; the rest go through langchaingo.
const (
	providerOpenAI           = "openai"
	providerAzureOpenAI      = "azure_openai"
	providerOpenAICompatible = "openai_compatible"
	providerAnthropic        = "anthropic"
	providerGoogleAI         = "googleai"
	providerMistral          = "mistral"
	providerBedrock          = "bedrock"
	providerOllama           = "ollama"
)

var providers = []string{
	providerOpenAI, providerAzureOpenAI, providerOpenAICompatible,
	providerAnthropic, providerGoogleAI, providerMistral, providerBedrock, providerOllama,
}

// Defaults of optional attributes.
const (
	defaultMaxTokens      = 4096
	defaultMaxRetries     = 3
	defaultRequestTimeout = 120 * time.Second
	defaultCompileRepairs = 1
	defaultPython         = "/usr/bin/python3"
	defaultAzureVersion   = "2024-10-21"
)

// schema is the plugin block's shape; the host decodes cexec.hcl against it.
// "timeout" is taken by the host's own plugin attribute (the bound on every
// call to the plugin), hence request_timeout.
var schema = pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
	{Name: "provider", Type: "string", Required: true, Description: `One of "openai", "azure_openai", "openai_compatible" (Ollama, vLLM, llama.cpp server, LM Studio, any /v1/chat/completions server), "anthropic", "googleai", "mistral", "bedrock", "ollama".`},
	{Name: "model", Type: "string", Required: true, Description: `Model name, e.g. "gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash", "qwen2.5-coder:7b"; for bedrock a model or inference profile id.`},
	{Name: "base_url", Type: "string", Description: "API base URL. Required for openai_compatible (e.g. http://localhost:11434/v1) and azure_openai (https://<resource>.openai.azure.com); optional elsewhere (a proxy or a regional endpoint)."},
	{Name: "api_key", Type: "string", Sensitive: true, Description: `API key, always from the environment: api_key = env("OPENAI_API_KEY"). Required by openai, azure_openai, anthropic, googleai and mistral; optional for openai_compatible and ollama (sent as a bearer token); for bedrock, a Bedrock API key instead of AWS access keys.`},
	{Name: "api_version", Type: "string", Description: "azure_openai: the api-version query parameter (default " + defaultAzureVersion + ")."},
	{Name: "deployment", Type: "string", Description: "azure_openai: the deployment name (default: model)."},
	{Name: "region", Type: "string", Description: "bedrock: AWS region, e.g. us-east-1 (required)."},
	{Name: "aws_access_key_id", Type: "string", Sensitive: true, Description: `bedrock: AWS access key id, from env("AWS_ACCESS_KEY_ID").`},
	{Name: "aws_secret_access_key", Type: "string", Sensitive: true, Description: `bedrock: AWS secret access key, from env("AWS_SECRET_ACCESS_KEY").`},
	{Name: "aws_session_token", Type: "string", Sensitive: true, Description: `bedrock: AWS session token for temporary credentials, from env("AWS_SESSION_TOKEN").`},
	{Name: "model_provider", Type: "string", Description: `bedrock: the model family ("anthropic", "amazon", "meta", ...) when the model id does not name it, e.g. an inference profile ARN.`},
	{Name: "temperature", Type: "number", Description: "Sampling temperature; unset leaves the provider's default. Never sent to reasoning models."},
	{Name: "max_tokens", Type: "number", Description: fmt.Sprintf("Most tokens the model may write (default %d). Sent as max_completion_tokens to models that need it.", defaultMaxTokens)},
	{Name: "request_timeout", Type: "string", Description: fmt.Sprintf("Limit on one model request, a Go duration such as \"90s\" (default %s).", defaultRequestTimeout)},
	{Name: "max_retries", Type: "number", Description: fmt.Sprintf("Retries of a request answered with HTTP 429 or 5xx, or that failed to connect, with exponential backoff and Retry-After (default %d).", defaultMaxRetries)},
	{Name: "system_prompt", Type: "string", Description: "Replaces the built-in system prompt that teaches the model cexec's program contract."},
	{Name: "reasoning", Type: "bool", Description: "The model is a reasoning model: never send temperature (and, for openai and azure_openai, send max_completion_tokens). Known families (o1, o3, o4, gpt-5, ...) are detected by name, others learned from the server's errors."},
	{Name: "stream", Type: "bool", Description: "OpenAI-protocol providers: stream the reply (default false). Keeps slow local servers from hitting idle timeouts of proxies in between."},
	{Name: "python", Type: "string", Description: "Python interpreter that checks generated programs compile, resolved to its real path (default " + defaultPython + ")."},
	{Name: "compile_repairs", Type: "number", Description: fmt.Sprintf("Extra model turns asking for a fix when a reply holds no code or code that does not compile (default %d, 0 to 3).", defaultCompileRepairs)},
}}

// rawConfig is the JSON the host sends: the decoded plugin block. Numbers
// arrive as JSON numbers; whole-number checks happen in validate so the
// diagnostic can name the attribute.
type rawConfig struct {
	Provider           string   `json:"provider"`
	Model              string   `json:"model"`
	BaseURL            string   `json:"base_url"`
	APIKey             string   `json:"api_key"`
	APIVersion         string   `json:"api_version"`
	Deployment         string   `json:"deployment"`
	Region             string   `json:"region"`
	AWSAccessKeyID     string   `json:"aws_access_key_id"`
	AWSSecretAccessKey string   `json:"aws_secret_access_key"`
	AWSSessionToken    string   `json:"aws_session_token"`
	ModelProvider      string   `json:"model_provider"`
	Temperature        *float64 `json:"temperature"`
	MaxTokens          *float64 `json:"max_tokens"`
	RequestTimeout     string   `json:"request_timeout"`
	MaxRetries         *float64 `json:"max_retries"`
	SystemPrompt       *string  `json:"system_prompt"`
	Reasoning          bool     `json:"reasoning"`
	Stream             bool     `json:"stream"`
	Python             string   `json:"python"`
	CompileRepairs     *float64 `json:"compile_repairs"`
}

// config is a validated configuration.
type config struct {
	rawConfig
	maxTokens      int
	maxRetries     int
	requestTimeout time.Duration
	compileRepairs int
	python         string // real path of the interpreter
}

// openAIProtocol reports whether the provider speaks OpenAI chat completions.
func (c *config) openAIProtocol() bool {
	switch c.Provider {
	case providerOpenAI, providerAzureOpenAI, providerOpenAICompatible:
		return true
	}
	return false
}

// secrets lists the values that must never appear in logs or diagnostics.
func (c *config) secrets() []string {
	return []string{c.APIKey, c.AWSSecretAccessKey, c.AWSSessionToken, c.AWSAccessKeyID}
}

// bedrockFamilies are the model families langchaingo's bedrock package
// can format requests for.
var bedrockFamilies = []string{"ai21", "amazon", "anthropic", "cohere", "meta", "nova"}

// providerAttrs names, per provider, the provider-specific attributes it
// reads; setting another provider's attribute earns a warning.
var providerAttrs = map[string][]string{
	"api_version":           {providerAzureOpenAI},
	"deployment":            {providerAzureOpenAI},
	"region":                {providerBedrock},
	"aws_access_key_id":     {providerBedrock},
	"aws_secret_access_key": {providerBedrock},
	"aws_session_token":     {providerBedrock},
	"model_provider":        {providerBedrock},
	"stream":                {providerOpenAI, providerAzureOpenAI, providerOpenAICompatible},
}

// parseConfig decodes and validates the plugin block. It returns nil with
// error diagnostics when the config cannot be used.
func parseConfig(ctx context.Context, raw json.RawMessage) (*config, pluginapi.Diagnostics) {
	var rc rawConfig
	if diags := pluginapi.DecodeConfig("the llm generator", raw, &rc); diags.HasErrors() {
		return nil, diags
	}
	c := &config{rawConfig: rc}
	ch := &checks{}
	c.checkProvider(ch)
	c.checkCredentials(ch)
	c.checkProviderAttributes(ch)
	c.checkLimits(ch)
	c.checkPython(ctx, ch)
	if ch.diags.HasErrors() {
		return nil, ch.diags
	}
	return c, ch.diags
}

// checks collects parseConfig's diagnostics in the order they are found,
// so that one Configure reports every mistake.
type checks struct {
	diags pluginapi.Diagnostics
}

func (ch *checks) bad(attr, summary, detail string) {
	ch.diags = append(ch.diags, pluginapi.Errorf(attr, summary, detail))
}

func (ch *checks) warn(attr, summary, detail string) {
	ch.diags = append(ch.diags, pluginapi.Diagnostic{Severity: pluginapi.SeverityWarning, Summary: summary, Detail: detail, Attribute: attr})
}

// checkProvider checks provider, model and base_url.
func (c *config) checkProvider(ch *checks) {
	c.Provider = strings.TrimSpace(c.Provider)
	switch {
	case c.Provider == "":
		ch.bad("provider", "provider is required", "set provider to one of "+strings.Join(providers, ", "))
	case !slices.Contains(providers, c.Provider):
		ch.bad("provider", fmt.Sprintf("unknown provider %q", c.Provider), "use one of "+strings.Join(providers, ", "))
	}
	c.Model = strings.TrimSpace(c.Model)
	if c.Model == "" {
		ch.bad("model", "model is required", "name the model to use, e.g. model = \"gpt-4o-mini\"")
	}

	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ch.bad("base_url", "base_url is not an http(s) URL", fmt.Sprintf("got %q; write it like https://api.example.com/v1", redactURL(c.BaseURL)))
		}
	}
	switch c.Provider {
	case providerOpenAICompatible:
		if c.BaseURL == "" {
			ch.bad("base_url", "base_url is required for provider openai_compatible", "e.g. http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM), http://localhost:8080/v1 (llama.cpp), http://localhost:1234/v1 (LM Studio)")
		}
	case providerAzureOpenAI:
		if c.BaseURL == "" {
			ch.bad("base_url", "base_url is required for provider azure_openai", "the resource endpoint, https://<resource>.openai.azure.com")
		}
	}
}

// checkCredentials checks that the provider has the keys it needs.
func (c *config) checkCredentials(ch *checks) {
	switch c.Provider {
	case providerOpenAI, providerAzureOpenAI, providerAnthropic, providerGoogleAI, providerMistral:
		if c.APIKey == "" {
			ch.bad("api_key", "api_key is required for provider "+c.Provider, `read it from the environment: api_key = env("...")`)
		}
	case providerBedrock:
		if c.Region == "" {
			ch.bad("region", "region is required for provider bedrock", `e.g. region = "us-east-1"`)
		}
		keys := c.AWSAccessKeyID != "" || c.AWSSecretAccessKey != ""
		switch {
		case c.APIKey != "" && keys:
			ch.bad("api_key", "give bedrock either api_key or AWS access keys, not both", "")
		case c.APIKey == "" && (c.AWSAccessKeyID == "" || c.AWSSecretAccessKey == ""):
			attr := "aws_access_key_id"
			if c.AWSAccessKeyID != "" {
				attr = "aws_secret_access_key"
			}
			ch.bad(attr, "bedrock needs credentials", `set aws_access_key_id and aws_secret_access_key from env(), or api_key to a Bedrock API key; the plugin does not read AWS credentials from anywhere else`)
		}
	}
}

// checkProviderAttributes warns about attributes of another provider and
// fills in the azure_openai API version.
func (c *config) checkProviderAttributes(ch *checks) {
	if c.Provider != "" {
		present := map[string]bool{
			"api_version": c.APIVersion != "", "deployment": c.Deployment != "", "region": c.Region != "",
			"aws_access_key_id": c.AWSAccessKeyID != "", "aws_secret_access_key": c.AWSSecretAccessKey != "",
			"aws_session_token": c.AWSSessionToken != "", "model_provider": c.ModelProvider != "", "stream": c.Stream,
		}
		for attr, users := range providerAttrs {
			if present[attr] && slices.Contains(providers, c.Provider) && !slices.Contains(users, c.Provider) {
				ch.warn(attr, attr+" is ignored by provider "+c.Provider, "it applies to "+strings.Join(users, ", "))
			}
		}
	}
	if c.ModelProvider != "" && !slices.Contains(bedrockFamilies, c.ModelProvider) {
		ch.bad("model_provider", fmt.Sprintf("unknown bedrock model_provider %q", c.ModelProvider), "use one of "+strings.Join(bedrockFamilies, ", "))
	}
	if c.Provider == providerAzureOpenAI && c.APIVersion == "" {
		c.APIVersion = defaultAzureVersion
	}
}

// checkLimits checks the request's numbers, timeout and system prompt.
func (c *config) checkLimits(ch *checks) {
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		ch.bad("temperature", "temperature must be between 0 and 2", fmt.Sprintf("got %g", *c.Temperature))
	}
	var ok bool
	if c.maxTokens, ok = wholeNumber(c.MaxTokens, defaultMaxTokens, 1, 1<<20); !ok {
		ch.bad("max_tokens", "max_tokens must be a whole number from 1 to 1048576", "")
	}
	if c.maxRetries, ok = wholeNumber(c.MaxRetries, defaultMaxRetries, 0, 20); !ok {
		ch.bad("max_retries", "max_retries must be a whole number from 0 to 20", "")
	}
	if c.compileRepairs, ok = wholeNumber(c.CompileRepairs, defaultCompileRepairs, 0, 3); !ok {
		ch.bad("compile_repairs", "compile_repairs must be a whole number from 0 to 3", "")
	}
	c.requestTimeout = defaultRequestTimeout
	if c.RequestTimeout != "" {
		d, err := time.ParseDuration(c.RequestTimeout)
		if err != nil || d <= 0 {
			ch.bad("request_timeout", "request_timeout must be a positive Go duration", fmt.Sprintf("got %q; write e.g. \"90s\" or \"2m\"", c.RequestTimeout))
		}
		c.requestTimeout = d
	}
	if c.SystemPrompt != nil && strings.TrimSpace(*c.SystemPrompt) == "" {
		ch.bad("system_prompt", "system_prompt is empty", "remove the attribute to use the built-in prompt")
	}
}

// checkPython resolves the interpreter that checks generated programs.
func (c *config) checkPython(ctx context.Context, ch *checks) {
	python := c.Python
	if python == "" {
		python = defaultPython
	}
	real, err := resolvePython(ctx, python)
	if err != nil {
		ch.bad("python", "cannot use "+python+" to check generated code", err.Error())
	}
	c.python = real
}

// wholeNumber returns *v as an int within [lo, hi], def when v is nil, and
// false when v is fractional or out of range.
func wholeNumber(v *float64, def, lo, hi int) (int, bool) {
	if v == nil {
		return def, true
	}
	if *v != math.Trunc(*v) || *v < float64(lo) || *v > float64(hi) {
		return 0, false
	}
	return int(*v), true
}

// resolvePython finds the real interpreter behind python and makes sure it
// runs: a pyenv shim would pick a different Python per directory, so only an
// ELF executable is accepted.
func resolvePython(ctx context.Context, python string) (string, error) {
	if !filepath.IsAbs(python) {
		p, err := exec.LookPath(python)
		if err != nil {
			return "", err
		}
		python = p
	}
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return "", err
	}
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	var magic [4]byte
	_, err = f.Read(magic[:])
	f.Close()
	if err != nil || string(magic[:]) != "\x7fELF" {
		return "", fmt.Errorf("%s (resolved from %s) is not an ELF executable; name the real interpreter such as /usr/bin/python3, not a pyenv shim or wrapper script", real, python)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, real, "-I", "-S", "-c", "import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)")
	cmd.Env = []string{"LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s is not a working Python 3.9 or newer: %v %s", real, err, strings.TrimSpace(string(out)))
	}
	return real, nil
}

// redactURL drops a password from a URL before it is shown.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
