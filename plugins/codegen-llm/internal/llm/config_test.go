package llm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/pluginapi/plugintest"
)

func TestInfoOverGRPC(t *testing.T) {
	c := plugintest.Codegen(t, &Generator{log: hclog.NewNullLogger()})
	info := plugintest.CheckInfo(t, c, pluginapi.KindCodegen)
	if info.Name != "llm" {
		t.Errorf("name = %q", info.Name)
	}
	sensitive := map[string]bool{}
	for _, a := range info.ConfigSchema.Attributes {
		sensitive[a.Name] = a.Sensitive
	}
	for _, name := range []string{"api_key", "aws_secret_access_key", "aws_session_token", "aws_access_key_id"} {
		if !sensitive[name] {
			t.Errorf("%s is not declared sensitive", name)
		}
	}
}

func TestGenerateBeforeConfigureIsUnavailable(t *testing.T) {
	c := plugintest.Codegen(t, &Generator{log: hclog.NewNullLogger()})
	_, err := c.Generate(t.Context(), codegen.GenerateRequest{Task: "x"})
	if err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigureDiagnostics(t *testing.T) {
	testPython(t)
	shim := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	openai := `"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-x"`
	for _, tc := range []struct {
		name     string
		cfg      string
		wantAttr string // "" when the config is valid
		wantText string
	}{
		{"minimal openai", `{` + openai + `}`, "", ""},
		{"missing provider", `{"model": "m"}`, "provider", "provider is required"},
		{"unknown provider", `{"provider": "openia", "model": "m"}`, "provider", `unknown provider "openia"`},
		{"missing model", `{"provider": "openai", "api_key": "sk-x"}`, "model", "model is required"},
		{"missing key", `{"provider": "anthropic", "model": "claude-sonnet-4-5"}`, "api_key", "api_key is required"},
		{"compatible needs base_url", `{"provider": "openai_compatible", "model": "llama3"}`, "base_url", "base_url is required"},
		{"compatible without key is fine", `{"provider": "openai_compatible", "model": "llama3", "base_url": "http://localhost:11434/v1"}`, "", ""},
		{"azure needs base_url", `{"provider": "azure_openai", "model": "gpt-4o", "api_key": "k-xx"}`, "base_url", "base_url is required"},
		{"base_url not a URL", `{` + openai + `, "base_url": "localhost:8080"}`, "base_url", "not an http(s) URL"},
		{"base_url password not echoed", `{` + openai + `, "base_url": "ftp://u:hunter22@host/v1"}`, "base_url", "ftp://u:xxxxx@host/v1"},
		{"ollama needs nothing else", `{"provider": "ollama", "model": "qwen2.5-coder:7b"}`, "", ""},
		{"bedrock needs region", `{"provider": "bedrock", "model": "anthropic.claude-3-5-haiku-20241022-v1:0", "api_key": "bedrock-key"}`, "region", "region is required"},
		{"bedrock needs credentials", `{"provider": "bedrock", "model": "m", "region": "us-east-1"}`, "aws_access_key_id", "bedrock needs credentials"},
		{"bedrock needs the secret too", `{"provider": "bedrock", "model": "m", "region": "us-east-1", "aws_access_key_id": "AKIA0000"}`, "aws_secret_access_key", "bedrock needs credentials"},
		{"bedrock key or access keys", `{"provider": "bedrock", "model": "m", "region": "us-east-1", "api_key": "k-xx", "aws_access_key_id": "AKIA", "aws_secret_access_key": "s-xx"}`, "api_key", "not both"},
		{"bedrock model_provider", `{"provider": "bedrock", "model": "arn:aws:bedrock:x", "region": "us-east-1", "api_key": "k-xx", "model_provider": "openai"}`, "model_provider", "unknown bedrock model_provider"},
		{"temperature range", `{` + openai + `, "temperature": 2.5}`, "temperature", "between 0 and 2"},
		{"max_tokens whole", `{` + openai + `, "max_tokens": 10.5}`, "max_tokens", "whole number"},
		{"max_tokens positive", `{` + openai + `, "max_tokens": 0}`, "max_tokens", "whole number"},
		{"max_retries range", `{` + openai + `, "max_retries": 50}`, "max_retries", "0 to 20"},
		{"compile_repairs range", `{` + openai + `, "compile_repairs": 4}`, "compile_repairs", "0 to 3"},
		{"request_timeout syntax", `{` + openai + `, "request_timeout": "90"}`, "request_timeout", "positive Go duration"},
		{"request_timeout positive", `{` + openai + `, "request_timeout": "-1s"}`, "request_timeout", "positive Go duration"},
		{"empty system prompt", `{` + openai + `, "system_prompt": "  "}`, "system_prompt", "empty"},
		{"python shim refused", `{` + openai + `, "python": "` + shim + `"}`, "python", "not an ELF executable"},
		{"python missing", `{` + openai + `, "python": "/nonexistent/python3"}`, "python", "cannot use"},
		{"unknown attribute", `{` + openai + `, "modle": "x"}`, "modle", "no attribute"},
		{"wrong type", `{` + openai + `, "max_tokens": "many"}`, "max_tokens", "Invalid type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags, _ := parseConfigDiags(t, tc.cfg)
			if tc.wantText == "" {
				if diags.HasErrors() {
					t.Fatalf("valid config rejected: %+v", diags)
				}
				return
			}
			if !diags.HasErrors() {
				t.Fatalf("invalid config accepted")
			}
			d := diags[0]
			if d.Attribute != tc.wantAttr || !strings.Contains(d.Summary+" "+d.Detail, tc.wantText) {
				t.Errorf("diagnostic %+v, want attribute %q and %q", d, tc.wantAttr, tc.wantText)
			}
			if strings.Contains(d.Summary+d.Detail, "hunter22") {
				t.Errorf("password echoed: %+v", d)
			}
		})
	}
}

