package config

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeEnv is an injected environment, so tests never read or change the
// process's own. HOME is /home/test unless kv says otherwise.
func fakeEnv(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		if !ok && k == "HOME" {
			return "/home/test", true
		}
		return v, ok
	}
}

// pluginDir makes a plugin_dir holding a fake executable for every name
// given, plus the special cases the fixtures rely on: a file that is not
// executable and a symlink that escapes the directory.
func pluginDir(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		writeExe(t, filepath.Join(dir, "cexec-plugin-"+n), "#!/bin/sh\necho "+n+"\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "cexec-plugin-guard-notexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "outside")
	writeExe(t, outside, "#!/bin/sh\n")
	if err := os.Symlink(outside, filepath.Join(dir, "cexec-plugin-guard-escape")); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(root, "cexec-plugin-codegen-dotdot"), "#!/bin/sh\n")
	return dir
}

func writeExe(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// standardPlugins are the binaries the fixtures expect to exist.
var standardPlugins = []string{"sandbox-bwrap", "selector-embeddings", "guard-pii", "codegen-rules", "codegen-llm", "selector-example"}
