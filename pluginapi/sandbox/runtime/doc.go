// Package runtime is the standard in-sandbox runtime of cexec: a Python
// runner (the zygote) that a sandbox keeps warm, and the Go side that drives
// it. Every sandbox backend uses it so that programs see the same API (the
// cexec Python module) and backends speak the same protocol, whatever the
// isolation: a backend only has to start the zygote in its sandbox and hand
// the two ends of its control channel to NewRunner.
//
// # Inside the sandbox
//
// Install writes the runtime's Python package into a directory that the
// backend mounts read-only at /cexec/lib. ZygoteConfig.Command is the command
// line to start the zygote with, ZygoteConfig.Env its environment. The
// interpreter runs with -I (isolated: PYTHON* variables, the user site and
// the current directory are ignored) but without -S, so the interpreter's
// own site-packages stay importable; the zygote puts /cexec/lib first and
// the ZygoteConfig.Path entries last on sys.path itself, and fixes the
// directories of ZygoteConfig.Packages (servers, skills) before any program
// runs. Python subprocesses of programs get the same module path from Env:
// PYTHONPATH is /cexec/lib alone, whose sitecustomize appends CEXEC_PATH and
// fixes CEXEC_PACKAGES, and PYTHONSAFEPATH keeps the working directory off
// sys.path. The zygote imports the runtime, reports ready, then (while
// idle) drops its dumpable flag (with prctl, unless the kernel dropped it
// at exec because the sandbox may not read the interpreter, as the bwrap
// backend arranges), imports the preload modules, freezes its
// heap and forks the spare child, so that executions start with all of
// that done. That idle work starts 10 ms after ready, or after an
// execution that came first: a sandbox created for one program gets it at
// once, runs it with no preload import in its way, and is usually
// destroyed before it spends the CPU on them. Before freezing its heap the
// zygote runs a small printing program once itself (stdout on /dev/null),
// so that what a first run initializes is inherited by every child rather
// than copied in each.
//
// Each execution runs in a fresh child forked from the zygote: its own
// session (process group), stdout and stderr replaced with new pipes by
// dup2 (so output of subprocesses and C code is captured too), descriptor 3
// a private channel socket to the zygote, nothing else open, cwd /workspace,
// a new __main__ module. As soon as an execution is over the zygote forks
// the next one's child in advance (the spare), which waits for the program
// on descriptor 3, so that neither the fork nor its first copy-on-write
// faults delay the execution. Once its heap is frozen the zygote forks a
// fork server, a copy of itself that forks every later child (spares, and
// a program sent before its spare was ready) on descriptors the zygote
// passes it by SCM_RIGHTS, and reports each child's pid and end (wait
// status, CPU time, peak RSS) in fixed-size records. The zygote then never
// forks again, so the relay's writes no longer copy its pages after every
// fork (about 180 per execution); the fork server touches few objects and
// copies about 60 per fork. When the fork server is gone (a program may
// kill it) the zygote forks on demand itself, compiling programs up to 256
// KiB before the fork, and a zygote whose spare it forked itself and has
// waited 20 ms rehearses an execution's path through pipes standing in for
// the host and the child, so that the pages the fork made shared again are
// copied then, not on the next execution's path. Frames never travel on the program's
// stdout. The program's `from cexec import call_tool, result` talks over
// descriptor 3; the zygote relays host calls to the host and replies back.
// When the exec frame carries a host_token and the sandbox has the host's
// socket (HostSocket), the program's host calls go there instead, straight
// to the host, and only the result frame uses descriptor 3.
// call_tool opens the host's rich-content envelope into cexec.Image, Audio,
// Resource and ResourceLink objects (cexec/_content.py); show and
// read_resource are host calls like it.
// When the child exits, the zygote drains its output, kills its process
// group and, when it is the pid namespace's init, every other process but
// itself, the fork server and the persistent interpreters, then reports
// one result frame.
// After a result reported early (the program said how it ended and closed
// its output), the zygote skips that sweep when /proc/loadavg's newest pid
// is still the program's: nothing was started since.
//
// A session may ask for a persistent interpreter instead: a worker forked
// once, whose __main__ globals survive between executions of that session.
// Each execution hands it fresh pipes and a channel by SCM_RIGHTS. With
// fresh_globals the worker runs each program in new globals instead and,
// after it, puts back what the program changed (cexec/_fresh.py: working
// directory, environment, builtins, signal handlers, timers and mask,
// rlimits, standard streams, sys hooks, recursion limit, tracing, gc
// settings, sys.path and argv, modules not from the standard library or
// site-packages); a program that leaves threads or open files, adds an
// audit hook or grows the worker by more than 64 MiB makes it retire: its result says so ("retire" in its done message)
// and the zygote ends it after reporting.
//
// # Frames
//
// The control channel is a pair of byte streams, host to zygote and zygote
// to host (file descriptors 3 and 4 by default, stdin and stdout with
// ZygoteConfig.StdioControl). When the sandbox has the host's socket
// (HostSocket), the zygote also asks the host there, before it reports
// ready, to be controlled through that connection; a host that agrees
// speaks the same protocol on it, without the backend in between (see
// HostSocket). The zygote serves executions from either channel, one at a
// time, and answers each on the channel it came from. Both carry frames:
//
//	uint32 big-endian payload length | 1 byte kind | payload
//
// Kind 'J' is a UTF-8 JSON object with an "op" member; kinds 'O' and 'E'
// (zygote to host only) carry raw bytes of the current execution's stdout
// and stderr. A payload is at most MaxFrame bytes. The same framing is used
// between the zygote and a program on descriptor 3.
//
// Host to zygote:
//
//	{"op":"exec","id":"x1","code":"...","timeout_ms":30000,"output_limit":1048576,
//	 "persistent":false,"session":"","host_token":"...","fresh_globals":false}
//	    Run a program. One execution at a time; the host waits for its result.
//	    host_token (optional) goes to the program's process alone (HostSocket).
//	{"op":"reply","exec":"x1","id":7,"result":<json>}
//	{"op":"reply","exec":"x1","id":7,"error":"message","error_type":"ToolError"}
//	    Answer host call 7 of execution x1. A reply starts exactly so (op,
//	    then exec): the zygote reads only that prefix and forwards the
//	    frame to the program undecoded.
//	{"op":"cancel","id":"x1"}      Kill the current execution.
//	{"op":"ping","id":"p1"}        Answered by pong, also during an execution.
//	{"op":"end_session","session":"s"}  Drop a persistent interpreter.
//	{"op":"shutdown"}              Kill everything and exit (as does end of file).
//
// Zygote to host:
//
//	{"op":"ready","pid":1,"protocol":1,"python":"3.11.2","init":true}
//	{"op":"pong","id":"p1","rss":12345678,"workers":0,"executions":3}
//	{"op":"call","id":7,"method":"call_tool","params":{"server":"s","tool":"t","arguments":{}}}
//	    A host call made by the program (cexec._host_call(method, params)):
//	    call_tool, the workspace's methods, and progress
//	    ({"progress":2,"total":5,"message":"..."}, from cexec.progress).
//	'O' / 'E' frames                 Output of the current execution, at most
//	                                 2 ms after the program wrote it; output
//	                                 comes before a call or result that
//	                                 follows it, in the same write.
//	{"op":"result","id":"x1","exit_code":0,"result":<json>,"error":{"type":"ValueError",
//	 "message":"...","traceback":"..."},"timed_out":false,"truncated":false,
//	 "cancelled":false,"signal":0,"cpu_ms":3,"max_rss":9000000,"clean":true,
//	 "session_lost":false}
//	    The end of an execution. "result" is present only when the program
//	    called cexec.result(obj). "clean" is false when the zygote could not
//	    make sure that nothing of the program survived, or the program died
//	    in a way that suggests the sandbox is in trouble (a signal it did not
//	    get from the runtime, such as the OOM killer's). "session_lost" is
//	    true when the session's persistent interpreter ended during the
//	    execution (it exited, or was killed).
//	{"op":"unclean","id":"x1","message":"..."}
//	    The zygote reports a result as soon as the program has said how it
//	    ended and closed its output, and kills what is left of it afterwards;
//	    when that fails it sends unclean, and the sandbox is killed.
//
// The zygote enforces the execution's time limit and output limit (the sum
// of stdout and stderr bytes) by killing the program; the Runner checks both
// again and, when the zygote does not answer within a grace period after the
// deadline or breaks the protocol, calls Options.Kill to kill the whole
// sandbox and reports it as not OK.
package runtime
