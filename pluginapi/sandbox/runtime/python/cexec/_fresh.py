"""Fresh globals in a reused interpreter: what a session's interpreter puts
back after each execution that asked for new globals (fresh_globals), so
that the next one starts as a forked child would, but for the standard
library and site-packages modules imported meanwhile, which stay loaded
(that is the point: no fork, no import again).

What cannot be put back makes the interpreter retire: the zygote ends it
after the report, and the session's next execution gets a new one."""

from __future__ import annotations

import builtins
import gc
import os
import resource
import sys

from cexec._osutil import _rss_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any
else:
    import _signal as signal

# An interpreter whose resident memory grew this much since it started
# retires: what programs leave in module caches is not theirs to keep.
_MAX_GROWTH = 64 << 20

_RLIMITS = (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE,
            resource.RLIMIT_CPU, resource.RLIMIT_STACK, resource.RLIMIT_CORE)


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


class Baseline:
    """The interpreter's state before its first execution."""

    def __init__(self, stable_roots: list[str], ignore: set[int]) -> None:
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.path = list(sys.path)
        self.argv = list(sys.argv)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.signals: dict[int, Any] = {}
        for sig in signal.valid_signals():
            if sig in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                self.signals[sig] = signal.getsignal(sig)
            except (OSError, ValueError):
                pass
        self.rlimits = {r: resource.getrlimit(r) for r in _RLIMITS}
        # ignore: the execution's own descriptors, closed after it.
        self.fds = _open_fds() - ignore
        self.modules = set(sys.modules)
        self.builtins = dict(builtins.__dict__)
        self.rss = _rss_bytes()
        self.std = (sys.stdin, sys.stdout, sys.stderr)
        self.hooks = (sys.displayhook, sys.excepthook, sys.breakpointhook, sys.unraisablehook)
        self.recursion = sys.getrecursionlimit()
        self.gc = (gc.isenabled(), gc.get_threshold())
        self.sigmask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        # An audit hook cannot be removed: one a program adds makes the
        # interpreter retire, and this one sees it added.
        self.audit_hooked = False
        sys.addaudithook(self._audit)
        # Modules loaded from here do not change while the sandbox lives.
        self.roots = tuple(os.path.join(os.path.realpath(r), "") for r in stable_roots if r)

    def _audit(self, event: str, _args: tuple[Any, ...]) -> None:
        if event == "sys.addaudithook":
            self.audit_hooked = True

    def stable(self, module: object) -> bool:
        """Whether a module may stay loaded for later executions: built in,
        or loaded from the standard library or site-packages. Modules from
        the workspace, /tmp or the tool stubs may change between
        executions, and a stale one would hide the change."""
        f = getattr(module, "__file__", None)
        if not f:
            spec = getattr(module, "__spec__", None)
            # Built-in and frozen modules have no file; namespace packages
            # list their directories in submodule_search_locations.
            locs = list(getattr(spec, "submodule_search_locations", None) or [])
            return all(self.under_roots(p) for p in locs)
        return self.under_roots(str(f))

    def under_roots(self, path: str) -> bool:
        return path.startswith(self.roots) or os.path.realpath(path).startswith(self.roots)

    def reset(self, ignore: set[int]) -> str:
        """Put back what the last execution changed; why the interpreter
        must retire instead, or ""."""
        why = ""
        sys.last_type = sys.last_value = sys.last_traceback = None
        threading = sys.modules.get("threading")
        if threading is not None and threading.active_count() > 1:
            why = "the program left threads running"
        for name in list(sys.modules):
            if name in self.modules:
                continue
            if self.stable(sys.modules[name]):
                # Checked once: a module that stays is part of the baseline.
                self.modules.add(name)
            else:
                del sys.modules[name]
        b = builtins.__dict__
        if b != self.builtins:
            b.clear()
            b.update(self.builtins)
        sys.stdin, sys.stdout, sys.stderr = self.std
        sys.displayhook, sys.excepthook, sys.breakpointhook, sys.unraisablehook = self.hooks
        sys.setrecursionlimit(self.recursion)
        sys.settrace(None)
        sys.setprofile(None)
        if self.gc[0]:
            gc.enable()
        gc.set_threshold(*self.gc[1])
        # A timer a program set would fire in a later one, killing it.
        for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            signal.setitimer(timer, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.sigmask)
        if self.audit_hooked:
            why = why or "the program added an audit hook"
        sys.path[:] = self.path
        sys.argv[:] = self.argv
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        os.umask(self.umask)
        try:
            os.chdir(self.cwd)
        except OSError:
            why = why or "its working directory is gone"
        for sig, handler in self.signals.items():
            try:
                if signal.getsignal(sig) is not handler:
                    signal.signal(sig, handler)
            except (OSError, ValueError, TypeError):
                why = why or f"signal {sig} cannot be restored"
        for r, (soft, hard) in self.rlimits.items():
            now = resource.getrlimit(r)
            if now == (soft, hard):
                continue
            if now[1] != hard:
                why = why or "the program lowered a hard resource limit"
                continue
            resource.setrlimit(r, (soft, hard))
        if _open_fds() - self.fds - ignore:
            # Objects in reference cycles (classes, say) close their files
            # only when collected.
            gc.collect()
            if _open_fds() - self.fds - ignore:
                why = why or "the program left files open"
        if _rss_bytes() - self.rss > _MAX_GROWTH:
            why = why or "its memory grew by more than 64 MiB"
        return why
