"""What the zygote does while idle so that executions find it warm:
hardening, preloading, freezing the heap, forking a spare child ahead of
the next execution and rehearsing an execution's path."""

from __future__ import annotations

import gc
import os
import sys
import time

from cexec import _proto
from cexec._child import _spare_main, warm_zygote
from cexec._osutil import _close, _socketpair
from cexec._parts import Part
from cexec._relay import Run

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import signal
    from typing import Any
else:
    # The C module behind signal: the Python wrapper builds
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal

# How long a new zygote waits after reporting ready, or after an execution
# that came before its warm-up, before it warms up: a sandbox created for
# one execution gets its program right away, runs it without imports of
# preloads in its way, and is destroyed before it spends the CPU on them
# (about 8 ms of it, which the next new sandbox would compete with).
_START_DELAY = 0.01
# How long a spare must have waited before the zygote rehearses (see
# Zygote.rehearse). Programs that come back to back leave no idle CPU for
# it; the pauses of an agent between its turns do.
_REHEARSAL_DELAY = 0.02


class Spare:
    """A child forked ahead of the next execution: set up and waiting on
    its channel for the program, so that neither the fork nor the
    copy-on-write faults of its first steps delay the execution."""

    def __init__(self, pid: int, out_r: int, err_r: int, chan: int, by_server: bool = False) -> None:
        self.pid = pid
        self.out_r = out_r
        self.err_r = err_r
        self.chan = chan
        self.forked = time.monotonic()
        # Forked by the fork server (see _forker), not the zygote.
        self.by_server = by_server


class Warmup(Part):
    """The zygote's idle work."""

    def idle_wait(self) -> int | None:
        """How long (ms) the idle loop may block before its next piece of
        warm-up work; None when there is none left. The spare is forked as
        soon as an execution is over: the next execution would pay for the
        fork anyway, and a pool's sandboxes taking programs in turn then
        find their spares ready."""
        if not self.hardened or not self.frozen:
            since = self.last_end if self.executions else self.ready_at
            return max(0, int((since + _START_DELAY - time.monotonic()) * 1000))
        if not self.forks:
            return None
        if self.spare is None:
            return 0
        if self.rehearsed:
            return None
        return max(0, int((self.spare.forked + _REHEARSAL_DELAY - time.monotonic()) * 1000))

    def idle_step(self) -> None:
        """Do one piece of warm-up work: hardening first, then one preload,
        freezing the heap, and after each execution a spare and a
        rehearsal."""
        if not self.hardened:
            self.harden()
        elif self.preload:
            name = self.preload.pop(0)
            try:
                import importlib  # here, in idle time, rather than at start

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

    def interpreters_only(self) -> None:
        """An execution with fresh globals: the host runs this sandbox's
        executions in sessions' interpreters (sandbox.session_interpreter),
        so a spare child and the fork server, which serve forked executions
        alone, would only hold memory. Drop them; a forked execution that
        comes all the same is forked by the zygote itself."""
        if not self.forks:
            return
        self.forks = False
        self.drop_spare()
        self.drop_forker()

    def freeze(self) -> None:
        """Move every object that exists now out of the collector's reach:
        a forked child's collections then neither spend time on the
        zygote's objects nor copy their pages."""
        try:
            warm_zygote()
        except Exception as e:
            print(f"cexec zygote: warm-up: {type(e).__name__}: {e}", file=sys.stderr)
        gc.collect()
        gc.freeze()
        self.frozen = True

    def harden(self) -> None:
        if not self.hardened:
            if not _non_dumpable_since_exec():
                _set_non_dumpable()
            self.hardened = True

    def prefork(self) -> None:
        """Fork the spare child for the next execution (see idle_wait).

        Import caches are not invalidated here: path finders notice new
        modules in /workspace by the directory's modification time, and
        invalidating them on every execution costs dozens of page copies."""
        if self.forker is None and not self.forker_failed and self.frozen:
            self.start_forker()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        chan, child_chan = _socketpair()
        pid = self.fork_spare_via_server(out_w, err_w, child_chan)
        if pid:
            for fd in (out_w, err_w, child_chan):
                os.close(fd)
            self.spare = Spare(pid, out_r, err_r, chan, by_server=True)
            # The zygote did not fork: its pages stay its own, and there
            # is nothing to rehearse.
            self.rehearsed = True
            return
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
            _proto.write_all(run.chan, _proto.encode_json({"op": "exec", "code": job["code"], "host_token": job.get("host_token")}))
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
            _proto.write_all(spare.chan, _proto.encode_json({"op": "exec", "code": job["code"], "host_token": job.get("host_token")}))
        except OSError:
            self.spare = spare
            self.drop_spare()
            return False
        run.pid, run.out_r, run.err_r, run.chan = spare.pid, spare.out_r, spare.err_r, spare.chan
        run.by_server = spare.by_server
        return True


def _non_dumpable_since_exec() -> bool:
    """Whether the kernel made this process non-dumpable when it started:
    it does for an executable the process may not read (a backend may bind
    an execute-only interpreter), unless fs.suid_dumpable is 1. Two system
    calls, where _set_non_dumpable imports _ctypes."""
    try:
        os.close(os.open("/proc/self/exe", os.O_RDONLY))
        return False
    except PermissionError:
        pass
    except OSError:
        return False
    try:
        fd = os.open("/proc/sys/fs/suid_dumpable", os.O_RDONLY)
        try:
            return os.read(fd, 16).strip() in (b"0", b"2")
        finally:
            os.close(fd)
    except OSError:
        return False


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
