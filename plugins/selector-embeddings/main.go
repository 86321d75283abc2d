// Command cexec-plugin-selector-embeddings is cexec's tool selector: BM25F
// over tool names, servers, descriptions and parameters, offline by default,
// fused with an OpenAI-compatible embeddings endpoint when one is configured.
//
// Every attribute is optional; the full list with defaults is the schema in
// package engine. For example:
//
//	plugin "selector" "embeddings" {
//	  command = "cexec-plugin-selector-embeddings"
//	  k1      = 1.6
//	  field_weights {
//	    name        = 3
//	    description = 1
//	  }
//	  embeddings {
//	    base_url      = "http://localhost:11434/v1" # Ollama; or https://api.openai.com/v1
//	    model         = "nomic-embed-text"
//	    api_key       = env("OPENAI_API_KEY")
//	    fusion_weight = 0.5
//	  }
//	}
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
	"github.com/cexec/cexec/plugins/selector-embeddings/engine"
)

func main() {
	selector.Serve(engine.New(pluginapi.Logger()))
}
