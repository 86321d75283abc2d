"""Summarise CSV data: one pass, per-column types, missing values and stats."""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import Counter
from datetime import datetime, time

__all__ = ["run", "summarize", "format_report"]

MISSING = {"", "na", "n/a", "nan", "null", "none", "-"}
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d.%m.%Y", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")


def run(path: str, *, delimiter: str | None = None, encoding: str = "utf-8-sig",
        top: int = 5, max_rows: int | None = None) -> dict:
    """Summarise the CSV file at path (header row first) and return a dict.

    delimiter is sniffed from the first lines when not given. top is how many
    frequent values to keep for text columns. max_rows stops reading early.
    """
    with open(path, newline="", encoding=encoding) as f:
        sample = f.read(64 * 1024)
        f.seek(0)
        if delimiter is None:
            delimiter = _sniff(sample)
        reader = csv.reader(f, delimiter=delimiter)
        summary = _summarize_reader(reader, top=top, max_rows=max_rows)
    summary["file"] = path
    summary["delimiter"] = delimiter
    return summary


def summarize(data, *, top: int = 5) -> dict:
    """Summarise CSV text, or a list of dicts (rows, e.g. from a tool result)."""
    if isinstance(data, str):
        reader = csv.reader(io.StringIO(data), delimiter=_sniff(data[:64 * 1024]))
        return _summarize_reader(reader, top=top, max_rows=None)
    rows = list(data)
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    table = ([_text(row.get(c)) for c in columns] for row in rows)
    return _summarize_rows(columns, table, top=top, max_rows=None)


def format_report(summary: dict) -> str:
    """Render a summary as a compact text table, one line per column."""
    lines = [f"{summary['rows']} rows x {len(summary['columns'])} columns"]
    for col in summary["columns"]:
        head = f"- {col['name']} ({col['type']}): {col['missing']} missing, {col['unique']} unique"
        if col["type"] in ("int", "float"):
            head += (f"; min {_num(col['min'])}, max {_num(col['max'])}, mean {_num(col['mean'])}, "
                     f"median {_num(col['median'])}, sum {_num(col['sum'])}")
        elif col["type"] == "date":
            head += f"; from {col['min']} to {col['max']}"
        if col.get("top"):
            head += "; top " + ", ".join(f"{v!r} x{n}" for v, n in col["top"])
        lines.append(head)
    return "\n".join(lines)


def _sniff(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        # Ragged rows confuse the sniffer; the header line rarely lies.
        header = sample.split("\n", 1)[0]
        return max(",;\t|", key=header.count) if any(d in header for d in ",;\t|") else ","


def _summarize_reader(reader, *, top: int, max_rows: int | None) -> dict:
    try:
        header = next(reader)
    except StopIteration:
        return {"rows": 0, "columns": []}
    names = _unique_names(header)
    return _summarize_rows(names, reader, top=top, max_rows=max_rows)


def _unique_names(header: list[str]) -> list[str]:
    seen: Counter = Counter()
    names = []
    for i, raw in enumerate(header):
        name = raw.strip() or f"column_{i + 1}"
        seen[name] += 1
        names.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return names


def _summarize_rows(names: list[str], rows, *, top: int, max_rows: int | None) -> dict:
    cols = [_Column(n) for n in names]
    count = 0
    ragged = 0
    for row in rows:
        if max_rows is not None and count >= max_rows:
            break
        count += 1
        if len(row) != len(cols):
            ragged += 1
        for i, col in enumerate(cols):
            col.add(row[i] if i < len(row) else "")
    out = {"rows": count, "columns": [c.result(top) for c in cols]}
    if ragged:
        out["ragged_rows"] = ragged
    return out


class _Column:
    """Collects one column's values and infers its type as it goes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.missing = 0
        self.values: Counter = Counter()
        self.numbers: list[float] = []
        self.dates: list[datetime] = []
        self.kinds = {"int", "float", "date"}  # still possible

    def add(self, raw: str) -> None:
        value = raw.strip()
        if value.lower() in MISSING:
            self.missing += 1
            return
        self.values[value] += 1
        if "int" in self.kinds or "float" in self.kinds:
            number = _parse_number(value)
            if number is None:
                self.kinds -= {"int", "float"}
            else:
                self.numbers.append(number)
                if not float(number).is_integer() or "." in value or "e" in value.lower():
                    self.kinds.discard("int")
        if "date" in self.kinds:
            parsed = _parse_date(value)
            if parsed is None:
                self.kinds.discard("date")
            else:
                self.dates.append(parsed)

    def kind(self) -> str:
        if not self.values:
            return "empty"
        for k in ("int", "float", "date"):
            if k in self.kinds:
                return k
        if set(v.lower() for v in self.values) <= {"true", "false", "yes", "no", "0", "1"}:
            return "bool"
        return "text"

    def result(self, top: int) -> dict:
        kind = self.kind()
        out = {"name": self.name, "type": kind, "missing": self.missing, "unique": len(self.values)}
        if kind in ("int", "float"):
            nums = self.numbers
            out.update(min=min(nums), max=max(nums), sum=sum(nums), mean=statistics.fmean(nums),
                       median=statistics.median(nums),
                       stdev=statistics.stdev(nums) if len(nums) > 1 else 0.0)
            if kind == "int":
                for key in ("min", "max", "sum"):
                    out[key] = int(out[key])
        elif kind == "date":
            out.update(min=_iso(min(self.dates)), max=_iso(max(self.dates)))
        if kind in ("text", "bool") and top > 0:
            out["top"] = [[v, n] for v, n in self.values.most_common(top)]
        return out


def _parse_number(value: str) -> float | None:
    text = value.replace("_", "")
    if text.count(",") and "." not in text and text.count(",") == 1 and len(text.split(",")[1]) != 3:
        text = text.replace(",", ".")  # decimal comma: "3,5"
    else:
        text = text.replace(",", "")  # thousands separators: "1,234,567"
    try:
        number = float(text)
    except ValueError:
        return None
    if math.isnan(number) or math.isinf(number):
        return None
    return number


def _parse_date(value: str) -> datetime | None:
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


def _iso(moment: datetime) -> str:
    return moment.date().isoformat() if moment.time() == time() else moment.isoformat()


def _text(value) -> str:
    return "" if value is None else str(value)


def _num(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
