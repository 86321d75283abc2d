"""The forker: a copy of the warm zygote that forks the spares, so that
the zygote itself never forks again.

Why: after a fork every page is shared, and each page the parent writes
is then copied. The zygote relays every execution (reads its frame,
hands it to the spare, relays output, reports), writing some 170 pages
while a child shares them: 170 copy-on-write faults per execution, most of
them between the host's frame and the result. The forker runs almost no
Python between forks: it reads one byte, forks, and reaps.

Each spare makes its own pipes and channel, passes the zygote's ends to
the zygote over a datagram socket with its pid, and waits for its program.
The forker reports every exit (pid, wait status, CPU, peak memory) as a
fixed-size record on a pipe. The forker is not pid 1, so a program may
signal it: the zygote resumes it before each request (SIGCONT), and when a
spare does not come in time, or the forker is gone, forks for itself until
a new forker is started after the next execution."""

from __future__ import annotations

import os
import select
import struct
import time

from cexec._child import _spare_main
from cexec._osutil import _POLLIN, _close, _send_with_fds
from cexec._parts import Part
from cexec._warmup import Spare

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import socket
    from typing import NoReturn

    from cexec._relay import Run
else:
    # The C modules behind signal and socket: the Python wrappers build
    # enums that cost an idle sandbox about a megabyte.
    import _signal as signal
    import _socket as socket

# An exit record: pid, wait status, CPU milliseconds, peak memory in KiB.
_EXIT = struct.Struct("=iiii")
# A spare's hello: its pid (with its three descriptors attached).
_HELLO = struct.Struct("=i")


class Forker:
    """The zygote's handle on its forker."""

    def __init__(self, pid: int, requests: int, exits: int, spares: int) -> None:
        self.pid = pid
        self.requests = requests  # the zygote writes a byte per spare wanted
        self.exits_fd = exits  # exit records
        self.spares = spares  # spares' hellos
        self.pending = 0.0  # when the spare not yet come was asked for
        self.exits: dict[int, tuple[int, int, int]] = {}
        self.partial = b""


class ForkerGone(Exception):
    """The forker died."""


