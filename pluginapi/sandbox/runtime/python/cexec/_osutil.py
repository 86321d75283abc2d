"""Descriptor plumbing shared by the zygote's parts and the processes it
forks. Only raw integer descriptors are kept, never file or socket objects,
so that nothing in a forked child closes a descriptor number that the
user's program has since reused."""

from __future__ import annotations

import os
import select
import struct

from cexec import _proto

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import socket
else:
    # The C modules behind signal and socket: the Python wrappers build
    # enums that cost an idle sandbox memory.
    import _signal as signal
    import _socket as socket

# What one read asks for. Python allocates the whole size for each read:
# beyond malloc's mmap threshold (128 KiB) every read would cost an mmap, a
# fresh page fault and an munmap, which on the hot path of an execution
# add up to a tenth of a millisecond. Larger frames take several reads.
_READ_SIZE = 65536

_POLLIN = select.POLLIN | select.POLLHUP | select.POLLERR


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


def _fork_connected() -> tuple[int, int]:
    """Fork with a socket pair between the two processes: (the child's
    pid, the parent's end) in the parent, (0, the child's end) in the
    child."""
    ours, theirs = _socketpair()
    try:
        pid = os.fork()
    except OSError:
        _close(ours)
        _close(theirs)
        raise
    if pid == 0:
        os.close(ours)
        return 0, theirs
    os.close(theirs)
    return pid, ours


def _kill_reap(pid: int, group: bool = False) -> None:
    """Kill a child of ours (its process group when group) and reap it, so
    that it leaves no zombie; a child already gone is no error. SIGKILL
    ends even a stopped process, so the wait is short."""
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _send_with_fds(sock: int, data: bytes, fds: list[int]) -> None:
    s = socket.socket(fileno=sock)
    try:
        n = s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
        _proto.write_all(sock, data[n:])
    finally:
        s.detach()
