"""``oprof-mcp``: the MCP server over profiler_core (stdio by default, streamable HTTP on request).

    oprof-mcp                           # stdio; the workspace is the working directory
    oprof-mcp --root ~/models --root /data/runs
    oprof-mcp --http --port 8765        # streamable HTTP on 127.0.0.1:8765/mcp

Tools are thin adapters over the library; file arguments must lie inside the workspace
roots. stdout carries only the protocol: logs go to stderr.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp.server import MCPServer

from mcp_server.config import ServerConfig, ToolContext
from mcp_server.results import OprofServer
from mcp_server.tools import register_all
from mcp_server.workspace import ENV_VAR, roots_from_env
from profiler_core import __version__
from profiler_core.errors import ProfilerError

logger = logging.getLogger(__name__)

SERVER_NAME = "oprof"
DEFAULT_PORT = 8765
INSTRUCTIONS = (
    "operator-profiler: which PyTorch operator is slow on an NVIDIA GPU, and why (hardware counters per "
    "operator). Typical flow: capture a workload (a job: capture_status, capture_result), attribute the "
    "run, diagnose, list_passes / apply_pass, capture the optimized workload, compare, report. "
    "Every kernel's attribution carries an evidence tier and confidence; file arguments must lie inside "
    "the workspace roots."
)

__all__ = ["ServerConfig", "create_server", "main"]


def create_server(config: ServerConfig | None = None) -> MCPServer:
    """Build the server: workspace roots, capture job manager and every tool."""
    ctx = ToolContext.from_config(config or ServerConfig())

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[ToolContext]:
        try:
            yield ctx
        finally:
            # A capture must not outlive its server: stop its processes on the way out.
            await anyio.to_thread.run_sync(ctx.jobs.shutdown)

    mcp = OprofServer(SERVER_NAME, title="operator-profiler", version=__version__, instructions=INSTRUCTIONS,
                    lifespan=lifespan, log_level="WARNING")
    register_all(mcp, ctx)
    logger.info("workspace roots: %s", ", ".join(str(r) for r in ctx.workspace.roots))
    return mcp


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oprof-mcp", description="MCP server for operator-profiler (stdio unless --http).")
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help=f"workspace root (repeatable); default ${ENV_VAR} (os.pathsep-separated), "
                             "else the working directory")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="where new captures go (inside a root); default <first root>/oprof-runs")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1",
                        help="HTTP bind address (default 127.0.0.1; anything else exposes the tools)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="stderr log level")
    parser.add_argument("--version", action="version", version=f"oprof-mcp {__version__}")
    return parser


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``oprof-mcp``)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    roots = tuple(Path(r) for r in args.root) or roots_from_env()  # empty: ToolContext takes the cwd
    try:
        mcp = create_server(ServerConfig(roots=roots, runs_dir=args.runs_dir))
    except ProfilerError as err:
        sys.stderr.write(f"oprof-mcp: error: {err}\n")
        raise SystemExit(2) from None
    if not args.http:
        mcp.run()
        return
    if not _is_loopback(args.host):
        logger.warning("serving on %s: every tool (captures run code) is reachable from the network",
                       args.host)
    mcp.run(transport="streamable-http", host=args.host, port=args.port)