func TestConfigureWarnsAboutAnotherProvidersAttributes(t *testing.T) {
	testPython(t)
	diags, cfg := parseConfigDiags(t, `{"provider": "anthropic", "model": "claude-sonnet-4-5", "api_key": "k-xx", "region": "us-east-1", "stream": true}`)
	if diags.HasErrors() || cfg == nil {
		t.Fatalf("config rejected: %+v", diags)
	}
	got := map[string]bool{}
	for _, d := range diags {
		if d.Severity == pluginapi.SeverityWarning {
			got[d.Attribute] = true
		}
	}
	if !got["region"] || !got["stream"] || len(got) != 2 {
		t.Errorf("warnings = %+v, want region and stream", diags)
	}
}

func TestConfigureOverGRPCAndReconfigure(t *testing.T) {
	testPython(t)
	c := plugintest.Codegen(t, &Generator{log: hclog.NewNullLogger()})
	diags, err := c.Configure(t.Context(), json.RawMessage(`{"provider": "openai", "model": "gpt-4o-mini"}`), codegen.APIVersion)
	if err != nil || !diags.HasErrors() || diags[0].Attribute != "api_key" {
		t.Fatalf("want an api_key diagnostic over gRPC, got %v %+v", err, diags)
	}
	for _, cfg := range []string{
		`{"provider": "ollama", "model": "llama3"}`,
		`{"provider": "googleai", "model": "gemini-2.5-flash", "api_key": "k-xx"}`,
		`{"provider": "bedrock", "model": "anthropic.claude-3-5-haiku-20241022-v1:0", "region": "eu-west-1", "aws_access_key_id": "AKIA0000", "aws_secret_access_key": "s-xx"}`,
		`{"provider": "mistral", "model": "codestral-latest", "api_key": "k-xx"}`,
	} {
		diags, err := c.Configure(t.Context(), json.RawMessage(cfg), codegen.APIVersion)
		if err != nil || diags.HasErrors() {
			t.Fatalf("configure %s: %v %+v", cfg, err, diags)
		}
	}
}

func parseConfigDiags(t *testing.T, raw string) (pluginapi.Diagnostics, *config) {
	t.Helper()
	cfg, diags := parseConfig(t.Context(), json.RawMessage(raw))
	return diags, cfg
}
