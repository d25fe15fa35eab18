"""Analysis tools: diagnose, compare, report (filled in as profiler_core.analysis lands)."""

from __future__ import annotations

from mcp.server import MCPServer

from mcp_server.config import ToolContext


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    return None
