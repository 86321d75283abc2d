"""The cexec zygote: the long-lived process a sandbox keeps warm.

It starts once per sandbox with the runtime imported, then serves the host
over two file descriptors (host -> zygote, zygote -> host). For every
execution it forks a child with fresh stdout/stderr pipes and a private
channel socket, relays the child's output and host calls to the host, enforces
the time and output limits, and reports one result frame. A session may
instead use a persistent interpreter: a forked worker that keeps its globals
between executions. The protocol is documented in the Go package
pluginapi/sandbox/runtime.

Only raw integer descriptors are kept in the zygote, never file or socket
objects, so that nothing in a forked child closes a descriptor number that
the user's program has since reused.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import os
import resource
import select
import struct
import sys
import time
import types

import cexec
from cexec import _proto

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import signal
    import socket
    from typing import Any
else:
    # The C modules behind signal and socket: the Python wrappers build
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal
    import _socket as socket

PROTOCOL = 1

# Largest exception message and traceback reported, in characters.
_MAX_MESSAGE = 64 << 10
_MAX_TRACEBACK = 256 << 10

# How long a killed child may take to disappear before the zygote gives up
# and reports the sandbox as unclean.
_KILL_GRACE = 2.0

_MAX_WORKERS = 4

# How long the zygote stays idle after an execution before forking a spare.
_SPARE_DELAY = 0.002
# How long a spare must have waited before the zygote rehearses (see
# Zygote.rehearse). Programs that come back to back leave no idle CPU for
# it; the pauses of an agent between its turns do.
_REHEARSAL_DELAY = 0.02
# What one read asks for. Python allocates the whole size for each read:
# beyond malloc's mmap threshold (128 KiB) every read would cost an mmap, a
# fresh page fault and an munmap, which on the hot path of an execution
# add up to a tenth of a millisecond. Larger frames take several reads.
_READ_SIZE = 65536

# Output is relayed at most this long after the program wrote it, or once
# this much is waiting: what a program prints just before it ends then
# travels with its result, in one write to the host and one wake-up of
# every process on the way, instead of two.
_OUTPUT_DELAY = 0.002
_OUTPUT_BATCH = 64 << 10

# Programs up to this size are compiled in the zygote before forking.
_PRECOMPILE_LIMIT = 256 << 10

# Referenced so that replacing __main__ in a child does not free the
# bootstrap module (freeing touches, and so copies, the zygote's pages).
_BOOT_MAIN = sys.modules.get("__main__")

_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
}

_POLLIN = select.POLLIN | select.POLLHUP | select.POLLERR

_SIGNAL_NAMES: dict[int, str] = {
    int(getattr(signal, name)): name
    for name in ("SIGKILL", "SIGTERM", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGXCPU", "SIGXFSZ",
                 "SIGINT", "SIGHUP", "SIGPIPE")
}


class HostGone(Exception):
    """The host closed the control channel."""


class Options:
    """Command-line options, set by the backend through runtime.ZygoteConfig."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.cwd = "/workspace"
        self.preload: list[str] = []
        self.rlimits: dict[str, int] = {}
        self.ctl_in = 3
        self.ctl_out = 4


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    it = iter(argv)
    for flag in it:
        value = next(it, None)
        if value is None:
            raise SystemExit(f"cexec zygote: {flag} needs a value")
        if flag == "--path":
            opts.paths.append(value)
        elif flag == "--cwd":
            opts.cwd = value
        elif flag == "--preload":
            opts.preload.extend(m for m in value.split(",") if m)
        elif flag == "--rlimit":
            name, _, num = value.partition("=")
            if name not in _RLIMITS or not num.isdigit():
                raise SystemExit(f"cexec zygote: bad --rlimit {value!r}")
            opts.rlimits[name] = int(num)
        elif flag == "--ctl-in":
            opts.ctl_in = int(value)
        elif flag == "--ctl-out":
            opts.ctl_out = int(value)
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
    sys.path[1:1] = opts.paths
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


