package daemon

import (
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/cexec/cexec/core/config"
)

// fdReserve is how many descriptors the MCP face's TCP connections must
// leave to everything else: the control socket, the unix MCP socket, plugins,
// sandboxes and upstream servers.
const fdReserve = 256

// raiseFileLimit raises the soft open file limit to the hard one, so a
// connection flood meets the face's caps before the process runs out of
// descriptors, logs it, and warns when mcp.max_connections leaves less than
// fdReserve. (Go raises it at start as well, but silently.)
func raiseFileLimit(log hclog.Logger, m config.MCP) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open file limit", "error", err)
		return
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open file limit", "soft", lim.Cur, "hard", lim.Max, "error", err)
		} else {
			lim = raised
		}
	}
	log.Info("open file limit", "soft", lim.Cur, "hard", lim.Max)
	if m.Listen != "" && uint64(m.MaxConnections)+fdReserve > lim.Cur {
		log.Warn("mcp.max_connections leaves too few descriptors for the control socket, plugins and sandboxes; lower it or raise the hard open file limit (LimitNOFILE=)",
			"max_connections", m.MaxConnections, "open_file_limit", lim.Cur, "reserve", fdReserve)
	}
}
