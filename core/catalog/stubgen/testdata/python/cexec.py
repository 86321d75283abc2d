# Stand-in for the sandbox runtime at import-check time: returns what it was asked to send.
from typing import Any


def call_tool(server: str, tool: str, arguments: dict[str, Any]) -> Any:
    return {"server": server, "tool": tool, "arguments": arguments}
