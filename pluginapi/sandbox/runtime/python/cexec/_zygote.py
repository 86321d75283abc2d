"""The cexec zygote: the long-lived process a sandbox keeps warm.

It starts once per sandbox with the runtime imported, then serves the host
over two file descriptors (host -> zygote, zygote -> host). For every
execution it has a child forked with fresh stdout/stderr pipes and a private
channel socket (once warm, by its fork server, see _forker), relays the
child's output and host calls to the host, enforces the time and output
limits, and reports one result frame. A session may
instead use a persistent interpreter: a forked worker that keeps its globals
between executions. The protocol is documented in the Go package
pluginapi/sandbox/runtime.

Only raw integer descriptors are kept in the zygote, never file or socket
objects, so that nothing in a forked child closes a descriptor number that
the user's program has since reused.
"""

from __future__ import annotations

import os
import resource
import select
import sys
import time

from _cexec_paths import extend_path, fix_package

from cexec import _proto
from cexec._child import _RLIMITS, Children
from cexec._control import Channel, connect_control
from cexec._forker import Forker
from cexec._memory import MemoryKills
from cexec._osutil import _POLLIN, _READ_SIZE, _rss_bytes
from cexec._relay import Relay, Run
from cexec._sweep import Sweeper
from cexec._warmup import Warmup
from cexec._workers import Workers

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import signal
    from typing import Any
else:
    # The C module behind signal: the Python wrapper builds
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal
if TYPE_CHECKING:
    from cexec._forker import ForkServer, Usage
    from cexec._warmup import Spare
    from cexec._workers import Worker

PROTOCOL = 1

_SIGNAL_NAMES: dict[int, str] = {
    int(getattr(signal, name)): name
    for name in ("SIGKILL", "SIGTERM", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGXCPU", "SIGXFSZ",
                 "SIGINT", "SIGHUP", "SIGPIPE")
}


def _empty_dir(path: str) -> None:
    """Delete everything below path, which stays. Programs may have taken
    their own permissions away from a directory; the zygote, the same user,
    gives them back."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        _empty_at(fd)
    finally:
        os.close(fd)


def _empty_at(dfd: int) -> None:
    for name in os.listdir(dfd):
        try:
            st = os.lstat(name, dir_fd=dfd)
            if st.st_mode & 0o170000 != 0o040000:
                os.unlink(name, dir_fd=dfd)
                continue
            # No program runs meanwhile (leftovers are swept after each
            # execution), so the directory is still the one just examined.
            os.chmod(name, 0o700, dir_fd=dfd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            try:
                _empty_at(sub)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dfd)
        except OSError:
            pass


class HostGone(Exception):
    """The host closed the control channel."""


class Options:
    """Command-line options, set by the backend through runtime.ZygoteConfig."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        # What site would have added (the interpreter runs with -S).
        self.site_path: list[str] = []
        self.packages: dict[str, list[str]] = {}
        self.cwd = "/workspace"
        self.preload: list[str] = []
        self.scratch: list[str] = []
        self.rlimits: dict[str, int] = {}
        self.ctl_in = 3
        self.ctl_out = 4
        # The pid namespace is the zygote's but for a pid 1 that reaps.
        self.sweep_namespace = False
        # The memory cgroup's file counting kills at the limit (see
        # MemoryKills), and the limit.
        self.memory_events = ""
        self.memory_limit = 0


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    package: list[str] = []  # the directories of the last --package
    it = iter(argv)
    for flag in it:
        value = next(it, None)
        if value is None:
            raise SystemExit(f"cexec zygote: {flag} needs a value")
        if flag == "--path":
            opts.paths.append(value)
        elif flag == "--site-path":
            opts.site_path.append(value)
        elif flag == "--package":
            package = opts.packages.setdefault(value, [])
        elif flag == "--package-dir":
            package.append(value)
        elif flag == "--cwd":
            opts.cwd = value
        elif flag == "--preload":
            opts.preload.extend(m for m in value.split(",") if m)
        elif flag == "--scratch":
            opts.scratch.append(value)
        elif flag == "--rlimit":
            name, _, num = value.partition("=")
            if name not in _RLIMITS or not num.isdigit():
                raise SystemExit(f"cexec zygote: bad --rlimit {value!r}")
            opts.rlimits[name] = int(num)
        elif flag == "--ctl-in":
            opts.ctl_in = int(value)
        elif flag == "--ctl-out":
            opts.ctl_out = int(value)
        elif flag == "--sweep-namespace":
            opts.sweep_namespace = value == "1"
        elif flag == "--memory-events":
            opts.memory_events = value
        elif flag == "--memory-limit":
            opts.memory_limit = int(value)
        else:
            raise SystemExit(f"cexec zygote: unknown flag {flag}")
    return opts