def _set_non_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): the program's processes can then neither
    read the zygote's memory nor open its descriptors through /proc. Uses
    _ctypes directly because importing ctypes costs milliseconds."""
    import _ctypes

    class CInt(_ctypes._SimpleCData):  # type: ignore[name-defined,misc]
        _type_ = "i"

    class Func(_ctypes.CFuncPtr):  # type: ignore[name-defined,misc]
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = CInt

    class Libc:
        _handle = _ctypes.dlopen(None, os.RTLD_NOW)  # type: ignore[attr-defined]

    prctl = Func(("prctl", Libc()))
    if prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError("prctl(PR_SET_DUMPABLE) failed")


def _rss_bytes() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _socketpair() -> tuple[int, int]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return a.detach(), b.detach()


def _send_with_fds(sock: int, data: bytes, fds: list[int]) -> None:
    s = socket.socket(fileno=sock)
    try:
        n = s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
        _proto.write_all(sock, data[n:])
    finally:
        s.detach()


class Worker:
    """A persistent interpreter serving one session."""

    def __init__(self, session: str, pid: int, sock: int) -> None:
        self.session = session
        self.pid = pid
        self.sock = sock
        self.used = time.monotonic()
        self.executions = 0
        self.alive = True


class Spare:
    """A child forked ahead of the next execution: set up, warmed up and
    waiting on its channel for the program, so that neither the fork nor
    the copy-on-write faults of its first steps delay the execution."""

    def __init__(self, pid: int, out_r: int, err_r: int, chan: int) -> None:
        self.pid = pid
        self.out_r = out_r
        self.err_r = err_r
        self.chan = chan
        self.forked = time.monotonic()


class Run:
    """The zygote's state of one execution."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.id = job.get("id")
        self.timeout = float(job.get("timeout_ms") or 30000) / 1000.0
        self.limit = int(job.get("output_limit") or (1 << 20))
        self.deadline = time.monotonic() + self.timeout
        self.pid = 0
        self.worker: Worker | None = None
        self.out_r = -1
        self.err_r = -1
        self.chan = -1
        self.chan_reader = _proto.Reader()
        self.outbox = bytearray()
        # Output frames not yet written to the host (see _OUTPUT_DELAY).
        self.outq: list[bytes] = []
        self.outq_bytes = 0
        self.outq_since = 0.0
        self.eof = 0  # output pipes that reached end of file
        self.sent = 0
        self.truncated = False
        self.timed_out = False
        self.cancelled = False
        self.killed = False
        self.kill_time = 0.0
        self.done: dict[str, Any] | None = None
        self.status: int | None = None
        self.rusage: Any = None
        self.clean = True
        self.note = ""
        # A rehearsal (Zygote.rehearse) has no processes of its own.
        self.rehearsal = False


