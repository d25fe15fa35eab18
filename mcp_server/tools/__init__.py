"""Tool modules, one per domain; each exposes ``register(mcp, ctx)``."""

from __future__ import annotations

import importlib
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from mcp_server.config import ToolContext
from mcp_server.workspace import Workspace
from profiler_core import api
from profiler_core.schema import Profile

TOOL_MODULES = (
    "mcp_server.tools.capture",
    "mcp_server.tools.runs",
    "mcp_server.tools.profile",
    "mcp_server.tools.analysis",
    "mcp_server.tools.roofline",
    "mcp_server.tools.passes",
)


def hints(title: str, *, read_only: bool, destructive: bool = False,
          idempotent: bool = True) -> ToolAnnotations:
    """The behaviour hints every tool carries; no tool reaches beyond the local machine."""
    return ToolAnnotations(title=title, read_only_hint=read_only, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


def workload_file(ws: Workspace, given: str) -> Path:
    """The workload .py file ``given`` names, inside the workspace."""
    path = ws.existing_file(given, what="workload file")
    if path.suffix != ".py":
        raise ToolError(f"{given}: a workload is a .py file defining get_model_and_inputs(device)")
    return path


def load_profile(ws: Workspace, given: str) -> tuple[Path, Profile]:
    """The profile.json ``given`` names, inside the workspace, and the profile it holds."""
    path = ws.existing_file(given, what="profile.json")
    return path, api.load_profile(path)


def register_all(mcp: MCPServer, ctx: ToolContext) -> None:
    """Register every domain's tools on ``mcp``."""
    for name in TOOL_MODULES:
        importlib.import_module(name).register(mcp, ctx)