def _move_control(opts: Options) -> None:
    """Move a control channel on stdio out of the way: stray output of the
    zygote (a preloaded module printing) must not corrupt frames."""
    if opts.ctl_in <= 2:
        fd = os.dup(opts.ctl_in)
        os.dup2(os.open(os.devnull, os.O_RDONLY), opts.ctl_in)
        opts.ctl_in = fd
    if opts.ctl_out <= 2:
        fd = os.dup(opts.ctl_out)
        os.dup2(2 if opts.ctl_out != 2 else os.open(os.devnull, os.O_WRONLY), opts.ctl_out)
        opts.ctl_out = fd


def main(argv: list[str]) -> None:
    opts = parse_args(argv)
    _move_control(opts)
    # Nothing the sandbox's launcher left open (bwrap's info pipe, say)
    # stays in the zygote.
    low = 3
    for fd in sorted({opts.ctl_in, opts.ctl_out}):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)
    if sys.flags.no_site:
        _without_site(opts.site_path)
    # After the standard library and site-packages: a module left in the
    # workspace must not replace theirs in later executions.
    extend_path(opts.paths)
    for name, dirs in opts.packages.items():
        fix_package(name, dirs)
    sys.dont_write_bytecode = True
    os.chdir(opts.cwd)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # As the pid namespace's init the zygote ignores signals it has no
    # handler for, so the default disposition is the robust one.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Programs inherit this wrapper of fd 1 (their pipe after dup2); line
    # buffering streams their output as it is printed.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    Zygote(opts).serve()


def _without_site(site_path: list[str]) -> None:
    """Do what programs rely on of site's work, for an interpreter started
    without it: the site directories on sys.path, and the exit, quit, help
    and copyright builtins."""
    import _sitebuiltins
    import builtins

    extend_path(site_path)
    eof = "Ctrl-D (i.e. EOF)"
    for name, value in (("exit", _sitebuiltins.Quitter("exit", eof)), ("quit", _sitebuiltins.Quitter("quit", eof)),
                        ("help", _sitebuiltins._Helper()), ("copyright", _sitebuiltins._Printer("copyright", sys.copyright))):
        setattr(builtins, name, value)


# How the host's Runner starts every reply frame (runtime.replyPrefix).
_REPLY_PREFIX = b'{"op":"reply","exec":"'


def _reply(payload: bytes) -> dict[str, Any] | None:
    """A reply to a host call, undecoded: the zygote needs only the
    execution it answers, and forwards the frame to the program as it
    came (decoding and encoding a large result again would cost more than
    the rest of the relay). None for any other frame."""
    if not payload.startswith(_REPLY_PREFIX):
        return None
    end = payload.find(b'"', len(_REPLY_PREFIX))
    if end < 0:
        return None
    return {"op": "reply", "exec": payload[len(_REPLY_PREFIX):end].decode("ascii", "replace"), "frame": payload}


