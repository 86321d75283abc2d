"""The zygote's control channels: descriptors 3 and 4 from the backend, and
optionally a connection to the host socket (runtime.HostSocket) over which
the host drives executions without the backend on the way. The protocol is
the same on both; the zygote serves one execution at a time, from either."""

from __future__ import annotations

import os
import select

from cexec import _proto
from cexec._osutil import _POLLIN, _READ_SIZE, _close

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Where the host's socket is mounted (runtime.HostSocket).
HOST_SOCKET = "/cexec/host.sock"

# How long the zygote waits for the host to take its control request. The
# host answers at once; a host that does not must not hold up the start.
_WELCOME_WAIT_MS = 2000


class Channel:
    """One control channel: where frames come from and go to, the partial
    frame read so far and the messages not yet handled."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.reader = _proto.Reader()
        self.inbox: list[dict[str, Any]] = []


def connect_control() -> Channel | None:
    """Ask the host, over its socket, to control this zygote through it;
    the channel when it agrees, None when the sandbox has no socket or the
    host refuses or does not answer."""
    if not os.path.exists(HOST_SOCKET):
        return None
    import _socket

    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.connect(HOST_SOCKET)
        fd = s.detach()
    except OSError:
        s.close()
        return None
    try:
        _proto.write_all(fd, _proto.encode_json({"op": "control"}))
        if _welcomed(fd):
            return Channel(fd, fd)
    except (OSError, _proto.ProtocolError):
        pass
    _close(fd)
    return None


def _welcomed(fd: int) -> bool:
    """Whether the host's first frame on fd is a welcome."""
    reader = _proto.Reader()
    poller = select.poll()
    poller.register(fd, _POLLIN)
    while poller.poll(_WELCOME_WAIT_MS):
        data = os.read(fd, _READ_SIZE)
        if not data:
            return False
        reader.feed(data)
        for kind, payload in reader.frames():
            return kind == _proto.KIND_JSON and _proto.decode_json(payload).get("op") == "welcome"
    return False
