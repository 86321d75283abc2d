//go:build !linux

package pluginhost

import "os/exec"

// setProcAttr has nothing to add outside Linux: there is no parent-death
// signal; Stop ends the plugins.
func setProcAttr(*exec.Cmd) {}
