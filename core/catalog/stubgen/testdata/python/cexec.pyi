# Typing stub of the sandbox runtime module (the real one lives in /cexec/lib), so that mypy
# can check the generated stubs without it.
from typing import Any

def call_tool(server: str, tool: str, arguments: dict[str, Any]) -> Any: ...