class Zygote:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.ctl_in = opts.ctl_in
        self.ctl_out = opts.ctl_out
        self.reader = _proto.Reader()
        self.inbox: list[dict[str, Any]] = []
        self.is_init = os.getpid() == 1
        self.workers: dict[str, Worker] = {}
        self.hardened = False
        self.frozen = False
        self.spare: Spare | None = None
        self.rehearsed = False
        self.last_end = 0.0
        self.preload = list(opts.preload)
        self.executions = 0
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    # host side

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
                self.inbox.append(_proto.decode_json(payload))
        return True

    def serve(self) -> None:
        try:
            self.loop()
        except HostGone:
            self.shutdown()

    def loop(self) -> None:
        self.send({"op": "ready", "pid": os.getpid(), "protocol": PROTOCOL,
                   "python": sys.version.split()[0], "init": self.is_init})
        poller = select.poll()
        poller.register(self.ctl_in, _POLLIN)
        while True:
            if not self.inbox:
                wait = self.idle_wait()
                if poller.poll(wait):
                    if not self.read_host():
                        self.shutdown()
                elif wait is not None:
                    self.idle_step()
                continue
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
            # Replies and cancels arriving while idle belong to an execution
            # that has already finished; they are dropped.

    def idle_wait(self) -> int | None:
        """How long (ms) the idle loop may block before its next piece of
        warm-up work; None when there is none left. A new spare waits a
        little after an execution: programs that come back to back are
        better served by forking on demand (with the program compiled before
        the fork) than by a spare whose warm-up competes with them."""
        if not self.hardened or not self.frozen:
            return 0
        if self.spare is None:
            due = self.last_end + _SPARE_DELAY
        elif not self.rehearsed:
            due = self.spare.forked + _REHEARSAL_DELAY
        else:
            return None
        return max(0, int((due - time.monotonic()) * 1000))

    def idle_step(self) -> None:
        """Do one piece of warm-up work: hardening first, then one preload,
        freezing the heap, and after each execution a spare and a
        rehearsal."""
        if not self.hardened:
            self.harden()
        elif self.preload:
            name = self.preload.pop(0)
            try:
                importlib.import_module(name)
            except Exception as e:
                print(f"cexec zygote: preload {name}: {e}", file=sys.stderr)
        elif not self.frozen:
            self.freeze()
        elif self.spare is None:
            self.prefork()
        else:
            self.rehearsed = True
            if self.spare.pid:
                self.rehearse(self.spare.pid)

    def freeze(self) -> None:
        """Move every object that exists now out of the collector's reach:
        a forked child's collections then neither spend time on the
        zygote's objects nor copy their pages."""
        gc.collect()
        gc.freeze()
        self.frozen = True

    def harden(self) -> None:
        if not self.hardened:
            _set_non_dumpable()
            self.hardened = True

    def shutdown(self) -> None:
        self.drop_spare()
        for worker in list(self.workers.values()):
            self.kill_worker(worker)
        os._exit(0)

    # executions

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
            if job.get("persistent"):
                self.start_persistent(run, job)
            elif not self.take_spare(run, job):
                self.start_child(run, job)
            self.pump(run)
            if self.ended_cleanly(run):
                # The program said how it ended and closed its output: report
                # now, and clean up while the host handles the result.
                self.close_fds(run)
                self.report(run)
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

    def keep(self) -> set[int]:
        """The processes a sweep spares: persistent workers and the spare."""
        keep = {w.pid for w in self.workers.values() if w.alive}
        if self.spare is not None:
            keep.add(self.spare.pid)
        return keep

    def prefork(self) -> None:
        """Fork the spare child for the next execution (see idle_wait).

        Import caches are not invalidated here: path finders notice new
        modules in /workspace by the directory's modification time, and
        invalidating them on every execution costs dozens of page copies."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        try:
            pid = os.fork()
        except OSError:
            for fd in (out_r, out_w, err_r, err_w, chan, child_chan):
                _close(fd)
            # No spare: executions fork for themselves. Retried after the next one.
            self.spare = Spare(0, -1, -1, -1)
            self.rehearsed = False
            return
        if pid == 0:
            self.enter_child(out_w, err_w, child_chan)
            _spare_main()
        for fd in (out_w, err_w, child_chan):
            os.close(fd)
        self.spare = Spare(pid, out_r, err_r, chan)
        self.rehearsed = False

    def rehearse(self, spare: int) -> None:
        """Take an execution's path through the zygote, with pipes standing
        in for the host and the child, while the spare waits.

        Forking the spare made every page of the zygote shared again, so
        the next execution would copy each page it writes on the way: about
        two hundred faults, half a millisecond between the host's frame and
        the result. Taking them now, while idle, keeps them off that path."""
        host_r, host_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        saved = (self.ctl_in, self.ctl_out, self.reader, self.inbox)
        run = None
        try:
            os.write(host_w, _proto.encode_json({"op": "exec", "id": "rehearsal", "code": "print(1+1)",
                                                 "timeout_ms": 1000, "output_limit": 1 << 20}))
            os.write(out_w, b"2\n")
            os.write(child_chan, _proto.encode_json({"op": "done", "exit_code": 0, "error": None,
                                                     "cpu_ms": 1, "max_rss": 1 << 20}))
            for fd in (out_w, err_w):
                os.close(fd)
            out_w = err_w = -1
            self.ctl_in, self.ctl_out, self.reader, self.inbox = host_r, host_w, _proto.Reader(), []
            self.read_host()
            job = self.inbox.pop()
            run = Run(job)
            run.rehearsal = True
            # The spare's pid: waiting for it (WNOHANG) is what an execution
            # does, and a rehearsal must not reap anything else.
            run.pid, run.out_r, run.err_r, run.chan = spare, out_r, err_r, chan
            out_r = err_r = chan = -1
            _proto.write_all(run.chan, _proto.encode_json({"op": "exec", "code": job["code"]}))
            self.pump(run)
            self.close_fds(run)
            self.report(run)
        except Exception as e:
            print(f"cexec zygote: rehearsal: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            self.ctl_in, self.ctl_out, self.reader, self.inbox = saved
            if run is not None:
                self.close_fds(run)
            for fd in (host_r, host_w, out_r, out_w, err_r, err_w, chan, child_chan):
                if fd >= 0:
                    _close(fd)
        if run is not None and run.status is not None:
            # The spare died meanwhile, and the rehearsal reaped it.
            self.drop_spare()

    def drop_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is None or spare.pid == 0:
            return
        for fd in (spare.out_r, spare.err_r, spare.chan):
            _close(fd)
        try:
            os.kill(spare.pid, signal.SIGKILL)
            os.waitpid(spare.pid, 0)
        except OSError:
            pass

    def take_spare(self, run: Run, job: dict[str, Any]) -> bool:
        """Hand the program to the spare child; False when there is none
        (or it died), and the caller forks instead."""
        spare, self.spare = self.spare, None
        if spare is None or spare.pid == 0:
            return False
        try:
            _proto.write_all(spare.chan, _proto.encode_json({"op": "exec", "code": job["code"]}))
        except OSError:
            self.spare = spare
            self.drop_spare()
            return False
        run.pid, run.out_r, run.err_r, run.chan = spare.pid, spare.out_r, spare.err_r, spare.chan
        return True

    def close_fds(self, run: Run) -> None:
        for fd in (run.out_r, run.err_r, run.chan):
            if fd >= 0:
                _close(fd)
        run.out_r = run.err_r = run.chan = -1

    def ended_cleanly(self, run: Run) -> bool:
        """The program reported its end and both output pipes are at end of
        file, so everything it printed has been relayed."""
        return run.done is not None and run.eof == 2 and not run.killed

    def clean_up(self, run: Run) -> None:
        """After an early report: make sure nothing of the program survives,
        and tell the host if that failed."""
        if run.worker is None:
            # It has nothing left to do but exit.
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except OSError:
                pass
            _wait_exit(run.pid, _KILL_GRACE)
            self.check_exit(run)
        if run.worker is None and run.status is None or not (self.none_started(run) or self.sweep(self.keep())):
            self.send({"op": "unclean", "id": run.id, "message": "some of the program's processes could not be killed"})

    def none_started(self, run: Run) -> bool:
        """Whether the sandbox has created no process or thread since the
        program's process, which is gone: then a sweep would find nothing.
        /proc/loadavg ends with the newest pid of the reader's pid
        namespace."""
        if not self.is_init or run.worker is not None:
            return False
        try:
            fd = os.open("/proc/loadavg", os.O_RDONLY)
            try:
                newest = int(os.read(fd, 256).split()[4])
            finally:
                os.close(fd)
        except (OSError, ValueError, IndexError):
            return False
        return newest == run.pid

    def start_child(self, run: Run, job: dict[str, Any]) -> None:
        code = str(job["code"])
        # Compiling here, where the compiler's memory is warm, rather than in
        # the child (whose first compile copies hundreds of pages) halves the
        # cost of a small program. Failures are left to the child to report.
        compiled = None
        if len(code) <= _PRECOMPILE_LIMIT:
            try:
                compiled = compile(code, "<cexec>", "exec", dont_inherit=True)
            except Exception:
                compiled = None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        run.out_r, run.err_r, run.chan = out_r, err_r, chan
        try:
            pid = os.fork()
        except OSError:
            for fd in (out_w, err_w, child_chan):
                _close(fd)
            raise
        if pid == 0:
            self.enter_child(out_w, err_w, child_chan)
            _run_child(code, compiled)
        run.pid = pid
        for fd in (out_w, err_w, child_chan):
            os.close(fd)

    def enter_child(self, out_w: int, err_w: int, chan: int) -> None:
        """Turn a freshly forked process into a clean program process: own
        session, default signals, fds 0-3 only, the sandbox's rlimits."""
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            # stdin is /dev/null: the zygote's own may be its control
            # channel (backends with only stdio use descriptors 0 and 1).
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(chan, 3, inheritable=False)
            os.closerange(4, 1 << 20)
            for name, value in self.opts.rlimits.items():
                res = _RLIMITS[name]
                hard = resource.getrlimit(res)[1]
                if hard != resource.RLIM_INFINITY:
                    value = min(value, hard)
                resource.setrlimit(res, (value, value))
        except BaseException as e:
            try:
                os.write(2, f"cexec: cannot start the program: {e}\n".encode())
            finally:
                os._exit(70)

    def start_persistent(self, run: Run, job: dict[str, Any]) -> None:
        session = str(job.get("session") or "")
        worker = self.workers.get(session)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        run.out_r, run.err_r, run.chan = out_r, err_r, chan
        try:
            for attempt in range(2):
                if worker is None or not worker.alive:
                    worker = self.spawn_worker(session)
                worker.used = time.monotonic()
                worker.executions += 1
                frame = _proto.encode_json({"op": "exec", "code": job["code"], "n": worker.executions})
                try:
                    _send_with_fds(worker.sock, frame, [out_w, err_w, child_chan])
                    break
                except OSError:
                    # The interpreter died since its last execution; its
                    # state is gone, so start a fresh one.
                    self.workers.pop(session, None)
                    self.kill_worker(worker)
                    worker = None
                    if attempt == 1:
                        raise
            assert worker is not None
            run.worker, run.pid = worker, worker.pid
        finally:
            for fd in (out_w, err_w, child_chan):
                os.close(fd)

    def spawn_worker(self, session: str) -> Worker:
        if len(self.workers) >= _MAX_WORKERS:
            oldest = min(self.workers.values(), key=lambda w: w.used)
            self.workers.pop(oldest.session, None)
            self.kill_worker(oldest)
        ours, theirs = _socketpair()
        try:
            pid = os.fork()
        except OSError:
            _close(ours)
            _close(theirs)
            raise
        if pid == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            self.enter_child(devnull, devnull, theirs)
            _worker_main(3)
        os.close(theirs)
        worker = Worker(session, pid, ours)
        self.workers[session] = worker
        return worker

    def kill_worker(self, worker: Worker) -> None:
        worker.alive = False
        _close(worker.sock)
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(worker.pid, 0)
        except OSError:
            pass

    def kill(self, run: Run) -> None:
        """Kill the execution's processes (for a persistent run, the worker
        and with it the session's state)."""
        if run.killed or run.pid == 0:
            return
        run.killed = True
        run.kill_time = time.monotonic()
        if run.rehearsal:
            return
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass
        if run.worker is not None:
            self.workers.pop(run.worker.session, None)
            run.worker.alive = False
            _close(run.worker.sock)

    def finished(self, run: Run) -> bool:
        if self.ended_cleanly(run):
            return True
        if run.worker is not None and not run.killed and run.done is not None:
            # The interpreter is done but something it started still holds
            # the output pipes: collect() kills it.
            return True
        return run.status is not None

    def pump(self, run: Run) -> None:
        """Relay output, host calls and replies until the execution ends."""
        os.set_blocking(run.chan, False)
        poller = select.poll()
        fds = {run.out_r, run.err_r, run.chan, self.ctl_in, self.wake_r}
        for fd in fds:
            poller.register(fd, _POLLIN)
        self.check_exit(run)
        while not self.finished(run):
            now = time.monotonic()
            if not run.killed and now >= run.deadline:
                run.timed_out = True
                self.kill(run)
            if run.killed and now - run.kill_time > _KILL_GRACE:
                run.clean = False
                run.note = "the program's processes did not die after SIGKILL"
                return
            wait = (run.kill_time + _KILL_GRACE) if run.killed else run.deadline
            if run.outq:
                wait = min(wait, run.outq_since + _OUTPUT_DELAY)
            for fd, _ in poller.poll(max(0, int((wait - now) * 1000)) + 1):
                if fd == run.out_r or fd == run.err_r:
                    if not self.relay_output(run, fd, run.out_r == fd):
                        poller.unregister(fd)
                        if run.truncated:
                            for other in (run.out_r, run.err_r):
                                if other in fds and other != fd:
                                    poller.unregister(other)
                                    fds.discard(other)
                        fds.discard(fd)
                elif fd == run.chan:
                    if not self.relay_channel(run, poller):
                        poller.unregister(fd)
                        fds.discard(fd)
                elif fd == self.ctl_in:
                    if not self.read_host():
                        self.kill(run)
                        self.shutdown()
                    self.handle_host_during(run, poller)
                elif fd == self.wake_r:
                    try:
                        os.read(self.wake_r, 512)
                    except BlockingIOError:
                        pass
                    self.check_exit(run)
            if run.outq and time.monotonic() - run.outq_since >= _OUTPUT_DELAY:
                self.flush_output(run)

    def check_exit(self, run: Run) -> None:
        if run.status is not None:
            return
        try:
            pid, status, rusage = os.wait4(run.pid, os.WNOHANG)
        except ChildProcessError:
            run.status = 0
            return
        if pid == run.pid:
            run.status, run.rusage = status, rusage
            if run.worker is not None:
                run.worker.alive = False
                self.workers.pop(run.worker.session, None)
                _close(run.worker.sock)

    def relay_output(self, run: Run, fd: int, stdout: bool) -> bool:
        """Forward one chunk; False when the pipe is finished with."""
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return True
        if not data:
            run.eof += 1
            return False
        room = run.limit - run.sent
        if len(data) > room:
            data = data[:room]
            run.truncated = True
        if data:
            run.sent += len(data)
            self.send_output(run, data, stdout)
        if run.truncated:
            self.kill(run)
            return False
        return True

    def send_output(self, run: Run, data: bytes, stdout: bool) -> None:
        """Queue output for the host (see _OUTPUT_DELAY)."""
        if not run.outq:
            run.outq_since = time.monotonic()
        run.outq.append(_proto.encode(_proto.KIND_STDOUT if stdout else _proto.KIND_STDERR, data))
        run.outq_bytes += len(data)
        if run.outq_bytes >= _OUTPUT_BATCH:
            self.flush_output(run)

    def flush_output(self, run: Run, then: bytes = b"") -> None:
        """Write the queued output, and then a frame, to the host at once."""
        if run.outq:
            then = b"".join(run.outq) + then
            run.outq.clear()
            run.outq_bytes = 0
        if then:
            self.write(then)

    def relay_channel(self, run: Run, poller: select.poll) -> bool:
        """Handle what the program sent on its channel, and flush replies."""
        if run.outbox:
            try:
                n = os.write(run.chan, run.outbox)
                del run.outbox[:n]
            except BlockingIOError:
                pass
            except OSError:
                run.outbox.clear()
            if not run.outbox:
                poller.modify(run.chan, _POLLIN)
        try:
            data = os.read(run.chan, _READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        run.chan_reader.feed(data)
        try:
            for kind, payload in run.chan_reader.frames():
                if kind != _proto.KIND_JSON:
                    continue
                msg = _proto.decode_json(payload)
                op = msg.get("op")
                call_id = msg.get("id")
                if op == "call" and isinstance(call_id, int) and isinstance(msg.get("method"), str):
                    # What the program printed before the call goes first.
                    self.flush_output(run, _proto.encode_json(
                        {"op": "call", "id": call_id, "method": msg["method"], "params": msg.get("params")}))
                elif op == "done" and run.done is None:
                    run.done = msg
        except _proto.ProtocolError:
            # The program wrote garbage on its own channel; it loses host
            # calls, nothing else.
            return False
        return True

    def handle_host_during(self, run: Run, poller: select.poll) -> None:
        keep: list[dict[str, Any]] = []
        for msg in self.inbox:
            op = msg.get("op")
            if op == "reply":
                if msg.get("exec") == run.id and run.chan >= 0 and not run.killed:
                    run.outbox += _proto.encode_json(msg)
                    try:
                        poller.modify(run.chan, _POLLIN | select.POLLOUT)
                    except (KeyError, FileNotFoundError):
                        pass
            elif op == "cancel":
                if msg.get("id") == run.id:
                    run.cancelled = True
                    self.kill(run)
            elif op == "ping":
                self.send({"op": "pong", "id": msg.get("id"), "rss": _rss_bytes(), "workers": len(self.workers),
                           "executions": self.executions, "busy": True})
            elif op == "exec":
                self.send({"op": "result", "id": msg.get("id"), "exit_code": 1, "clean": True,
                           "error": {"type": "RunnerError", "message": "the sandbox is busy with another execution"}})
            else:
                keep.append(msg)
        self.inbox = keep

    def drain(self, run: Run, until_eof: bool) -> None:
        """Read what is left in the output pipes and the channel."""
        for fd in (run.out_r, run.err_r):
            if fd < 0 or run.truncated:
                continue
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, _READ_SIZE)
                except BlockingIOError:
                    break
                if not data:
                    break
                room = run.limit - run.sent
                if len(data) > room:
                    data = data[:room]
                    run.truncated = True
                if data:
                    run.sent += len(data)
                    self.send_output(run, data, fd == run.out_r)
                if run.truncated:
                    break
            if until_eof:
                _close(fd)
                if fd == run.out_r:
                    run.out_r = -1
                else:
                    run.err_r = -1
        if run.chan >= 0:
            while True:
                try:
                    data = os.read(run.chan, _READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                run.chan_reader.feed(data)
            try:
                for kind, payload in run.chan_reader.frames():
                    if kind == _proto.KIND_JSON and run.done is None:
                        msg = _proto.decode_json(payload)
                        if msg.get("op") == "done":
                            run.done = msg
            except _proto.ProtocolError:
                pass

    def collect(self, run: Run) -> None:
        """After the program ended: take its remaining output, then make sure
        none of its processes survive."""
        self.drain(run, until_eof=False)
        if run.worker is None or run.killed:
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except OSError:
                pass
        keep = self.keep()
        if not self.sweep(keep):
            run.clean = False
            run.note = "some of the program's processes could not be killed"
        self.drain(run, until_eof=run.clean)

    def sweep(self, keep: set[int]) -> bool:
        """Kill every process of the sandbox but the zygote and the
        persistent workers. Only done as the pid namespace's init, where
        every other process is known to belong to the program."""
        if not self.is_init:
            return True
        for attempt in range(400):
            self.reap()
            victims = [pid for pid in _live_pids() if pid != 1 and pid not in keep]
            if not victims:
                # What died since the reap above is a zombie now, and the
                # child of the zygote (the init that inherits orphans):
                # reaped, it leaves no pid behind.
                self.reap()
                return True
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.0002 if attempt < 20 else 0.005)
        return False

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for worker in list(self.workers.values()):
                if worker.pid == pid:
                    worker.alive = False
                    self.workers.pop(worker.session, None)
                    _close(worker.sock)
            if self.spare is not None and self.spare.pid == pid:
                spare, self.spare = self.spare, None
                for fd in (spare.out_r, spare.err_r, spare.chan):
                    _close(fd)

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
        msg["exit_code"] = exit_code
        msg["signal"] = sig
        error = done.get("error")
        if run.timed_out:
            error = {"type": "Timeout", "message": f"the program ran longer than its {run.timeout:g}s limit and was killed"}
        elif run.cancelled:
            error = {"type": "Killed", "message": "the execution was cancelled by the host"}
        elif run.truncated:
            error = {"type": "OutputLimit", "message": f"the program's output exceeded {run.limit} bytes and was cut off"}
        elif sig and not run.killed:
            name = _SIGNAL_NAMES.get(sig) or f"signal {sig} ({signal.strsignal(sig)})"
            hint = " (possibly out of memory)" if sig == signal.SIGKILL else ""
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


