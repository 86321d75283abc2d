"""The cexec in-sandbox API.

    from cexec import call_tool, result, ToolError

    rows = call_tool("db", "query", {"sql": "select 1"})
    result({"rows": len(rows)})

call_tool asks the host to call an upstream MCP tool and returns its result
(structured content, else JSON-decoded text, else text). A result with
other content comes as typed objects: Image and Audio (.data bytes,
.mime_type), Resource (an embedded resource: .uri, .mime_type, .text or
.data) and ResourceLink (.uri, .name; .read() fetches it); one item alone,
several as a list in order, texts as str. A failed call raises ToolError,
or the exception class the host names when Python knows it.

Rich content goes back to the agent too, beside the printed output:

    from cexec import call_tool, show, read_resource

    img = call_tool("everything", "get-tiny-image")[1]   # an Image
    show(img)                                            # image content in the reply
    show("/workspace/report.pdf")                        # a file, by its type
    show(b"...", mime_type="audio/wav")                  # bytes with a mime type
    doc = read_resource("everything", "demo://resource/dynamic/text/1")

Small items travel inline; larger ones are saved in the workspace and the
agent gets a resource link it can read. Text content, and bytes that are
text, are checked for PII as printed output is; binary content is not
scanned.
result(obj) records the execution's structured result, which the host gets
as JSON next to stdout and stderr.

progress(done, total=None, message=None) tells the agent how far a long
program is (MCP progress notifications, when its client asked for them);
printed lines are reported too until the program calls progress.

The tenant's workspace outlives the execution:

    from cexec import get_state, save_state, checkpoint, save_skill

    seen = get_state("progress.json", default={"page": 0})
    save_state("progress.json", {"page": seen["page"] + 1})
    checkpoint("page fetched", {"page": seen["page"] + 1})
    save_skill("shout", "Upper-case text", "def shout(s):\n    return s.upper()\n")

Concurrent read-modify-write (other executions, other replicas) loses
nothing when the save names the version it read:

    from cexec import load_state, save_state, StateConflict

    while True:
        count, version = load_state("count.json", default=0)
        try:
            save_state("count.json", count + 1, version=version)
            break
        except StateConflict:
            continue  # someone saved in between: read again

State files are JSON or YAML by the name's extension and are the files under
/workspace/state. A missing file raises KeyError unless a default is given.
checkpoint records a step of the session for a later resume; a saved skill
is importable from the next execution on as skills.<name>.
"""

from __future__ import annotations

import _thread
import builtins
import os
import time
from cexec import _codec, _content, _proto
from cexec._content import Audio, EmbeddedResource, Image, Resource, ResourceLink

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time, to keep sandbox start fast
    from typing import Any, Mapping

__all__ = ["Audio", "EmbeddedResource", "HostError", "Image", "Resource", "ResourceLink", "StateConflict", "ToolError",
           "call_tool", "checkpoint", "get_state", "load_state", "progress", "read_resource", "result", "save_skill",
           "save_state", "show"]

# Largest accepted cexec.result() value, as JSON.
MAX_RESULT_BYTES = 16 << 20


class HostError(Exception):
    """A call to the host failed. type is the error type the host reported."""

    def __init__(self, message: str, type: str = "HostError") -> None:
        super().__init__(message)
        self.type = type


class ToolError(HostError):
    """A tool call failed: the tool reported an error, or the host refused
    or could not complete the call."""

    def __init__(self, message: str, type: str = "ToolError") -> None:
        super().__init__(message, type)


class StateConflict(HostError):
    """save_state(..., version=v) found the state at another version than v:
    it was saved (or deleted) since it was read, and nothing was written.
    Load it again and retry."""

    def __init__(self, message: str, type: str = "StateConflict") -> None:
        super().__init__(message, type)


