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
from profiler_core.rundir import PROFILE_NAME, is_multi_rank
from profiler_core.schema import Profile

TOOL_MODULES = (
    "mcp_server.tools.capture",
    "mcp_server.tools.runs",
    "mcp_server.tools.profile",
    "mcp_server.tools.analysis",
    "mcp_server.tools.roofline",
    "mcp_server.tools.passes",
    "mcp_server.tools.walltime",
    "mcp_server.tools.optimize",
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
    """The profile ``given`` names, inside the workspace, and the profile it holds.

    ``given`` is a profile.json, or a run directory: its profile.json while current, else the
    run attributed now (as the CLI does). The path returned is the profile.json's either way,
    so outputs written beside it land in the run directory.
    """
    path = ws.existing(given, what="profile.json or run directory")
    if path.is_dir():
        if is_multi_rank(path):
            raise ToolError(f"{given}: a multi-rank run has one profile per rank; pass "
                            f"{Path(given) / 'rank0'} (or another rank), or call attribute(run_dir='{given}')")
        return path / PROFILE_NAME, api.load_profile(path)
    return path, api.load_profile(path)


def register_all(mcp: MCPServer, ctx: ToolContext) -> None:
    """Register every domain's tools on ``mcp``."""
    for name in TOOL_MODULES:
        importlib.import_module(name).register(mcp, ctx)
