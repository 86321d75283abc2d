// Package version holds the build version of cexecd and cexecctl.
package version

// Version is set at link time by the Makefile
// (-X github.com/cexec/cexec/internal/version.Version=...); "dev" for plain go build.
var Version = "dev"
