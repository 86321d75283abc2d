package sandbox_test

import (
	"errors"
	"testing"

	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

func TestRegistry(t *testing.T) {
	var r sandbox.Registry[string]
	if err := r.Reserve("a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve("a"); !errors.Is(err, pluginapi.ErrInvalidArgument) {
		t.Fatalf("second Reserve = %v, want ErrInvalidArgument", err)
	}
	if _, err := r.Get("a"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Fatalf("Get of a reserved id = %v, want ErrNotFound", err)
	}
	if !r.Commit("a", "box a") {
		t.Fatal("Commit = false before Close")
	}
	if b, err := r.Get("a"); err != nil || b != "box a" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	if err := r.Reserve("b"); err != nil {
		t.Fatal(err)
	}
	r.Release("b")
	if all := r.All(); len(all) != 1 || all[0].ID != "a" || r.Len() != 1 {
		t.Fatalf("All = %+v, Len = %d", all, r.Len())
	}
	if b, err := r.Remove("a"); err != nil || b != "box a" {
		t.Fatalf("Remove = %q, %v", b, err)
	}
	if _, err := r.Remove("a"); !errors.Is(err, pluginapi.ErrNotFound) {
		t.Fatalf("second Remove = %v, want ErrNotFound", err)
	}
}

func TestRegistryClose(t *testing.T) {
	var r sandbox.Registry[string]
	for _, id := range []string{"live", "starting"} {
		if err := r.Reserve(id); err != nil {
			t.Fatal(err)
		}
	}
	r.Commit("live", "live box")
	if got := r.Close(); len(got) != 1 || got[0] != "live box" {
		t.Fatalf("Close = %q", got)
	}
	if r.Commit("starting", "late box") {
		t.Fatal("Commit after Close = true")
	}
	done := make(chan struct{})
	go func() {
		r.Wait()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Wait returned before the late creation released its id")
	default:
	}
	r.Release("starting")
	<-done
	if err := r.Reserve("new"); !errors.Is(err, pluginapi.ErrPluginShutdown) {
		t.Fatalf("Reserve after Close = %v, want ErrPluginShutdown", err)
	}
}
