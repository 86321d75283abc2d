"""The fork server: a copy of the warm zygote that forks the spares.

Every fork write-protects the forking process's pages, so a zygote that
forked each execution's child copied about 180 pages of its own on the
next execution's way through it (the relay writes reference counts
everywhere). The fork server, forked once after the warm-up, does nothing
but fork and reap, touching a few dozen pages per fork; the zygote, never
forking again, keeps its pages private. Children of the fork server are
not the zygote's: the fork server reports their pids and their ends (wait
status and usage) over its socket.

Programs run as the same user and may kill the fork server: the zygote
then forks its children itself again, as before the warm-up, and the
children the fork server leaves become the zygote's (it is the sandbox's
init)."""

from __future__ import annotations

import os
import select
import struct
import time

from cexec._child import _spare_main
from cexec._osutil import _POLLIN, _READ_SIZE, _close, _fork_connected, _kill_reap, _send_with_fds
from cexec._parts import Part

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    import signal
    import socket
    from typing import Any

    from cexec._relay import Run
else:
    # The C modules behind signal and socket (see _zygote).
    import _signal as signal
    import _socket as socket

# Ends reported for children nobody asked about (a dropped spare), kept at
# most this many.
_MAX_EXITS = 64

# The fork server's reports are fixed-size records, so that it allocates
# next to nothing per fork: kind (F forked, X exited), pid, wait status,
# user and system CPU in microseconds, peak RSS in KiB. A request is one
# byte with the child's three descriptors.
_RECORD = struct.Struct("<ciiqqq")


class Usage:
    """The parts of a child's rusage that a report uses."""

    def __init__(self, utime: float, stime: float, maxrss: int) -> None:
        self.ru_utime = utime
        self.ru_stime = stime
        self.ru_maxrss = maxrss


class ForkServer:
    def __init__(self, pid: int, sock: int) -> None:
        self.pid = pid
        self.sock = sock
        self.buf = b""


class Forker(Part):
    """The zygote's side of the fork server."""

    def start_forker(self) -> None:
        try:
            pid, sock = _fork_connected()
        except OSError:
            self.forker_failed = True
            return
        if pid == 0:
            try:
                _forker_main(self, sock)
            finally:
                os._exit(70)
        self.forker = ForkServer(pid, sock)

    def drop_forker(self, reaped: bool = False) -> None:
        """Stop using the fork server for good (it died or broke its
        protocol, or sessions' interpreters serve the sandbox): kill and
        reap it, unless reaped already (its pid may be another process's by
        now)."""
        fs, self.forker = self.forker, None
        if fs is None:
            return
        self.forker_failed = True
        _close(fs.sock)
        if not reaped:
            _kill_reap(fs.pid)

    def fork_spare_via_server(self, out_w: int, err_w: int, child_chan: int) -> int:
        """Have the fork server fork a spare on these descriptors; its pid,
        or 0 when the fork server is gone (the caller forks itself)."""
        fs = self.forker
        if fs is None:
            return 0
        try:
            _send_with_fds(fs.sock, b"f", [out_w, err_w, child_chan])
            pid = self.next_forked(fs, block=True)
            if pid > 0:
                return pid
        except OSError:
            pass
        self.drop_forker()
        return 0

    def next_forked(self, fs: ForkServer, block: bool) -> int:
        """The pid in the fork server's next "forked" record, recording the
        exit records before it in self.exits; 0 at its end, or when nothing
        waits and not block."""
        while True:
            while len(fs.buf) >= _RECORD.size:
                kind, pid, status, utime, stime, maxrss = _RECORD.unpack_from(fs.buf)
                fs.buf = fs.buf[_RECORD.size:]
                if kind == b"F":
                    # A record of an earlier process with this pid (a
                    # dropped spare's, never asked for) is not this one's.
                    self.exits.pop(pid, None)
                    return int(pid)
                if len(self.exits) >= _MAX_EXITS:
                    self.exits.pop(next(iter(self.exits)))
                self.exits[pid] = (status, Usage(utime / 1e6, stime / 1e6, maxrss))
            if not block:
                p = select.poll()
                p.register(fs.sock, _POLLIN)
                if not p.poll(0):
                    return 0
            data = os.read(fs.sock, _READ_SIZE)
            if not data:
                self.drop_forker()
                return 0
            fs.buf += data

    def read_forker(self) -> None:
        """Take the exit records waiting on the fork server's socket."""
        fs = self.forker
        if fs is not None:
            try:
                self.next_forked(fs, block=False)
            except OSError:
                self.drop_forker()

    def forked_exit(self, run: Run, wait: float = 0) -> bool:
        """For a child of the fork server: record its end in run once the
        fork server reported it, waiting at most wait seconds (after the
        process has exited, the report is on its way). True when the child
        is the fork server's (or was: then it is the zygote's now)."""
        if not run.by_server:
            return False
        if run.status is not None:
            return True
        deadline = time.monotonic() + wait
        while True:
            self.read_forker()
            ended = self.exits.pop(run.pid, None)
            if ended is not None:
                run.status, run.rusage = ended
                return True
            fs = self.forker
            if fs is None:
                # Orphaned by the fork server's end: the zygote's child now.
                run.by_server = False
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            p = select.poll()
            p.register(fs.sock, _POLLIN)
            p.poll(int(left * 1000) + 1)


def _forker_main(z: Any, sock: int) -> None:
    """Body of the fork server: fork a spare for each request, report each
    child's end. Kept small, and with its objects made once: every object
    it touches after a fork is a page it copies."""
    keep = sorted({sock, 0, 1, 2})
    low = 0
    for fd in keep:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    poller = select.poll()
    poller.register(sock, _POLLIN)
    poller.register(wake_r, _POLLIN)
    s = socket.socket(fileno=sock)
    anc_size = socket.CMSG_SPACE(3 * 4)
    fds3 = struct.Struct("3i")
    pack, write, fork, close, wait4, read = _RECORD.pack, os.write, os.fork, os.close, os.wait4, os.read
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                try:
                    read(wake_r, 512)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status, ru = wait4(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    write(sock, pack(b"X", pid, status, int(ru.ru_utime * 1e6), int(ru.ru_stime * 1e6), ru.ru_maxrss))
                continue
            data, anc, _, _ = s.recvmsg(1, anc_size)
            if not data:
                os._exit(0)
            if len(anc) != 1 or len(anc[0][2]) < fds3.size:
                os._exit(71)
            out_w, err_w, chan = fds3.unpack_from(anc[0][2])
            pid = fork()
            if pid == 0:
                for x in (sock, wake_r, wake_w):
                    close(x)
                z.enter_child(out_w, err_w, chan)
                _spare_main()
            close(out_w)
            close(err_w)
            close(chan)
            write(sock, pack(b"F", pid, 0, 0, 0, 0))