def _error(method: str, message: str, type_name: str) -> Exception:
    """Build the exception a failed host call raises in the program: the
    built-in exception the host names (ValueError, PermissionError, ...),
    else ToolError for tool calls and HostError for other host calls."""
    cls = getattr(builtins, type_name, None) if type_name else None
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, Warning):
        try:
            return cls(message)
        except Exception:
            pass
    if type_name == "StateConflict":
        return StateConflict(message)
    if method in ("call_tool", "read_resource") or type_name == "ToolError":
        return ToolError(message, type_name or "ToolError")
    return HostError(message, type_name or "HostError")


class _Waiter:
    """One pending call. done is released (once per wake, see _Channel._wake)
    when its reply comes, when its thread is to take over reading, or at the
    end of the connection."""

    __slots__ = ("done", "woken", "reply")

    def __init__(self) -> None:
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.woken = False
        self.reply: dict[str, Any] | None = None


class _Channel:
    """The execution's connection to the runner (and through it the host).

    Any thread may make host calls: writes are serialized by a lock, and one
    calling thread at a time reads, handing replies to their callers by
    call id, until its own reply comes; then it wakes another thread still
    waiting, if any, to read on. A program calling from one thread so reads
    its own replies, with no reader thread to wake for each.

    A signal handler's exception while the main thread reads is raised by
    os.read (nothing read) unless the signal comes in the instant after it
    returned, which would lose those bytes and end the channel: the hazard
    the signal module's documentation gives all Python code.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pid = os.getpid()
        self._wlock = _thread.allocate_lock()
        self._lock = _thread.allocate_lock()
        self._pending: dict[int, _Waiter] = {}
        self._next_id = 0
        self._frames = _proto.Reader()
        self._reading = False
        # closed: no more calls (close, or the end); ended: the runner
        # closed its end, or broke the protocol, and fd is closed.
        self._closed = False
        self._ended = False
        # Why the host closed the connection, when it said (a refused token).
        self._refusal = ""
        self.result_json: str | None = None

    def call(self, method: str, params: Any) -> Any:
        if os.getpid() != self._pid:
            raise HostError("host calls are only available in the process that runs the program, not in forked children")
        waiter = _Waiter()
        with self._lock:
            if self._closed:
                raise HostError("the execution has finished; host calls are no longer possible")
            self._next_id += 1
            call_id = self._next_id
            frame = _proto.encode_json({"op": "call", "id": call_id, "method": method, "params": params})
            if len(frame) > _proto.MAX_CALL_DATA:
                raise _error(method, f"{method} was not sent: its data is {len(frame) >> 20} MiB, over the "
                             f"{_proto.MAX_CALL_DATA >> 20} MiB a host call carries; send less data per call",
                             "ArgumentTooLarge")
            self._pending[call_id] = waiter
        try:
            try:
                with self._wlock:
                    _proto.write_all(self._fd, frame)
            except OSError as e:
                raise HostError(f"host connection lost: {e}") from None
            self._await(waiter)
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
        reply = waiter.reply
        if reply is None:
            raise HostError("host connection lost before the call was answered" + (self._refusal and f": {self._refusal}"))
        if "error" in reply:
            raise _error(method, str(reply.get("error")), str(reply.get("error_type") or ""))
        return reply.get("result")

    @staticmethod
    def _wake(waiter: _Waiter) -> None:
        """Release waiter.done unless it is released already; under _lock."""
        if not waiter.woken:
            waiter.woken = True
            waiter.done.release()

    def _await(self, waiter: _Waiter) -> None:
        """Return once waiter has its reply or the connection has ended,
        reading whenever no other thread does."""
        lead = False
        try:
            while True:
                with self._lock:
                    if waiter.reply is not None or self._ended:
                        return
                    if not self._reading:
                        self._reading = lead = True
                        break
                waiter.done.acquire()
                with self._lock:
                    waiter.woken = False
            self._read_until(waiter)
        finally:
            if lead:
                self._hand_over(waiter)

    def _read_until(self, waiter: _Waiter) -> None:
        """Read replies, handing each to its caller, until waiter has its
        own or the connection ends."""
        try:
            while waiter.reply is None:
                frame = _proto.read_frame(self._fd, self._frames)
                if frame is None:
                    break
                kind, payload = frame
                if kind != _proto.KIND_JSON:
                    continue
                msg = _proto.decode_json(payload)
                if msg.get("op") == "refused":
                    self._refusal = str(msg.get("error") or "refused")
                    break
                if msg.get("op") != "reply":
                    continue
                with self._lock:
                    other = self._pending.get(msg.get("id"))  # type: ignore[arg-type]
                    if other is not None and other.reply is None:
                        other.reply = msg
                        if other is not waiter:
                            self._wake(other)
            else:
                return
        except OSError as e:
            if e.errno is None:
                # Raised by a signal handler (TimeoutError, say), not by
                # the read: the connection is fine.
                raise
        except _proto.ProtocolError:
            pass
        self._end()

    def _hand_over(self, waiter: _Waiter) -> None:
        """Stop reading, and wake a thread still waiting for its reply to
        read on; with none and no more calls to come, close fd. Also when
        the reading thread was interrupted (an exception from a signal
        handler), so that the others' replies are still read."""
        with self._lock:
            self._reading = False
            if self._ended:
                return
            for other in self._pending.values():
                if other is not waiter and other.reply is None:
                    self._wake(other)
                    return
            if not self._closed:
                return
        self._end()

    def _end(self) -> None:
        """End the connection: fail the calls still waiting and close fd."""
        with self._lock:
            if self._ended:
                return
            self._closed = self._ended = True
            for other in self._pending.values():
                self._wake(other)
        with self._wlock:
            try:
                os.close(self._fd)
            except OSError:
                pass

    def send(self, msg: dict[str, Any], raw_result: str | None) -> None:
        """Send a final message, splicing in the already-encoded result."""
        body = _proto.dumps(msg)
        if raw_result is not None:
            body = body[:-1] + b',"result":' + raw_result.encode() + b"}"
        with self._wlock:
            _proto.write_all(self._fd, _proto.encode(_proto.KIND_JSON, body))

    def close(self) -> None:
        """Stop accepting calls. fd is closed here, or, while calls are still
        waiting for their replies, by the last thread reading them."""
        with self._lock:
            self._closed = True
            if self._reading or self._pending:
                return
        self._end()


