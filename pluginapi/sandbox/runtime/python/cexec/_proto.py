"""Frames of the cexec runtime protocol (see the Go package doc of
pluginapi/sandbox/runtime for the full description).

A frame is a 5-byte header, a big-endian uint32 payload length and a one-byte
kind, followed by the payload. Kind J carries a UTF-8 JSON object, O and E
carry raw stdout and stderr bytes.
"""

from __future__ import annotations

import os
import select
import struct

from cexec import _codec
TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    from typing import Any, Iterator

KIND_JSON = 0x4A  # "J"
KIND_STDOUT = 0x4F  # "O"
KIND_STDERR = 0x45  # "E"
_KINDS = (KIND_JSON, KIND_STDOUT, KIND_STDERR)

# Upper bound of one frame's payload; larger frames are a protocol error.
MAX_FRAME = 64 << 20
# Upper bound of one host call's params (runtime.MaxCallData): a frame less
# room for the call's other fields, so that larger params fail the call
# clearly instead of breaking the frame.
MAX_CALL_DATA = MAX_FRAME - (1 << 20)

_HEADER = struct.Struct(">IB")
HEADER_SIZE = _HEADER.size


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame."""


def encode(kind: int, payload: bytes) -> bytes:
    """Return one frame."""
    return _HEADER.pack(len(payload), kind) + payload


def dumps(msg: dict[str, Any]) -> bytes:
    """Serialize a JSON message; NaN and Infinity are refused because the
    host's JSON decoder would reject them."""
    return _codec.dumps(msg).encode()


def encode_json(msg: dict[str, Any]) -> bytes:
    """Return one J frame carrying msg."""
    return encode(KIND_JSON, dumps(msg))


def write_all(fd: int, data: bytes) -> None:
    """Write all of data to fd, waiting for room when fd is non-blocking."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            p = select.poll()
            p.register(fd, select.POLLOUT)
            p.poll()
            continue
        view = view[n:]


class Reader:
    """Incremental frame parser: feed bytes, iterate complete frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> Iterator[tuple[int, bytes]]:
        buf = self._buf
        while len(buf) >= HEADER_SIZE:
            length, kind = _HEADER.unpack_from(buf)
            if length > MAX_FRAME or kind not in _KINDS:
                raise ProtocolError(f"bad frame header (length {length}, kind {kind})")
            end = HEADER_SIZE + length
            if len(buf) < end:
                return
            payload = bytes(buf[HEADER_SIZE:end])
            del buf[:end]
            yield kind, payload


def decode_json(payload: bytes) -> dict[str, Any]:
    """Decode a J frame's payload, which must be a JSON object."""
    try:
        msg = _codec.loads(payload)
    except ValueError as e:
        raise ProtocolError(f"invalid JSON frame: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("JSON frame is not an object")
    return msg


def read_frame(fd: int, reader: Reader) -> tuple[int, bytes] | None:
    """Block until one frame is available on fd; None at end of file."""
    while True:
        for frame in reader.frames():
            return frame
        data = os.read(fd, 65536)
        if not data:
            return None
        reader.feed(data)
