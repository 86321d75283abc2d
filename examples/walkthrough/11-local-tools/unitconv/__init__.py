"""Unit conversions, as a local tools package.

Copied into the daemon's servers_dir by this example's run.sh: cexec reads
the functions' signatures and docstrings, lists them in its catalog and
search, and sandboxed programs import them like any tool stub. They run
inside the sandbox as plain Python: no MCP server, no tool call.
"""

from __future__ import annotations

__all__ = ["convert_length"]

_METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "mi": 1609.344}


def convert_length(value: float, from_unit: str, to_unit: str) -> dict[str, float | str]:
    """Convert a length between units (mm, cm, m, km, in, ft, mi).

    Args:
        value: the length to convert.
        from_unit: the unit of value.
        to_unit: the unit wanted.

    Returns:
        {"value": the converted length rounded to 4 decimals, "unit": to_unit}.
    """
    for u in (from_unit, to_unit):
        if u not in _METRES:
            raise ValueError(f"unknown unit {u!r}; use one of {', '.join(_METRES)}")
    return {"value": round(value * _METRES[from_unit] / _METRES[to_unit], 4), "unit": to_unit}