def _wait_exit(pid: int, timeout: float) -> None:
    """Wait until process pid (a child) has exited, at most timeout
    seconds, without reaping it."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            p = select.poll()
            p.register(fd, select.POLLIN)
            p.poll(int(timeout * 1000))
        finally:
            os.close(fd)
        return
    # No pidfd (old kernel): poll its state.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.0005)


def _live_pids() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The state follows the command name, which may contain spaces.
        if stat[stat.rfind(b")") + 2:][:1] != b"Z":
            pids.append(int(name))
    return pids


def _flush_std() -> None:
    seen: list[object] = []
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if f is None or any(f is s for s in seen):
            continue
        seen.append(f)
        try:
            f.flush()
        except Exception:
            pass


def _exit_status(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _describe(e: BaseException, filename: str, code: str) -> dict[str, str]:
    # Imported here: only failing programs need them.
    import linecache
    import traceback

    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        message = str(e)
    except Exception:
        message = f"<unprintable {type(e).__name__}>"
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code is _run_program.__code__:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(e), e, tb))
    except Exception:
        text = f"{type(e).__name__}: {message}\n"
    return {"type": type(e).__name__, "message": message[:_MAX_MESSAGE], "traceback": text[-_MAX_TRACEBACK:]}


def _run_program(code: str, module: types.ModuleType, filename: str, compiled: types.CodeType | None = None) -> dict[str, Any]:
    """Run code as __main__ and describe how it ended."""
    sys.modules["__main__"] = module
    exit_code = 0
    error = None
    try:
        if compiled is None:
            compiled = compile(code, filename, "exec", dont_inherit=True)
        exec(compiled, module.__dict__)
    except SystemExit as e:
        exit_code = _exit_status(e)
    except BaseException as e:
        exit_code = 1
        error = _describe(e, filename, code)
    return {"op": "done", "exit_code": exit_code, "error": error}


def _new_main() -> types.ModuleType:
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    return module


def _warm_compile() -> None:
    warm = compile("_x = [i * 2 for i in range(4)]\n_y = {'k': _x}\n", "<warm-up>", "exec", dont_inherit=True)
    exec(warm, _new_main().__dict__)


def _warm_print() -> None:
    """Run a program that prints, as an execution does, with stdout on
    /dev/null meanwhile."""
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        job = _proto.decode_json(b'{"op":"exec","code":"print(1+1)"}')
        _run_program(str(job["code"]), _new_main(), "<cexec>")
        _flush_std()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _warm_done() -> None:
    """What _run_child does after the program."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading.enumerate()
    import atexit

    atexit._ncallbacks()
    done: dict[str, Any] = {"op": "done", "exit_code": 0, "error": None}
    _add_usage(done)
    _proto.encode_json(done)


