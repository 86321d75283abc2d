"""Making sure nothing of a program survives its execution: killing its
processes, and as the pid namespace's init sweeping every process that
is neither the zygote nor one it keeps."""

from __future__ import annotations

import os
import select
import time

from cexec._osutil import _close
from cexec._parts import Part

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    # The C module behind signal: the Python wrapper builds
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal
if TYPE_CHECKING:
    from cexec._relay import Run

# How long a killed child may take to disappear before the zygote gives up
# and reports the sandbox as unclean.
_KILL_GRACE = 2.0


class Sweeper(Part):
    """The zygote's clean-up after an execution."""

    def keep(self) -> set[int]:
        """The processes a sweep spares: persistent workers and the spare."""
        keep = {w.pid for w in self.workers.values() if w.alive}
        if self.spare is not None:
            keep.add(self.spare.pid)
        if self.forker is not None:
            keep.add(self.forker.pid)
        return keep

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
            # A fork server's child: its report follows the exit.
            self.forked_exit(run, _KILL_GRACE)
            self.check_exit(run)
        if run.worker is None and run.status is None and not run.orphaned or not (self.none_started(run) or self.sweep(self.keep())):
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
        persistent workers. Only done as the pid namespace's init (or where
        the namespace is the zygote's, see --sweep-namespace), where every
        other process is known to belong to the program."""
        if not self.is_init:
            return True
        me = os.getpid()
        for attempt in range(400):
            self.reap()
            victims = [pid for pid in _live_pids() if pid != 1 and pid != me and pid not in keep]
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
            if self.forker is not None and self.forker.pid == pid:
                self.drop_forker(reaped=True)
            for worker in list(self.workers.values()):
                if worker.pid == pid:
                    worker.alive = False
                    self.workers.pop(worker.session, None)
                    _close(worker.sock)
            if self.spare is not None and self.spare.pid == pid:
                spare, self.spare = self.spare, None
                for fd in (spare.out_r, spare.err_r, spare.chan):
                    _close(fd)


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
