"""JSON for frames, straight from the interpreter's C accelerators (_json).

The json package would do the same work, but importing it imports re and
enum, a quarter of the zygote's start-up before it can report ready (a
fresh sandbox's execution waits for that); and json.dumps with arguments
builds a JSONEncoder on every call. The results are those of
json.dumps(obj, separators=(",", ":"), allow_nan=False) and
json.loads(payload)."""

from __future__ import annotations

from _json import encode_basestring_ascii, make_encoder, make_scanner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"


def _default(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def dumps(obj: Any) -> str:
    """Serialize obj compactly; NaN and Infinity are refused (ValueError),
    as are objects JSON has no form for (TypeError) and cycles."""
    return "".join(make_encoder({}, _default, encode_basestring_ascii, None, ":", ",", False, False, False)(obj, 0))


class _Context:
    """What the C scanner reads its options from (json.JSONDecoder's
    defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict[str, str] = {}


# typeshed types the context as a scanner: the C code reads only the
# attributes above.
_scan = make_scanner(_Context())  # type: ignore[arg-type]


def loads(data: bytes | str) -> Any:
    """Decode one JSON value, with nothing but whitespace around it; a
    ValueError says what is wrong."""
    s = data.decode("utf-8", "surrogatepass") if isinstance(data, (bytes, bytearray)) else data
    start = len(s) - len(s.lstrip(_WHITESPACE))
    try:
        value, end = _scan(s, start)
    except StopIteration as e:
        raise ValueError(f"Expecting value: char {e.value}") from None
    if s[end:].strip(_WHITESPACE):
        raise ValueError(f"Extra data: char {end}")
    return value