_WARM_UP = (
    _warm_print,
    _warm_compile,
    _warm_done,
)


def _spare_main() -> None:
    """Body of a spare child: warm up, wait for the program, run it."""
    try:
        chan = cexec._Channel(3)
        # Go through what every execution goes through (decoding the job,
        # compiling, running and printing in a new module, flushing, usage,
        # encoding the done message), so that its copy-on-write faults
        # happen now rather than while the program is waited for; stop as
        # soon as the program arrives.
        pending = select.poll()
        pending.register(3, select.POLLIN)
        for step in _WARM_UP:
            if pending.poll(0):
                break
            step()
        job = _proto.read_frame(3, _proto.Reader())
    except BaseException:
        os._exit(70)
    if job is None:
        os._exit(0)  # the zygote is gone or dropped this spare
    try:
        msg = _proto.decode_json(job[1])
        code = str(msg["code"])
    except Exception:
        os._exit(71)
    _run_child(code, None, chan)


def _run_child(code: str, compiled: types.CodeType | None, chan: cexec._Channel | None = None) -> None:
    """Body of a forked execution: run the program once and exit."""
    pid = os.getpid()
    try:
        if chan is None:
            chan = cexec._Channel(3)
        cexec._channel = chan
        sys.argv = ["-c"]
        done = _run_program(code, _new_main(), "<cexec>", compiled)
        if os.getpid() != pid:
            # The program forked and this copy fell off the end.
            _flush_std()
            os._exit(int(done["exit_code"]))
        threading = sys.modules.get("threading")
        if threading is not None:
            # As at interpreter exit, wait for the program's threads.
            for t in threading.enumerate():
                if t is not threading.main_thread() and not t.daemon:
                    t.join()
        try:
            import atexit

            if atexit._ncallbacks():
                atexit._run_exitfuncs()
        except BaseException:
            pass
        _flush_std()
        # Closing the output before saying done lets the zygote report as
        # soon as it has relayed everything, without waiting for this
        # process to be torn down.
        os.close(1)
        os.close(2)
        _add_usage(done)
        try:
            chan.send(done, chan.result_json)
        except OSError:
            pass  # the program closed its channel; the exit status still counts
        os._exit(int(done["exit_code"]))
    except BaseException:
        os._exit(70)


