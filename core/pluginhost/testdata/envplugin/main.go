// Command envplugin is a selector plugin for pluginhost's tests. Search
// answers with the plugin's own environment, one hit per variable, so a test
// can see exactly what the host passed; the query "sleep" blocks until the
// call is cancelled, so a test can kill the process in the middle of a call.
// ENVPLUGIN_KIND and ENVPLUGIN_API_VERSIONS (set through the plugin block's
// env) change what Info reports, to exercise the host's checks.
// ENVPLUGIN_SERVE=guard (with ENVPLUGIN_KIND=guard) serves a guard instead:
// CheckCode is unimplemented,
// and Detect reports how often CheckCode was asked, as a span's Type.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/guard"
	"github.com/cexec/cexec/pluginapi/selector"
)

type envSelector struct{ docs int64 }

func (*envSelector) Info(context.Context) (pluginapi.Info, error) {
	kind := pluginapi.KindSelector
	if k := os.Getenv("ENVPLUGIN_KIND"); k != "" {
		kind = pluginapi.Kind(k)
	}
	versions := []string{selector.APIVersion}
	if v := os.Getenv("ENVPLUGIN_API_VERSIONS"); v != "" {
		versions = strings.Split(v, ",")
	}
	return pluginapi.Info{
		Name:        "env",
		Kind:        kind,
		Version:     "0.1.0",
		APIVersions: versions,
		ConfigSchema: pluginapi.ConfigSchema{Attributes: []pluginapi.Attribute{
			{Name: "greeting", Type: "string", Description: "logged at Configure"},
		}},
	}, nil
}

func (*envSelector) Configure(_ context.Context, config json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	var c struct {
		Greeting string `json:"greeting"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return pluginapi.Diagnostics{pluginapi.Errorf("", "Invalid config", err.Error())}, nil
	}
	pluginapi.Logger().Info("configured", "greeting", c.Greeting, "api", apiVersion)
	return nil, nil
}

func (s *envSelector) Index(_ context.Context, req selector.IndexRequest) (selector.IndexResponse, error) {
	s.docs += int64(len(req.Upserts))
	return selector.IndexResponse{Documents: s.docs}, nil
}

func (*envSelector) Search(ctx context.Context, req selector.SearchRequest) (selector.SearchResponse, error) {
	if req.Query == "sleep" {
		pluginapi.Logger().Info("sleeping until cancelled")
		if mark := os.Getenv("ENVPLUGIN_SLEEP_MARK"); mark != "" {
			if err := os.WriteFile(mark, []byte("sleeping"), 0o600); err != nil {
				return selector.SearchResponse{}, err
			}
		}
		<-ctx.Done()
		return selector.SearchResponse{}, ctx.Err()
	}
	if req.Query == "cwd" {
		wd, err := os.Getwd()
		return selector.SearchResponse{Hits: []selector.Hit{{ID: wd, Score: 1}}}, err
	}
	pluginapi.Logger().Info("search", "query", req.Query)
	var resp selector.SearchResponse
	for _, kv := range os.Environ() {
		resp.Hits = append(resp.Hits, selector.Hit{ID: kv, Score: 1})
	}
	return resp, nil
}

// envGuard counts the CheckCode calls that reach it.
type envGuard struct {
	envSelector
	guard.Unimplemented
	checkCode atomic.Int64
}

func (g *envGuard) CheckCode(context.Context, guard.CheckCodeRequest) (guard.Decision, error) {
	g.checkCode.Add(1)
	return guard.Decision{}, pluginapi.ErrUnimplemented
}

func (g *envGuard) Detect(context.Context, guard.DetectRequest) ([]guard.Span, error) {
	return []guard.Span{{Type: fmt.Sprintf("checkcode-calls=%d", g.checkCode.Load())}}, nil
}

func main() {
	if os.Getenv("ENVPLUGIN_SERVE") == string(pluginapi.KindGuard) {
		guard.Serve(&envGuard{})
		return
	}
	selector.Serve(&envSelector{})
}
