"""Tool modules, one per domain; each exposes ``register(mcp, ctx)``."""

from __future__ import annotations

import importlib

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

from mcp_server.config import ToolContext

TOOL_MODULES = (
    "mcp_server.tools.capture",
    "mcp_server.tools.runs",
    "mcp_server.tools.profile",
    "mcp_server.tools.analysis",
    "mcp_server.tools.passes",
)


def hints(title: str, *, read_only: bool, destructive: bool = False,
          idempotent: bool = True) -> ToolAnnotations:
    """The behaviour hints every tool carries; no tool reaches beyond the local machine."""
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def register_all(mcp: MCPServer, ctx: ToolContext) -> None:
    """Register every domain's tools on ``mcp``."""
    for name in TOOL_MODULES:
        importlib.import_module(name).register(mcp, ctx)
