package config

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// serverBin holds fake stdio servers under the commands the test configs
// name, so that loading them (which looks each command up) does not depend
// on what the machine has installed.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "config-test-servers")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{"npx", "gh", "srv", "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	serverBin = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// fakeEnv is an injected environment, so tests never read or change the
// process's own. HOME is /home/test and PATH serverBin unless kv says
// otherwise.
func fakeEnv(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		switch {
		case !ok && k == "HOME":
			return "/home/test", true
		case !ok && k == "PATH":
			return serverBin, true
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
