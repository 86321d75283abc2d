//go:build !linux

package catalog

import (
	"errors"
	"os/exec"
)

// watchExit is unavailable off Linux: a dead server is noticed on its next
// call instead.
func watchExit(int, func()) (func(), error) {
	return nil, errors.New("process exit watching needs Linux pidfds")
}

func setProcAttrs(*exec.Cmd) {}
