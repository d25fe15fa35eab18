"""``list_runs``: the run directories in the workspace, newest first, with their manifest summary."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

from mcp_server.arguments import PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.models import ListRunsResult
from mcp_server.runs import find_run_dirs, read_run, sort_key
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
        """Run directories (holding manifest.json or profile.json): workload, status, GPU, settings, files."""
        with tool_errors(ws):
            tops = [ws.existing_dir(under)] if under else list(ws.roots)
            seen: set[str] = set()
            runs = []
            for top in tops:
                for run_dir in find_run_dirs(top):
                    if str(run_dir) not in seen:
                        seen.add(str(run_dir))
                        runs.append(read_run(run_dir, inside=ws.contains))
            runs.sort(key=sort_key, reverse=True)
            listed = runs[:limit]
            more = "raise limit, or pass under= to narrow the search"
            return ListRunsResult(searched=[str(t) for t in tops], runs=listed,
                                  showing=showing(len(listed), len(runs), "runs, newest first", more))
