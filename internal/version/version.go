// Package version holds the build version of cexecd, cexecctl and the
// plugins of plugins/, one scheme for all, so `cexecctl plugins ls` and
// `cexecctl version` agree on which build is running.
package version

// Version is set at link time by the Makefile
// (-X github.com/cexec/cexec/internal/version.Version=...); "dev" for plain go build.
var Version = "dev"
