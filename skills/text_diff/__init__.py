"""Compare two texts: unified diffs, change lists, word diffs and statistics."""

from __future__ import annotations

import difflib
import re

__all__ = ["diff", "diff_files", "changes", "word_diff", "stats"]

_NO_NEWLINE = "\\ No newline at end of file\n"


def diff(a, b, *, from_name: str = "a", to_name: str = "b", context: int = 3,
         ignore_whitespace: bool = False) -> str:
    """Return the unified diff of a and b (texts or lists of lines), as
    `diff -u` prints it; "" when they are equal.

    ignore_whitespace compares lines with runs of blanks collapsed and ends
    stripped, but shows the lines as they are.
    """
    old, new = _lines(a), _lines(b)
    if ignore_whitespace:
        return _diff_ignoring_space(old, new, from_name, to_name, context)
    out = []
    for line in difflib.unified_diff(old, new, from_name, to_name, n=context):
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n" + _NO_NEWLINE)
    return "".join(out)


def diff_files(path_a: str, path_b: str, *, encoding: str = "utf-8", **options) -> str:
    """Return the unified diff of two text files, named by their paths."""
    with open(path_a, encoding=encoding, newline="") as f:
        a = f.read()
    with open(path_b, encoding=encoding, newline="") as f:
        b = f.read()
    options.setdefault("from_name", path_a)
    options.setdefault("to_name", path_b)
    return diff(a, b, **options)


def changes(a, b) -> list[dict]:
    """Return the differences as a list of dicts, for programs rather than
    people: {"op": "insert"|"delete"|"replace", "a": [start, end], "b":
    [start, end], "old": [lines], "new": [lines]}, with 1-based line numbers
    and end exclusive."""
    old, new = _lines(a), _lines(b)
    out = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        out.append({
            "op": op,
            "a": [i1 + 1, i2 + 1],
            "b": [j1 + 1, j2 + 1],
            "old": [line.rstrip("\n") for line in old[i1:i2]],
            "new": [line.rstrip("\n") for line in new[j1:j2]],
        })
    return out


def word_diff(a: str, b: str) -> str:
    """Mark word-level changes inline, as `git diff --word-diff` does:
    [-removed-]{+added+}. Good for prose and one-line values."""
    old, new = re.findall(r"\s+|\S+", a), re.findall(r"\s+|\S+", b)
    out = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append("".join(old[i1:i2]))
            continue
        if i2 > i1:
            out.append("[-" + "".join(old[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + "".join(new[j1:j2]) + "+}")
    return "".join(out)


def stats(a, b) -> dict:
    """Summarise how much changed: lines added and removed, the number of
    changed regions, and a similarity ratio from 0 (nothing shared) to 1."""
    old, new = _lines(a), _lines(b)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    added = removed = regions = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        regions += 1
        removed += i2 - i1
        added += j2 - j1
    return {
        "identical": old == new,
        "lines_a": len(old),
        "lines_b": len(new),
        "added": added,
        "removed": removed,
        "changed_regions": regions,
        "similarity": round(matcher.ratio(), 4) if old or new else 1.0,
    }


def _lines(text) -> list[str]:
    if isinstance(text, (list, tuple)):
        return [line if line.endswith("\n") else line + "\n" for line in text]
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text.splitlines(keepends=True)


def _diff_ignoring_space(old, new, from_name, to_name, context):
    def norm(line):
        return " ".join(line.split())
    matcher = difflib.SequenceMatcher(None, [norm(x) for x in old], [norm(x) for x in new], autojunk=False)
    out = []
    for group in matcher.get_grouped_opcodes(context):
        if not out:
            out += [f"--- {from_name}\n", f"+++ {to_name}\n"]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for op, a1, a2, b1, b2 in group:
            if op == "equal":
                out += [" " + line for line in old[a1:a2]]  # context from a, as diff -w shows it
                continue
            out += ["-" + line for line in old[a1:a2]]
            out += ["+" + line for line in new[b1:b2]]
    return "".join(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE for line in out)


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1 if length else start
    return f"{first}" if length == 1 else f"{first},{length}"
