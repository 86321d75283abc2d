# Typing stub of the sandbox runtime module (pluginapi/sandbox/runtime/python/cexec, mounted
# at /cexec/lib), with call_tool's real signature, so mypy checks the stubs against it alone.
from typing import Any, Mapping

def call_tool(server: str, tool: str, arguments: Mapping[str, Any] | None = None) -> Any: ...
