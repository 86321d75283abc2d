// Command cexec-plugin-selector-embeddings is cexec's tool selector: BM25F
// over tool names, servers, descriptions and parameters, offline by default,
// fused with an OpenAI-compatible embeddings endpoint when one is
// configured. README.md lists every attribute.
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
	"github.com/cexec/cexec/plugins/selector-embeddings/internal/embeddings"
)

func main() {
	selector.Serve(embeddings.New(pluginapi.Logger()))
}
