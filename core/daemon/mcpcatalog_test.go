package daemon

import (
	"reflect"
	"testing"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/mcpface"
)

// TestServerList checks list_tools' server rows: each local package once, with
// its import name, after the upstream servers the tenant may use.
func TestServerList(t *testing.T) {
	local := func(pkg, name, module string) catalog.Tool {
		return catalog.Tool{ID: pkg + "/" + name, Server: pkg, Name: name, Stub: catalog.StubInfo{Module: module},
			Local: &catalog.LocalInfo{}}
	}
	tools := []catalog.Tool{
		{ID: "everything/get-sum", Server: "everything", Name: "get-sum", Stub: catalog.StubInfo{Module: "servers.everything.get_sum"}},
		{ID: "secret/x", Server: "secret", Name: "x", Stub: catalog.StubInfo{Module: "servers.secret.x"}},
		local("textutils", "word_count", "servers.textutils"),
		local("textutils", "csv_summary", "servers.textutils"),
		local("mytools", "f", "servers.mytools.sub"),
	}
	statuses := []catalog.ServerStatus{
		{Name: "everything", State: catalog.StateReady},
		{Name: "secret", State: catalog.StateReady},
		{Name: "my-server", State: catalog.StateConnecting},
	}
	got := serverList(tools, statuses, func(s string) bool { return s != "secret" }, func(*catalog.Tool) bool { return true })
	want := []mcpface.Server{
		{Name: "everything", Package: "everything", State: string(catalog.StateReady), Tools: 1},
		{Name: "my-server", Package: "my_server", State: string(catalog.StateConnecting)},
		{Name: "textutils", Package: "textutils", State: "local", Tools: 2},
		{Name: "mytools", Package: "mytools", State: "local", Tools: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("serverList =\n%+v\nwant\n%+v", got, want)
	}
}
