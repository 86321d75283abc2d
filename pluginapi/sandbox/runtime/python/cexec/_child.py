"""The program's process: how the zygote forks it and makes it a clean
process (Children), and what runs in it: one program (_run_child), or a
spare that waits for its program (_spare_main)."""

from __future__ import annotations

import builtins
import os
import resource
import sys

import cexec
from cexec import _proto
from cexec._osutil import _close, _socketpair
from cexec._parts import Part

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import signal
    from typing import Any
else:
    # The C module behind signal: the Python wrapper builds
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal
if TYPE_CHECKING:
    import types

    from cexec._relay import Run

# types.ModuleType, without importing types at sandbox start.
_ModuleType = type(sys)

# Largest exception message and traceback reported, in characters.
_MAX_MESSAGE = 64 << 10
_MAX_TRACEBACK = 256 << 10

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


class Children(Part):
    """The zygote's side of a forked execution."""

    def start_child(self, run: Run, job: dict[str, Any]) -> None:
        if self.forker is not None:
            # A program that came before its spare was ready: the fork
            # server forks one now, so that the zygote does not fork.
            self.prefork()
            if self.take_spare(run, job):
                return
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
            _run_child(code, compiled, host_token=job.get("host_token"))
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
    _hide_internal_frames(tb)
    _note_no_network(e)
    try:
        text = "".join(traceback.format_exception(type(e), e, tb))
    except Exception:
        text = f"{type(e).__name__}: {message}\n"
    return {"type": type(e).__name__, "message": message[:_MAX_MESSAGE], "traceback": text[-_MAX_TRACEBACK:]}


# The first line of a generated stub (core/catalog/stubgen).
_STUB_MARKER = "# Code generated by cexec"


def _internal(frame: types.FrameType) -> bool:
    """Whether a frame is the runtime's or a generated stub's: plumbing
    between the program's call and the error the host reported."""
    import linecache

    filename = frame.f_code.co_filename
    if os.path.dirname(filename) == os.path.dirname(cexec.__file__):
        return True
    return linecache.getline(filename, 1).startswith(_STUB_MARKER)


def _hide_internal_frames(tb: types.TracebackType | None) -> None:
    """Cut the traceback after the program's last frame when only the
    runtime's and the stubs' frames follow it: the program's own line is
    what the reader can change."""
    last = None
    while tb is not None:
        if not _internal(tb.tb_frame):
            last = tb
        tb = tb.tb_next
    if last is not None:
        last.tb_next = None


def _note_no_network(e: BaseException) -> None:
    """Say why a connection failed when the sandbox has no network: the
    errors (name resolution, unreachable network, a refused socket) do not
    say it."""
    if any(_network_error(x) for x in _causes(e)) and not _has_network():
        e.add_note("cexec: the sandbox has no network access; call tools through servers.<name> instead")


def _causes(e: BaseException) -> list[BaseException]:
    """e and the exceptions behind it: causes, contexts and the reason a
    urllib error wraps."""
    out: list[BaseException] = []
    todo: list[object] = [e]
    while todo and len(out) < 8:
        x = todo.pop()
        if isinstance(x, BaseException) and x not in out:
            out.append(x)
            todo.extend((x.__cause__, x.__context__, getattr(x, "reason", None)))
    return out


def _network_error(x: BaseException) -> bool:
    import errno
    import socket

    if isinstance(x, socket.gaierror):
        return True
    if not isinstance(x, OSError):
        return False
    if x.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL):
        return True
    # A sandbox may refuse the socket itself; other permission errors are
    # about files.
    tb = x.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return x.errno in (errno.EPERM, errno.EACCES) and tb is not None and tb.tb_frame.f_code.co_filename == socket.__file__


def _has_network() -> bool:
    """Whether the process has a route out. Connecting a UDP socket sends
    nothing: it only looks the route up."""
    import socket

    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        s.connect(("192.0.2.1", 9))
        return True
    except OSError:
        return False
    finally:
        s.close()


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
    module = _ModuleType("__main__")
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


def warm_zygote() -> None:
    """Go once through what every execution goes through (decoding the
    job, compiling, running and printing in a new module, flushing, usage,
    encoding the done message) in the zygote itself, before it freezes its
    heap: what a first run initializes (caches of types and code, the
    compiler's state) is then inherited by every child instead of written,
    and so copied, in each: about 70 fewer copy-on-write faults per
    execution."""
    try:
        for step in _WARM_UP:
            step()
    finally:
        if _BOOT_MAIN is not None:
            sys.modules["__main__"] = _BOOT_MAIN


def _spare_main() -> None:
    """Body of a spare child: wait for the program, run it. The spare does
    no warm-up of its own while it waits: running the steps of
    warm_zygote again moved some copy-on-write faults off the execution's
    path (0.04 ms) but cost 0.2 ms of CPU per execution."""
    try:
        chan = cexec._Channel(3)
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
    _run_child(code, None, chan, msg.get("host_token"))


def _run_child(code: str, compiled: types.CodeType | None, chan: cexec._Channel | None = None,
               host_token: Any = None) -> None:
    """Body of a forked execution: run the program once and exit."""
    pid = os.getpid()
    try:
        if chan is None:
            chan = cexec._Channel(3)
        cexec._begin(chan, host_token)
        sys.argv = ["-c"]
        done = _run_program(code, _new_main(), "<cexec>", compiled)
        if os.getpid() != pid:
            # The program forked and this copy fell off the end.
            _flush_std()
            os._exit(int(done["exit_code"]))
        _wind_up()
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


def _wind_up() -> None:
    """What the interpreter does at exit, once a program has ended: wait
    for its threads (daemon threads aside), run its atexit callbacks,
    flush its output."""
    threading = sys.modules.get("threading")
    if threading is not None:
        for t in threading.enumerate():
            if t is not threading.main_thread() and not t.daemon:
                t.join()
    try:
        import atexit

        if atexit._ncallbacks():
            atexit._run_exitfuncs()
            atexit._clear()
    except BaseException:
        pass
    _flush_std()


def _add_usage(done: dict[str, Any]) -> None:
    """Put the CPU time and peak memory of this process and its waited-for
    children into a done message."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    done["cpu_ms"] = int((me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime) * 1000)
    done["max_rss"] = int(max(me.ru_maxrss, kids.ru_maxrss)) * 1024