class Zygote(Warmup, Relay, Sweeper, Children, Workers, Forker):
    """Serves the host: one execution at a time, warm-up work while idle.
    Its parts live in the modules of their concerns (see _parts)."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        # The backend's channel, and the host's over its socket when it
        # took the zygote's control request (see loop).
        self.primary = Channel(opts.ctl_in, opts.ctl_out)
        self.control: Channel | None = None
        self.use(self.primary)
        # Whether every other process of the pid namespace (but pid 1) is a
        # program's, so that sweeps may kill them.
        self.is_init = os.getpid() == 1 or opts.sweep_namespace
        self.workers: dict[str, Worker] = {}
        self.memory_kills = MemoryKills(opts.memory_events, opts.memory_limit)
        self.hardened = False
        self.frozen = False
        self.spare: Spare | None = None
        self.rehearsed = False
        self.forker: ForkServer | None = None
        self.forker_failed = False
        # Whether executions fork children: until one with fresh globals
        # shows the sessions' interpreters serve them all (see
        # interpreters_only).
        self.forks = True
        self.exits: dict[int, tuple[int, Usage]] = {}
        self.last_end = 0.0
        self.ready_at = 0.0
        self.preload = list(opts.preload)
        self.executions = 0
        # The session of the previous execution; None before the first.
        self.session: str | None = None
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def use(self, ch: Channel) -> None:
        """Make ch the channel that frames are read from and sent to."""
        self.ctl_in, self.ctl_out, self.reader, self.inbox = ch.fd_in, ch.fd_out, ch.reader, ch.inbox

    def send(self, msg: dict[str, Any]) -> None:
        self.write(_proto.encode_json(msg))

    def write(self, frame: bytes) -> None:
        try:
            _proto.write_all(self.ctl_out, frame)
        except OSError as e:
            raise HostGone(str(e)) from None

    def read_host(self) -> bool:
        """Read what the host sent into self.inbox; False at end of file."""
        data = os.read(self.ctl_in, _READ_SIZE)
        if not data:
            return False
        self.reader.feed(data)
        for kind, payload in self.reader.frames():
            if kind == _proto.KIND_JSON:
                self.inbox.append(_reply(payload) or _proto.decode_json(payload))
        return True

    def serve(self) -> None:
        try:
            self.loop()
        except HostGone:
            self.shutdown()

    def loop(self) -> None:
        # Before ready: the host grants control only while the sandbox is
        # being created, when nothing but the zygote runs in it.
        self.control = connect_control()
        channels = [self.primary] if self.control is None else [self.control, self.primary]
        hello = {"op": "ready", "pid": os.getpid(), "protocol": PROTOCOL,
                 "python": sys.version.split()[0], "init": self.is_init}
        by_fd: dict[int, Channel] = {}
        poller = select.poll()
        for ch in channels:
            self.use(ch)
            self.send(hello)
            by_fd[ch.fd_in] = ch
            poller.register(ch.fd_in, _POLLIN)
        self.ready_at = time.monotonic()
        while True:
            pending = [c for c in channels if c.inbox]
            if not pending:
                wait = self.idle_wait()
                events = poller.poll(wait)
                for fd, _ in events:
                    # The end of either channel is the host's end.
                    self.use(by_fd[fd])
                    if not self.read_host():
                        self.shutdown()
                if not events and wait is not None:
                    self.use(self.primary)
                    self.idle_step()
                continue
            # An execution's frames all go the way it came.
            self.use(pending[0])
            msg = self.inbox.pop(0)
            op = msg.get("op")
            if op == "exec":
                self.execute(msg)
            elif op == "ping":
                self.send({"op": "pong", "id": msg.get("id"), "rss": _rss_bytes(), "workers": len(self.workers),
                           "executions": self.executions})
            elif op == "end_session":
                worker = self.workers.pop(str(msg.get("session") or ""), None)
                if worker is not None:
                    self.kill_worker(worker)
            elif op == "shutdown":
                self.shutdown()

    def shutdown(self) -> None:
        self.drop_spare()
        for worker in list(self.workers.values()):
            self.kill_worker(worker)
        os._exit(0)

    def execute(self, job: dict[str, Any]) -> None:
        try:
            self.run_job(job)
        finally:
            self.last_end = time.monotonic()

    def run_job(self, job: dict[str, Any]) -> None:
        run = Run(job)
        self.executions += 1
        try:
            if not isinstance(job.get("code"), str):
                raise ValueError("exec frame without code")
            self.harden()
            self.enter_session(str(job.get("session") or ""))
            if job.get("persistent"):
                if job.get("fresh_globals"):
                    self.interpreters_only()
                self.start_persistent(run, job)
            elif not self.take_spare(run, job):
                self.start_child(run, job)
            self.pump(run)
            if self.ended_cleanly(run):
                # The program said how it ended and closed its output: report
                # now, and clean up while the host handles the result.
                self.close_fds(run)
                self.report(run)
                self.retire_worker(run)
                self.clean_up(run)
                return
            self.collect(run)
        except HostGone:
            self.kill(run)
            self.shutdown()
        except Exception as e:
            run.clean = False
            run.note = f"runner failure: {type(e).__name__}: {e}"
            self.kill(run)
            self.sweep(self.keep())
        finally:
            self.close_fds(run)
        self.report(run)
        self.retire_worker(run)

    def enter_session(self, session: str) -> None:
        """Start an execution of session: when it is not the previous
        execution's, end other sessions' persistent interpreters (they
        hold their files open) and empty the scratch directories, so that
        nothing one session left in /tmp or /dev/shm reaches another (nor
        fills the memory it is charged to). Without scratch directories
        (a zygote not in a sandbox of its own) sessions share nothing to
        clear, and their interpreters stay."""
        if session == self.session or not self.opts.scratch:
            return
        self.session = session
        for other, worker in list(self.workers.items()):
            if other != session:
                self.workers.pop(other, None)
                self.kill_worker(worker)
        for path in self.opts.scratch:
            _empty_dir(path)

    def report(self, run: Run) -> None:
        done = run.done or {}
        msg: dict[str, Any] = {"op": "result", "id": run.id, "timed_out": run.timed_out,
                               "truncated": run.truncated, "cancelled": run.cancelled}
        sig = 0
        if run.status is None and run.done is not None and not run.killed:
            code = done.get("exit_code")
            exit_code = code if isinstance(code, int) else 1
            msg["cpu_ms"] = done.get("cpu_ms", 0)
            msg["max_rss"] = done.get("max_rss", 0)
        elif run.status is not None and run.pid:
            if os.WIFSIGNALED(run.status):
                sig = os.WTERMSIG(run.status)
                exit_code = 128 + sig
            else:
                exit_code = os.waitstatus_to_exitcode(run.status)
            if run.rusage is not None:
                msg["cpu_ms"] = int((run.rusage.ru_utime + run.rusage.ru_stime) * 1000)
                msg["max_rss"] = int(run.rusage.ru_maxrss) * 1024
        else:
            exit_code = 1
            if run.orphaned and not run.killed and not run.note:
                run.note = ("the program ended without reporting how, and its exit status is lost: "
                            "it had killed the process that started it (the sandbox's fork server)")
                run.clean = False
        msg["exit_code"] = exit_code
        msg["signal"] = sig
        error = done.get("error")
        if run.timed_out:
            error = {"type": "Timeout", "message": f"the program ran longer than its {run.timeout:g}s limit and was killed"}
        elif run.cancelled:
            error = {"type": "Killed", "message": "the execution was cancelled by the host"}
        elif run.truncated:
            error = {"type": "OutputLimit", "message": f"the program's output exceeded {run.limit} bytes and was cut off"}
        elif sig == signal.SIGKILL and not run.killed and self.memory_kills.rose():
            error = {"type": "MemoryError", "message": self.memory_kills.message()}
            run.clean = False
        elif sig and not run.killed:
            name = _SIGNAL_NAMES.get(sig) or f"signal {sig} ({signal.strsignal(sig)})"
            hint = " (possibly out of memory)" if sig == signal.SIGKILL and self.memory_kills.seen is None else ""
            error = {"type": "Killed", "message": f"the program was killed by {name}{hint}"}
            run.clean = False
        elif run.note:
            error = {"type": "RunnerError", "message": run.note}
        if run.worker is not None and (run.killed or run.status is not None):
            msg["session_lost"] = True
        if isinstance(error, dict):
            msg["error"] = error
        if "result" in done:
            msg["result"] = done["result"]
        msg["clean"] = run.clean
        self.flush_output(run, _proto.encode_json(msg))
        # After the result, off its path: kills at the limit this execution
        # saw in processes it left running are not the next one's.
        self.memory_kills.catch_up()
