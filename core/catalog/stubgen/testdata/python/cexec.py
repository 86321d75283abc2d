# Stand-in for the sandbox runtime at import-check time: returns what it was asked to send.
from typing import Any, Mapping


def call_tool(server: str, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
    return {"server": server, "tool": tool, "arguments": dict(arguments or {})}
