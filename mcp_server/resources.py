"""Runs and profiles as MCP resources, and the server that lists them with the workspace it follows.

    oprof://runs                         every run directory in the workspace (what list_runs returns)
    oprof://run/<quoted run dir>         one run: manifest summary, artifacts, profile path
    oprof://profile/<quoted profile>     one attributed profile: its compact summary (a few KB)

The run and profile resources are listed from the workspace at each ``resources/list``, so a
new capture shows up without a restart. :class:`WorkspaceServer` also asks a client that
offers roots for them before its first tool call or resource read (mcp_server.roots).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import anyio
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import Resource

from mcp_server.config import ToolContext
from mcp_server.results import OprofServer
from mcp_server.roots import ClientRoots
from mcp_server.runs import collect_runs
from profiler_core.errors import ProfilerError

SCHEME = "oprof://"
RUNS_URI = f"{SCHEME}runs"
MAX_LISTED = 50  # run (and profile) resources listed, newest first; oprof://runs has them all
JSON = "application/json"


def run_uri(run_dir: str | Path) -> str:
    return f"{SCHEME}run/{quote(str(run_dir), safe='')}"


def profile_uri(profile: str | Path) -> str:
    return f"{SCHEME}profile/{quote(str(profile), safe='')}"


def _runs_document(ctx: ToolContext) -> dict[str, Any]:
    ws = ctx.workspace
    runs = collect_runs(list(ws.roots), inside=ws.contains)
    return {"searched": [str(r) for r in ws.roots], "runs": [r.model_dump(mode="json") for r in runs]}


def list_run_resources(ctx: ToolContext) -> list[Resource]:
    """The listing resource, then each run (and its profile, once attributed), newest first."""
    ws = ctx.workspace
    out = [Resource(uri=RUNS_URI, name="runs", title="Capture runs in the workspace", mime_type=JSON,
                    description="Every run directory (manifest.json or profile.json), newest first.")]
    for run in collect_runs(list(ws.roots), inside=ws.contains)[:MAX_LISTED]:
        label = f"{Path(run.run_dir).name} ({run.workload or 'unknown workload'}, {run.status or 'no status'})"
        out.append(Resource(uri=run_uri(run.run_dir), name=f"run:{Path(run.run_dir).name}", title=label,
                            mime_type=JSON, description=f"Run directory {run.run_dir}"))
        if run.profile:
            out.append(Resource(uri=profile_uri(run.profile), name=f"profile:{Path(run.run_dir).name}",
                                title=f"Profile of {label}", mime_type=JSON,
                                description=f"Compact summary of {run.profile} (top operators, findings)"))
    return out


def read_run_resource(ctx: ToolContext, uri: str) -> str:
    """The JSON text of one oprof:// resource (a ResourceError naming the fix when it cannot be read)."""
    from mcp_server.runs import read_run

    ws = ctx.workspace
    if uri == RUNS_URI:
        return json.dumps(_runs_document(ctx), separators=(",", ":"))
    kind, _, quoted = uri[len(SCHEME):].partition("/")
    if kind not in ("run", "profile") or not quoted:
        raise ResourceNotFoundError(f"{uri}: no such resource; read {RUNS_URI} for the runs")
    try:
        with ws.confined():
            path = ws.resolve(unquote(quoted))
            if kind == "run":
                if not path.is_dir():
                    raise ResourceNotFoundError(f"{uri}: {path} is not a run directory; read {RUNS_URI}")
                return read_run(path, inside=ws.contains).model_dump_json()
            if not path.is_file():
                raise ResourceNotFoundError(f"{uri}: no profile.json at {path}; attribute its run first")
            from profiler_core import api

            summary = api.Report(api.load_profile(path)).summary()
            return json.dumps({"profile": str(path), "summary": summary}, separators=(",", ":"))
    except ProfilerError as err:
        raise ResourceError(f"{uri}: {err}") from err


class WorkspaceServer(OprofServer):
    """The oprof server: tools, the run and profile resources, and the client's roots honoured."""

    tool_context: ToolContext | None = None
    client_roots: ClientRoots | None = None

    def attach(self, ctx: ToolContext, client_roots: ClientRoots) -> None:
        self.tool_context, self.client_roots = ctx, client_roots

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self.client_roots is not None and context is not None:
            await self.client_roots.apply(context)
        return await super().call_tool(name, arguments, context)

    async def list_resources(self) -> list[Resource]:
        listed = await super().list_resources()
        if self.tool_context is None:
            return listed
        return [*listed, *await anyio.to_thread.run_sync(list_run_resources, self.tool_context)]

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        text = str(uri)
        if self.tool_context is None or not text.startswith(SCHEME):
            return await super().read_resource(uri, context)
        if self.client_roots is not None and context is not None:
            await self.client_roots.apply(context)
        content = await anyio.to_thread.run_sync(read_run_resource, self.tool_context, text)
        return [ReadResourceContents(content=content, mime_type=JSON)]