class Forking(Part):
    """The zygote's side of the forker."""

    def wants_forker(self) -> bool:
        """Whether to start a forker: none runs, and none was tried since
        the last execution (one that failed or died is tried again after
        the next)."""
        return self.forker is None and self.forker_tried != self.executions

    def start_forker(self) -> None:
        """Fork the forker from the warm, frozen zygote."""
        self.forker_tried = self.executions
        req_r, req_w = os.pipe()
        exit_r, exit_w = os.pipe()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spares, hand = a.detach(), b.detach()
        try:
            pid = os.fork()
        except OSError:
            for fd in (req_r, req_w, exit_r, exit_w, spares, hand):
                _close(fd)
            return
        if pid == 0:
            self.forker_main(req_r, exit_w, hand)
        for fd in (req_r, exit_w, hand):
            os.close(fd)
        for fd in (exit_r, spares):
            os.set_blocking(fd, False)
        self.forker = Forker(pid, req_w, exit_r, spares)

    def drop_forker(self) -> None:
        forker, self.forker = self.forker, None
        if forker is None:
            return
        for fd in (forker.requests, forker.exits_fd, forker.spares):
            _close(fd)
        try:
            os.kill(forker.pid, signal.SIGKILL)
            os.waitpid(forker.pid, 0)
        except OSError:
            pass

    def ask_spare(self) -> bool:
        """Ask the forker for a spare (it arrives on forker.spares); False
        when there is no forker to ask."""
        forker = self.forker
        if forker is None:
            return False
        if forker.pending:
            return True
        try:
            os.kill(forker.pid, signal.SIGCONT)  # a program may have stopped it
            os.write(forker.requests, b"s")
        except OSError:
            self.drop_forker()
            return False
        forker.pending = time.monotonic()
        return True

    def take_forker_news(self, wait: float = 0.0) -> None:
        """Take the spare and the exit records the forker's side sent,
        waiting at most wait for the spare asked for; drop the forker when
        it is gone or the spare does not come."""
        forker = self.forker
        if forker is None:
            return
        try:
            if wait > 0 and forker.pending and self.spare is None:
                p = select.poll()
                p.register(forker.spares, _POLLIN)
                p.register(forker.exits_fd, _POLLIN)
                deadline = time.monotonic() + wait
                while forker.pending and self.spare is None:
                    left = deadline - time.monotonic()
                    if left <= 0 or not p.poll(max(1, int(left * 1000))):
                        raise ForkerGone("no spare came")
                    self.read_exits(forker)
                    self.receive_spare(forker)
                return
            self.read_exits(forker)
            self.receive_spare(forker)
        except (ForkerGone, OSError):
            self.drop_forker()

    def receive_spare(self, forker: Forker) -> None:
        s = socket.socket(fileno=forker.spares)
        try:
            data, anc, _, _ = s.recvmsg(_HELLO.size, socket.CMSG_SPACE(3 * 4))
        except BlockingIOError:
            return
        finally:
            s.detach()
        fds: list[int] = []
        for level, typ, blob in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.extend(struct.unpack(f"{len(blob) // 4}i", blob[: len(blob) // 4 * 4]))
        if len(data) != _HELLO.size or len(fds) != 3:
            for fd in fds:
                _close(fd)
            raise ForkerGone("a spare sent a bad hello")
        (pid,) = _HELLO.unpack(data)
        forker.pending = 0.0
        self.spare = Spare(pid, fds[0], fds[1], fds[2], via_forker=True)
        self.rehearsed = True  # nothing to rehearse: the zygote shares no pages with it

    def read_exits(self, forker: Forker) -> None:
        while True:
            try:
                data = os.read(forker.exits_fd, 64 * _EXIT.size)
            except BlockingIOError:
                return
            if not data:
                raise ForkerGone("the forker exited")
            data = forker.partial + data
            end = len(data) - len(data) % _EXIT.size
            forker.partial = data[end:]
            for pid, status, cpu_ms, max_rss in _EXIT.iter_unpack(data[:end]):
                if pid <= 0:
                    # The fork failed: no spare comes, and none is asked for
                    # again before the next execution (as in Warmup.prefork).
                    forker.pending = 0.0
                    if self.spare is None:
                        self.spare = Spare(0, -1, -1, -1)
                    continue
                spare = self.spare
                if spare is not None and spare.pid == pid:
                    # The spare died while waiting: executions fork for
                    # themselves until the next.
                    self.spare = None
                    for fd in (spare.out_r, spare.err_r, spare.chan):
                        _close(fd)
                    continue
                forker.exits[pid] = (status, cpu_ms, max_rss * 1024)

    def forked_status(self, run: Run, timeout: float = 0.0) -> None:
        """Set run's wait status and usage from the forker's exit record,
        waiting at most timeout for it."""
        deadline = time.monotonic() + timeout
        if timeout > 0 and self.forker is not None:
            try:
                os.kill(self.forker.pid, signal.SIGCONT)  # the program may have stopped it
            except OSError:
                pass
        while run.status is None:
            forker = self.forker
            if forker is None:
                # Its children are the zygote's now (it is the pid
                # namespace's init), or beyond reach.
                run.via_forker = False
                self.check_exit(run)
                return
            found = forker.exits.pop(run.pid, None)
            if found is not None:
                run.status, cpu_ms, max_rss = found
                run.usage = (cpu_ms, max_rss)
                return
            left = deadline - time.monotonic()
            if left <= 0:
                self.take_forker_news()
                found = forker.exits.pop(run.pid, None) if self.forker is forker else None
                if found is not None:
                    run.status, cpu_ms, max_rss = found
                    run.usage = (cpu_ms, max_rss)
                return
            p = select.poll()
            p.register(forker.exits_fd, _POLLIN)
            p.poll(max(1, int(left * 1000)))
            self.take_forker_news()

    def forker_main(self, requests: int, exits: int, hand: int) -> NoReturn:
        """Body of the forker: a spare per byte read, an exit record per
        child reaped."""
        try:
            wake_r, wake_w = os.pipe()
            keep = sorted({requests, exits, hand, wake_r, wake_w})
            low = 3
            for fd in keep:
                if fd > low:
                    os.closerange(low, fd)
                low = fd + 1
            os.closerange(low, 1 << 20)
            os.set_blocking(wake_r, False)
            os.set_blocking(wake_w, False)
            signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
            poller = select.poll()
            poller.register(requests, _POLLIN)
            poller.register(wake_r, _POLLIN)
            while True:
                for fd, _ in poller.poll():
                    if fd == wake_r:
                        try:
                            os.read(wake_r, 512)
                        except BlockingIOError:
                            pass
                        _report_exits(exits)
                        continue
                    asked = os.read(requests, 64)
                    if not asked:
                        os._exit(0)
                    for _ in asked:
                        self.fork_spare(hand, exits)
        except BaseException:
            os._exit(70)

    def fork_spare(self, hand: int, exits: int) -> None:
        try:
            pid = os.fork()
        except OSError:
            os.write(exits, _EXIT.pack(0, 0, 0, 0))
            return
        if pid == 0:
            try:
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                chan, child_chan = a.detach(), b.detach()
                _send_with_fds(hand, _HELLO.pack(os.getpid()), [out_r, err_r, chan])
                for fd in (out_r, err_r, chan):
                    os.close(fd)
            except BaseException:
                os._exit(70)
            self.enter_child(out_w, err_w, child_chan)
            _spare_main()


def _report_exits(exits: int) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        cpu_ms = int((usage.ru_utime + usage.ru_stime) * 1000)
        os.write(exits, _EXIT.pack(pid, status, cpu_ms, int(usage.ru_maxrss)))
