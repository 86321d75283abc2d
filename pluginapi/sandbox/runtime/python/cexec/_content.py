"""Rich content: the typed objects call_tool returns for MCP content other
than text, and their wire forms.

A tool result with only text keeps its plain value (structured content,
JSON-decoded text, or text). A result with an image, audio, an embedded
resource or a resource link arrives from the host as
{"$cexec.content": [MCP content items]} and becomes one object, or a list
when there are several items (texts as str, in order). A value that could
be read as such an envelope arrives escaped as {"$cexec.value": value}.
"""

from __future__ import annotations

import binascii

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONTENT_KEY = "$cexec.content"
VALUE_KEY = "$cexec.value"


def _b64decode(s: Any) -> bytes:
    if not isinstance(s, str):
        return b""
    return binascii.a2b_base64(s)


def b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _check_bytes(name: str, data: Any) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name}: data must be bytes, not {type(data).__name__}")
    return bytes(data)


class _Media:
    """Binary media: data (bytes) and its mime_type."""

    __slots__ = ("data", "mime_type")
    _default_mime = "application/octet-stream"

    def __init__(self, data: bytes, mime_type: str | None = None) -> None:
        self.data = _check_bytes(type(self).__name__, data)
        self.mime_type = mime_type or self._default_mime

    def save(self, path: str) -> str:
        """Write the bytes to path (e.g. under /workspace) and return path."""
        with open(path, "wb") as f:
            f.write(self.data)
        return path

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (self.data, self.mime_type) == (other.data, other.mime_type)  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mime_type}, {len(self.data)} bytes)"


class Image(_Media):
    """An image a tool returned, or one to show: Image(data, "image/png")."""

    __slots__ = ()
    _default_mime = "image/png"


class Audio(_Media):
    """Audio a tool returned, or audio to show: Audio(data, "audio/wav")."""

    __slots__ = ()
    _default_mime = "audio/wav"


class Resource:
    """A resource's contents: uri, mime_type and either text (str) or data
    (bytes). Tools return these as embedded resources; read_resource
    returns them; show() accepts them (text is checked for PII like
    printed output, data is not)."""

    __slots__ = ("uri", "mime_type", "text", "data")

    def __init__(self, uri: str = "", mime_type: str | None = None, text: str | None = None,
                 data: bytes | None = None) -> None:
        if (text is None) == (data is None):
            raise ValueError("Resource: give exactly one of text and data")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"Resource: text must be str, not {type(text).__name__}")
        self.uri = uri
        self.text = text
        self.data = None if data is None else _check_bytes("Resource", data)
        self.mime_type = mime_type or ("text/plain" if text is not None else "application/octet-stream")

    def save(self, path: str) -> str:
        """Write the contents (text as UTF-8) to path and return path."""
        with open(path, "wb") as f:
            f.write(self.data if self.data is not None else (self.text or "").encode())
        return path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and (self.uri, self.mime_type, self.text, self.data) == (
            other.uri, other.mime_type, other.text, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        size = f"{len(self.text)} chars" if self.text is not None else f"{len(self.data or b'')} bytes"
        return f"Resource({self.uri!r}, {self.mime_type}, {size})"


EmbeddedResource = Resource


class ResourceLink:
    """A link to a resource a tool returned instead of its contents.
    read() fetches it from the server whose tool returned it."""

    __slots__ = ("uri", "name", "mime_type", "title", "description", "size", "server")

    def __init__(self, uri: str, name: str = "", mime_type: str | None = None, title: str | None = None,
                 description: str | None = None, size: int | None = None, server: str | None = None) -> None:
        self.uri = uri
        self.name = name
        self.mime_type = mime_type
        self.title = title
        self.description = description
        self.size = size
        self.server = server

    def read(self) -> Any:
        """Read the linked resource (cexec.read_resource on the server that
        returned the link)."""
        if not self.server:
            raise ValueError("ResourceLink.read: the link's server is not known; call read_resource(server, uri)")
        from cexec import read_resource
        return read_resource(self.server, self.uri)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceLink) and (self.uri, self.name, self.mime_type) == (
            other.uri, other.name, other.mime_type)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ResourceLink({self.uri!r}, {self.mime_type or 'unknown type'})"


def resource(item: Any) -> Resource:
    """A Resource from MCP resource contents ({uri, mimeType, text|blob})."""
    if not isinstance(item, dict):
        raise TypeError(f"resource contents must be an object, not {type(item).__name__}")
    uri, mime = str(item.get("uri") or ""), item.get("mimeType") or None
    if "blob" in item:
        return Resource(uri, mime, data=_b64decode(item["blob"]))
    return Resource(uri, mime, text=str(item.get("text") or ""))


def item(it: Any, server: str | None) -> Any:
    """One MCP content item as a Python value; an unknown kind, or one
    missing its parts, stays a dict."""
    if not isinstance(it, dict):
        return it
    kind = it.get("type")
    if kind == "text":
        return it.get("text", "")
    if kind == "image":
        return Image(_b64decode(it.get("data")), it.get("mimeType") or None)
    if kind == "audio":
        return Audio(_b64decode(it.get("data")), it.get("mimeType") or None)
    if kind == "resource" and isinstance(it.get("resource"), dict):
        return resource(it["resource"])
    if kind == "resource_link":
        size = it.get("size")
        return ResourceLink(str(it.get("uri") or ""), str(it.get("name") or ""), it.get("mimeType") or None,
                            it.get("title") or None, it.get("description") or None,
                            size if isinstance(size, int) else None, server)
    return it


def decode(value: Any, server: str | None = None) -> Any:
    """A call_tool result as the program gets it: envelopes opened."""
    if type(value) is dict and len(value) == 1:
        if CONTENT_KEY in value and isinstance(value[CONTENT_KEY], list):
            items = [item(it, server) for it in value[CONTENT_KEY]]
            return items[0] if len(items) == 1 else items
        if VALUE_KEY in value:
            return value[VALUE_KEY]
    return value


# Leading bytes of common formats, for bytes shown without a mime type.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
)


def sniff(data: bytes) -> str:
    """The mime type data's first bytes name, else application/octet-stream."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    return "application/octet-stream"


def is_text_mime(mime: str) -> bool:
    m = mime.split(";", 1)[0].strip().lower()
    return m.startswith("text/") or m in ("application/json", "application/xml", "application/yaml",
                                          "application/x-yaml", "image/svg+xml") or m.endswith("+json")


def binary_params(kind: str, data: bytes, mime: str, name: str | None, uri: str = "") -> dict[str, Any]:
    """show()'s params for binary data; text-typed bytes go as text, which
    the host checks for PII."""
    p: dict[str, Any] = {"kind": kind, "mimeType": mime}
    if name:
        p["name"] = name
    if uri:
        p["uri"] = uri
    if kind == "resource" and is_text_mime(mime):
        try:
            p["text"] = data.decode("utf-8")
            return p
        except UnicodeDecodeError:
            pass
    p["data"] = b64encode(data)
    return p
