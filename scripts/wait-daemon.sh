# shellcheck shell=sh
# Sourced (not run) by the scripts that start a private cexecd.
#
# wait_daemon NAME SOCKET PID LOG waits until cexecctl reaches the daemon on
# SOCKET; it exits the script, with the end of the daemon's LOG, when the
# daemon PID ends first or is not ready after 120 s. Plugins start before
# the socket is served, and on a busy machine that takes a while.
wait_daemon() {
	tries=0
	until bin/cexecctl --address "$2" status >/dev/null 2>&1; do
		if ! kill -0 "$3" 2>/dev/null; then
			echo "$1: cexecd exited before its socket was ready:" >&2
			tail -n 50 "$4" >&2
			exit 1
		fi
		tries=$((tries + 1))
		if [ "$tries" -ge 1200 ]; then
			echo "$1: cexecd socket not ready after 120s:" >&2
			tail -n 50 "$4" >&2
			exit 1
		fi
		sleep 0.1
	done
}
