"""A small knowledge-base MCP server, written with the official SDK, for tests/pysolate/test_mcp.py.

Run as a stdio server (``python mcp_kb_server.py``) or imported for an in-process
``mcp.Client(server)``. Its tools cover what ``pysolate.mcp`` maps: a read-only closed-world
``lookup`` and ``search`` (models returned as structured content), an open-world
``web_search`` (text content), a ``save_note`` write, a failing tool, and ``calls``, the
server's own log of every call with the ``time.monotonic()`` it started at (the same clock
as anyio's in the test process), so a test can tell which calls ran before a stream ended.
"""

from __future__ import annotations

import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

CLOSED = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class Doc(BaseModel):
    title: str
    score: float


def make_server() -> MCPServer:
    """A fresh server with its own notes and call log."""
    server = MCPServer("kb", log_level="CRITICAL")
    notes = {"intro": "hello", "faq": "read the docs"}
    log: list[list[object]] = []

    def logged(tool: str, *args: object) -> None:
        log.append([tool, list(args), time.monotonic()])

    @server.tool(annotations=CLOSED)
    async def lookup(key: str, default: str = "") -> str:
        """A note by key."""
        logged("lookup", key)
        await anyio.sleep(0.05)
        return notes.get(key, default)

    @server.tool(annotations=CLOSED)
    async def search(query: str, limit: int = 2, tag: str | None = None) -> list[Doc]:
        """Documents matching a query."""
        logged("search", query, limit, tag)
        await anyio.sleep(0.05)
        return [Doc(title=f"{query}-{tag or 'any'}-{i}", score=i / 2) for i in range(limit)]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def web_search(query: str) -> str:
        """The live web (open world)."""
        logged("web_search", query)
        return f"web results for {query}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def save_note(key: str, text: str) -> None:
        """Store a note."""
        logged("save_note", key)
        notes[key] = text

    @server.tool(annotations=CLOSED)
    def fail(x: int) -> int:
        """Always fails."""
        logged("fail", x)
        raise ValueError(f"bad x={x}")

    @server.tool()
    def calls() -> list[list[object]]:
        """The call log (for the test; never registered)."""
        return log

    return server


if __name__ == "__main__":
    make_server().run()
