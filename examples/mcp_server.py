"""A small MCP server (the official SDK, stdio) for examples/mcp_tools.py: a docs search
(read-only, closed world: its annotations propose `immutable_read`) and a note store."""

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("kb", log_level="CRITICAL")
notes: dict[str, str] = {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
async def search(query: str) -> list[str]:
    """Search the docs."""
    await anyio.sleep(0.5)  # a slow search backend
    return [f"{query}: page 1", f"{query}: page 2"]


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def save_note(text: str) -> str:
    """Save a note for the user."""
    notes[str(len(notes))] = text
    return f"saved {text!r}"


if __name__ == "__main__":
    server.run()