_channel: _Channel | None = None

# Where the host's channel socket is mounted (runtime.HostSocket).
HOST_SOCKET = "/cexec/host.sock"

# The execution's token on HOST_SOCKET, the process it belongs to, and the
# connection made with it on the first host call (None: not yet, or not
# possible: the calls then go through _channel and the zygote).
_host_token: str | None = None
_token_pid = 0
_direct: _Channel | None = None
_direct_lock = _thread.allocate_lock()


def _begin(chan: _Channel, host_token: Any) -> None:
    """Start an execution's host calls: chan is its channel to the zygote,
    host_token (from the exec frame) its capability on HOST_SOCKET."""
    global _channel, _host_token, _token_pid, _direct
    _channel = chan
    _host_token = host_token if isinstance(host_token, str) and host_token else None
    _token_pid = os.getpid()
    _direct = None


def _end() -> None:
    """End an execution's host calls (a persistent interpreter's)."""
    global _channel, _host_token, _direct
    if _direct is not None:
        _direct.close()
    _channel = _host_token = _direct = None


def _connect_direct() -> _Channel | None:
    """Connect to HOST_SOCKET with the execution's token; None (and the
    zygote's channel from then on) when the sandbox has no such socket."""
    global _direct, _host_token
    with _direct_lock:
        if _direct is not None or _host_token is None:
            return _direct
        import _socket

        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.connect(HOST_SOCKET)
            _proto.write_all(s.fileno(), _proto.encode_json({"op": "hello", "token": _host_token}))
        except OSError:
            s.close()
            _host_token = None
            return None
        _direct = _Channel(s.detach())
        return _direct


