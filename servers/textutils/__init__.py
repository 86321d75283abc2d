"""Text and CSV helpers that run inside the sandbox as plain Python.

A local tools package: cexec lists these functions in its tool catalog (with
their signatures and docstrings), and sandboxed code imports them directly,
so calling them costs no tool call:

    from servers.textutils import csv_summary, word_count
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from typing import Any

__all__ = ["csv_summary", "word_count"]

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def word_count(text: str, *, top: int = 10, min_length: int = 1) -> dict[str, Any]:
    """Count the words of a text.

    Words are runs of letters and digits (apostrophes and hyphens inside a
    word are kept: "don't", "well-known"), compared case-insensitively.

    Args:
        text: the text to count.
        top: how many of the most frequent words to return.
        min_length: ignore words shorter than this in the frequency list.

    Returns:
        {"words": total words, "unique": distinct words, "lines": lines,
        "characters": characters, "top": [[word, count], ...] most frequent
        first, ties in order of first appearance}.
    """
    words = [w.casefold() for w in _WORD.findall(text)]
    freq = Counter(w for w in words if len(w) >= min_length)
    return {
        "words": len(words),
        "unique": len(set(words)),
        "lines": len(text.splitlines()),
        "characters": len(text),
        "top": [[w, n] for w, n in freq.most_common(max(top, 0))],
    }


def csv_summary(text: str, *, delimiter: str | None = None, top: int = 3) -> dict[str, Any]:
    """Summarise CSV data (with a header row) column by column.

    The delimiter is detected (comma, semicolon, tab or pipe) unless given.
    Numeric columns (every non-empty value an int or a float) get min, max,
    mean and sum; other columns get their most common values.

    Args:
        text: the CSV text, first row the column names.
        delimiter: the field separator; None detects it.
        top: how many most common values to list for text columns.

    Returns:
        {"rows": data rows, "columns": [{"name", "type" ("int", "float",
        "text" or "empty"), "filled": non-empty values, "empty": empty values,
        then "min", "max", "mean", "sum" for numbers or "top": [[value,
        count], ...] for text}]}.
    """
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:65536], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return {"rows": 0, "columns": []}
    header, data = rows[0], rows[1:]
    columns = []
    for i, name in enumerate(header):
        values = [r[i].strip() if i < len(r) else "" for r in data]
        filled = [v for v in values if v]
        column: dict[str, Any] = {"name": name, "filled": len(filled), "empty": len(values) - len(filled)}
        numbers = _numbers(filled)
        if not filled:
            column["type"] = "empty"
        elif numbers is not None:
            if all(isinstance(n, int) for n in numbers):
                column["type"] = "int"
            else:
                column["type"] = "float"
                numbers = [float(n) for n in numbers]
            total = sum(numbers)
            column.update(min=min(numbers), max=max(numbers), mean=total / len(numbers), sum=total)
        else:
            column["type"] = "text"
            column["top"] = [[v, n] for v, n in Counter(filled).most_common(max(top, 0))]
        columns.append(column)
    return {"rows": len(data), "columns": columns}


def _numbers(values: list[str]) -> list[int | float] | None:
    """The values as numbers, or None if any is not one."""
    out: list[int | float] = []
    for v in values:
        try:
            out.append(int(v))
        except ValueError:
            try:
                out.append(float(v))
            except ValueError:
                return None
    return out