def _add_usage(done: dict[str, Any]) -> None:
    """Put the CPU time and peak memory of this process and its waited-for
    children into a done message."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    done["cpu_ms"] = int((me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime) * 1000)
    done["max_rss"] = int(max(me.ru_maxrss, kids.ru_maxrss)) * 1024


def _recv_job(sock: int, reader: _proto.Reader, fds: list[int]) -> dict[str, Any] | None:
    """Read one job frame from the zygote, collecting passed descriptors."""
    s = socket.socket(fileno=sock)
    try:
        while True:
            for kind, payload in reader.frames():
                if kind == _proto.KIND_JSON:
                    return _proto.decode_json(payload)
            data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(16 * 4))
            for level, typ, blob in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    n = len(blob) // 4
                    fds.extend(struct.unpack(f"{n}i", blob[: n * 4]))
            if not data:
                return None
            reader.feed(data)
    finally:
        s.detach()


def _worker_main(sock: int) -> None:
    """Body of a persistent interpreter: run jobs with shared globals."""
    try:
        module = _new_main()
        reader = _proto.Reader()
        devnull = os.open(os.devnull, os.O_RDWR)
        sys.argv = ["-c"]
        while True:
            fds: list[int] = []
            job = _recv_job(sock, reader, fds)
            if job is None:
                os._exit(0)
            if len(fds) != 3:
                os._exit(71)
            out_w, err_w, chan_fd = fds
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_w)
            os.close(err_w)
            chan = cexec._Channel(chan_fd)
            cexec._channel = chan
            importlib.invalidate_caches()
            code, filename = str(job.get("code")), f"<cexec:{job.get('n')}>"
            # Functions from earlier executions may fail later: keep every
            # execution's source for their tracebacks.
            import linecache

            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            before = resource.getrusage(resource.RUSAGE_SELF)
            done = _run_program(code, module, filename)
            _flush_std()
            after = resource.getrusage(resource.RUSAGE_SELF)
            done["cpu_ms"] = int((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
            done["max_rss"] = int(after.ru_maxrss) * 1024
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            try:
                chan.send(done, chan.result_json)
            except OSError:
                pass
            chan.close()
            cexec._channel = None
    except BaseException:
        os._exit(70)
