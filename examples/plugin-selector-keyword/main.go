// Command plugin-selector-keyword is a small but complete cexec selector
// plugin: it ranks tools and skills by how many of the query's keywords
// appear in their name and description. It imports only cexec's pluginapi
// packages and the standard library, as any third-party plugin can.
//
// Build it and point a plugin block at it:
//
//	go build -o plugins/cexec-plugin-selector-keyword ./examples/plugin-selector-keyword
//
//	plugin "selector" "keyword" {
//	  command  = "cexec-plugin-selector-keyword"
//	  max_hits = 10
//	}
package main

import (
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/selector"
)

func main() {
	selector.Serve(newKeywordSelector(pluginapi.Logger()))
}
