"""``list_runs``: the run directories in the workspace, newest first, with their manifest summary."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

from mcp_server.arguments import PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.models import ListRunsResult
from mcp_server.runs import collect_runs
from mcp_server.tools import hints
from mcp_server.views import showing


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws = ctx.workspace

    @mcp.tool(title="List capture runs", annotations=hints("List capture runs", read_only=True))
    def list_runs(
        under: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Directory to search; default every workspace root.")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Runs to list, newest first.")] = 20,
    ) -> ListRunsResult:
        """Run directories (holding manifest.json or profile.json): workload, status, GPU, settings, files.

        The same listing is the resource oprof://runs; each run is also a resource (oprof://run/...).
        """
        with tool_errors(ws):
            tops = [ws.existing_dir(under)] if under else list(ws.roots)
            runs = collect_runs(tops, inside=ws.contains)
            listed = runs[:limit]
            more = "raise limit, or pass under= to narrow the search"
            return ListRunsResult(searched=[str(t) for t in tops], runs=listed,
                                  showing=showing(len(listed), len(runs), "runs, newest first", more))