def _host_call(method: str, params: Any) -> Any:
    """Call the host: method names what to do (call_tool, and others the host
    defines), params is any JSON value. Returns the JSON-decoded answer."""
    ch = _direct
    if ch is None:
        ch = _channel
        if ch is None:
            raise HostError("not connected to a cexec host: host calls work only inside a cexec execution")
        if _host_token is not None and os.getpid() == _token_pid:
            ch = _connect_direct() or ch
    return ch.call(method, params)


def call_tool(server: str, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
    """Call tool on the upstream MCP server named server and return its
    result: structured content, JSON-decoded text or text; images, audio,
    embedded resources and resource links as Image, Audio, Resource and
    ResourceLink objects (several items: a list, texts as str). Raises
    ToolError when the tool or the host reports an error."""
    if not isinstance(server, str) or not isinstance(tool, str):
        raise TypeError("call_tool: server and tool must be strings")
    args = dict(arguments) if arguments is not None else {}
    return _content.decode(_host_call("call_tool", {"server": server, "tool": tool, "arguments": args}), server)


def read_resource(server: str, uri: str) -> Any:
    """Read the resource uri from the upstream MCP server named server
    (resources/read) and return it as a Resource (.text for text, .data
    bytes for a blob), or a list of them when the server returns several.
    The tenant's allowed servers and the call limits apply as to call_tool;
    failures raise ToolError."""
    if not isinstance(server, str) or not isinstance(uri, str):
        raise TypeError("read_resource: server and uri must be strings")
    items = [_content.resource(c) for c in _host_call("read_resource", {"server": server, "uri": uri}) or []]
    return items[0] if len(items) == 1 else items


def show(obj: Any, mime_type: str | None = None, name: str | None = None) -> str | None:
    """Hand obj to the agent as content beside the printed output: an Image,
    Audio or Resource; a ResourceLink (its resource is read and shown);
    bytes (mime_type, else guessed from the first bytes: image/* becomes an
    image, audio/* audio, anything else a resource); or the path of a file
    (str or os.PathLike; its type from mime_type or the name). name names
    the item for the agent. Items over the host's inline size are saved in
    the workspace and reach the agent as a resource link: show returns the
    saved file's path then, else None. One item carries at most about 47 MiB
    (a host call's 63 MiB, base64-encoded). Text content is checked for PII like
    printed output, and so are bytes that are text (the host shows untyped
    UTF-8 as text/plain); binary content is not."""
    if isinstance(obj, ResourceLink):
        got = obj.read()
        paths = [show(r, mime_type, name) for r in (got if isinstance(got, list) else [got])]
        return next((p for p in paths if p), None)
    if isinstance(obj, (Image, Audio)):
        params = _content.binary_params("image" if isinstance(obj, Image) else "audio", obj.data,
                                        mime_type or obj.mime_type, name)
    elif isinstance(obj, Resource):
        if obj.text is not None:
            params = {"kind": "resource", "uri": obj.uri, "mimeType": mime_type or obj.mime_type, "text": obj.text}
            if name:
                params["name"] = name
        else:
            params = _content.binary_params("resource", obj.data or b"", mime_type or obj.mime_type, name, obj.uri)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        mime = mime_type or _content.sniff(data)
        params = _content.binary_params(_kind(mime), data, mime, name)
    elif isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        with open(path, "rb") as f:
            data = f.read()
        if mime_type:
            mime = mime_type
        else:
            import mimetypes
            mime = mimetypes.guess_type(path)[0] or _content.sniff(data)
        params = _content.binary_params(_kind(mime), data, mime, name or os.path.basename(path))
    else:
        raise TypeError(f"show: cannot show {type(obj).__name__}; pass an Image, Audio, Resource, bytes or a file path")
    out = _host_call("show", params)
    path = out.get("path") if isinstance(out, dict) else None
    return path if isinstance(path, str) else None


def _kind(mime: str) -> str:
    """The content kind a mime type shows as."""
    if mime.startswith("image/") and not _content.is_text_mime(mime):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "resource"


def result(obj: Any) -> None:
    """Record obj (any JSON-serializable value) as the execution's structured
    result. The last call wins."""
    encoded = _codec.dumps(obj)
    if len(encoded) > MAX_RESULT_BYTES:
        raise ValueError(f"cexec.result: value is {len(encoded)} bytes as JSON; the limit is {MAX_RESULT_BYTES}")
    ch = _channel
    if ch is None:
        raise HostError("not connected to a cexec host: result() works only inside a cexec execution")
    ch.result_json = encoded


class _Missing:
    """The type of _MISSING, get_state's "no default given"."""

    def __repr__(self) -> str:
        return "<no default>"


_MISSING: Any = _Missing()


def get_state(name: str, default: Any = _MISSING) -> Any:
    """Return the value of the state file name (e.g. "progress.json" or
    "config.yaml", under /workspace/state). A missing file raises KeyError,
    unless default is given: then default is returned."""
    params: dict[str, Any] = {"name": name}
    if default is not _MISSING:
        params["default"] = default
    return _host_call("get_state", params)


def load_state(name: str, default: Any = _MISSING) -> tuple[Any, str]:
    """Return (value, version) of the state file name: the value as
    get_state returns it and the version to pass to save_state(...,
    version=...). A missing file raises KeyError unless default is given:
    then (default, "") is returned, and saving with version "" succeeds only
    while the file still does not exist."""
    params: dict[str, Any] = {"name": name}
    if default is not _MISSING:
        params["default"] = default
    out = _host_call("load_state", params)
    return out["value"], str(out["version"])


def save_state(name: str, value: Any, version: str | None = None) -> dict[str, Any]:
    """Store value (anything JSON can hold) as the state file name, in JSON
    or YAML by the name's extension. The write is atomic and durable, and
    refused with a HostError of type QuotaExceeded when the tenant's
    workspace would exceed its disk quota. With version (from load_state)
    it happens only while the stored state is still at that version, and
    raises StateConflict otherwise. Returns {"name", "bytes", "version"}."""
    params: dict[str, Any] = {"name": name, "value": value}
    if version is not None:
        params["version"] = version
    out: dict[str, Any] = _host_call("save_state", params)
    return out


def checkpoint(step: str, context: Any = None) -> int:
    """Record step (a short description of what is done) and context (any
    JSON value needed to resume from here) in the session's log. Returns the
    log entry's sequence number."""
    out = _host_call("checkpoint", {"step": step, "context": context})
    return int(out["seq"])


def save_skill(name: str, description: str, code: str) -> dict[str, Any]:
    """Save code as one of the tenant's skills, importable from the next
    execution on with `from skills.<name> import ...`. name is a lowercase
    Python identifier; the code must compile (SyntaxError otherwise).
    Returns {"name", "import", "path"}."""
    out: dict[str, Any] = _host_call("save_skill", {"name": name, "description": description, "code": code})
    return out


# Least seconds between two progress host calls; the host sends at most
# four reports a second anyway, and a call is a round trip.
_PROGRESS_EVERY = 0.05
_progress_sent: float | None = None


def progress(done: float, total: float | None = None, message: str | None = None) -> None:
    """Report progress to the agent: done so far, out of total when known,
    with a short message (one line; shown to the model, PII tokenized).
    Reports are sent a few times a second at most, the latest winning (the
    one reaching total always goes); a done that does not exceed the last
    report's is sent as the next step with the numbers in the message, since
    MCP progress only increases. Cheap to call in a loop."""
    global _progress_sent
    if isinstance(done, bool) or not isinstance(done, (int, float)):
        raise TypeError("cexec.progress: done must be a number")
    if total is not None and (isinstance(total, bool) or not isinstance(total, (int, float))):
        raise TypeError("cexec.progress: total must be a number or None")
    if message is not None and not isinstance(message, str):
        raise TypeError("cexec.progress: message must be a string or None")
    now = time.monotonic()
    if _progress_sent is not None and now - _progress_sent < _PROGRESS_EVERY and (total is None or done < total):
        return
    _progress_sent = now
    _host_call("progress", {"progress": done, "total": total, "message": message})
