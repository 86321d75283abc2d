// Command cexec-plugin-codegen-llm writes programs with a language model.
// The provider (OpenAI, Azure OpenAI, any OpenAI-compatible server,
// Anthropic, Google AI, Mistral, Bedrock, Ollama) is chosen in cexec.hcl;
// README.md lists every attribute.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/codegen"
	"github.com/cexec/cexec/plugins/codegen-llm/internal/llm"
)

func main() {
	codegen.Serve(llm.New(pluginapi.Logger()))
}
