"""``pysolate.integrations.mcp`` (MCP servers' tools as Host capabilities) under its first name."""

from .integrations.mcp import MCP_TOOL_ERROR as MCP_TOOL_ERROR
from .integrations.mcp import RegisteredTool as RegisteredTool
from .integrations.mcp import ToolSession as ToolSession
from .integrations.mcp import register as register

__all__ = ["MCP_TOOL_ERROR", "RegisteredTool", "ToolSession", "register"]
