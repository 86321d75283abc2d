"""Pluck fields out of nested JSON (tool results, API responses, state files).

Paths are dotted keys with brackets:

    user.name            key lookup
    items[0] items[-1]   list index (negative counts from the end)
    items[*] items.*     every element of a list, or every value of an object
    **.id                every "id" at any depth
    ["odd.key"]          a key with dots, spaces or brackets in it
    items[?state==open]  elements whose field compares: == != > >= < <=
    items[?labels]       elements whose field is present and truthy
"""

from __future__ import annotations

import json
import re

__all__ = ["query", "get", "project", "find", "unwrap", "PathError"]

_MISSING = object()


class PathError(ValueError):
    """The path does not parse."""


def query(data, path: str) -> list:
    """Return every value at path in data (a list, possibly empty).

    data may also be JSON text or an MCP tool result; see unwrap().
    """
    current = [unwrap(data)]
    for step in _parse(path):
        current = [out for value in current for out in step(value)]
    return current


def get(data, path: str, default=None):
    """Return the first value at path, or default when there is none."""
    found = query(data, path)
    return found[0] if found else default


def project(data, fields, path: str | None = None) -> list[dict]:
    """Turn records into small dicts with only the fields asked for.

    fields maps output names to paths ({"id": "id", "author": "user.login"})
    or is a list of paths (each path is also the name). The records are data
    itself (a list, or one object) or, with path, the values at path.
    Missing fields are None.
    """
    if isinstance(fields, (list, tuple)):
        fields = {f: f for f in fields}
    records = query(data, path) if path else unwrap(data)
    if isinstance(records, dict):
        records = [records]
    return [{name: get(rec, p) for name, p in fields.items()} for rec in records]


def find(data, key: str) -> list:
    """Return the values of every key named key, at any depth, in document order."""
    out = []
    stack = [unwrap(data)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if key in value:
                out.append(value[key])
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return out


def unwrap(data):
    """Return the data inside common wrappers.

    JSON text is parsed. An MCP tool result dict gives its structuredContent,
    else the JSON (or text) of its text content items: one item gives its
    value, several a list. Anything else is returned as it is.
    """
    if isinstance(data, (str, bytes)):
        try:
            return json.loads(data)
        except ValueError:
            return data
    if isinstance(data, dict) and isinstance(data.get("content"), list) and set(data) <= {
            "content", "structuredContent", "isError", "_meta"}:
        if data.get("structuredContent") is not None:
            return data["structuredContent"]
        texts = [unwrap(c["text"]) for c in data["content"] if isinstance(c, dict) and c.get("type") == "text"]
        return texts[0] if len(texts) == 1 else texts
    return data


# ---- path parsing -----------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<dot>\.)
  | \[\s*(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*\]
  | \[\s*(?P<index>-?\d+)\s*\]
  | \[\s*(?P<all>\*?)\s*\]
  | \[\?\s*(?P<filter>[^\]]+)\]
  | (?P<deep>\*\*)
  | (?P<star>\*)
  | (?P<key>[^.\[\]]+)
""", re.VERBOSE)

_FILTER = re.compile(r"^(?P<field>[^=!<>]+?)\s*(?:(?P<op>==|!=|>=|<=|>|<|=)\s*(?P<value>.*?))?\s*$")


def _parse(path: str):
    path = path.strip()
    if path in ("", "$", "."):
        return []
    if path.startswith("$"):
        path = path[1:].lstrip(".")
    steps = []
    pos = 0
    expect_name = True
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            raise PathError(f"cannot parse path {path!r} at position {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "dot":
            if expect_name:
                raise PathError(f"empty key in path {path!r} at position {m.start()}")
            expect_name = True
            continue
        if kind in ("key", "star", "deep") and not expect_name:
            raise PathError(f"missing '.' before {m.group()!r} in path {path!r}")
        expect_name = False
        if kind == "key":
            steps.append(_key(m.group("key").strip()))
        elif kind == "quoted":
            steps.append(_key(_unquote(m.group("quoted"))))
        elif kind == "index":
            steps.append(_index(int(m.group("index"))))
        elif kind in ("all", "star"):
            steps.append(_children)
        elif kind == "deep":
            steps.append(_descendants)
        else:
            steps.append(_filter(m.group("filter"), path))
    if expect_name:
        raise PathError(f"path {path!r} ends with '.'")
    return steps


def _unquote(text: str) -> str:
    if text.startswith("'"):
        text = '"' + text[1:-1].replace('\\"', '"').replace('"', '\\"') + '"'
    return json.loads(text)


def _key(name: str):
    def step(value):
        if isinstance(value, dict):
            if name in value:
                return [value[name]]
            return []
        if isinstance(value, list) and re.fullmatch(r"-?\d+", name):
            return _index(int(name))(value)
        return []
    return step


def _index(i: int):
    def step(value):
        if isinstance(value, list) and -len(value) <= i < len(value):
            return [value[i]]
        return []
    return step


def _children(value):
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _descendants(value):
    out = []
    stack = [value]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(_children(v)))
    return out


def _filter(expr: str, path: str):
    m = _FILTER.match(expr)
    if not m:
        raise PathError(f"cannot parse filter [?{expr}] in path {path!r}")
    field_steps = _parse(m.group("field").strip())
    op = m.group("op")
    want = _literal(m.group("value")) if op else None

    def field(item):
        current = [item]
        for s in field_steps:
            current = [out for v in current for out in s(v)]
        return current[0] if current else _MISSING

    def keep(item):
        got = field(item)
        if op is None:
            return got is not _MISSING and bool(got)
        if got is _MISSING:
            return op == "!="
        if op in ("==", "="):
            return _equal(got, want)
        if op == "!=":
            return not _equal(got, want)
        try:
            return {">": got > want, ">=": got >= want, "<": got < want, "<=": got <= want}[op]
        except TypeError:
            return False

    def step(value):
        items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        return [item for item in items if keep(item)]
    return step


def _literal(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return _unquote(text)
    try:
        return json.loads(text)  # numbers, true, false, null
    except ValueError:
        return text


def _equal(got, want) -> bool:
    if got == want:
        return True
    # "42" in the data and 42 in the filter (or the reverse) are the same to a reader.
    return isinstance(got, (str, int, float)) and isinstance(want, (str, int, float)) and str(got) == str(want)
