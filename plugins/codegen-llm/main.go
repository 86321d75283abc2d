// Command cexec-plugin-codegen-llm writes programs with a language model.
// The provider (OpenAI, Azure OpenAI, any OpenAI-compatible server,
// Anthropic, Google AI, Mistral, Bedrock, Ollama) is chosen in cexec.hcl:
//
//	plugin "codegen" "llm" {
//	  provider = "openai"
//	  model    = "gpt-4o-mini"
//	  api_key  = env("OPENAI_API_KEY")
//	}
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
)

func main() {
	codegen.Serve(&generator{log: pluginapi.Logger()})
}
