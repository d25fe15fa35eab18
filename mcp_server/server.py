"""``oprof-mcp``: the MCP server over profiler_core (stdio by default, streamable HTTP on request).

    oprof-mcp                           # stdio; the workspace is the working directory
    oprof-mcp --root ~/models --root /data/runs
    oprof-mcp --http --port 8765        # streamable HTTP on 127.0.0.1:8765/mcp
    OPROF_MCP_TOKEN=... oprof-mcp --http  # and every request must send that bearer token

Tools are thin adapters over the library; file arguments, and every file they lead to,
must lie inside the workspace roots. Over HTTP, DNS-rebinding protection is always on
(see ``mcp_server.http``). stdout carries only the protocol: logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from mcp_server.config import ServerConfig, ToolContext
from mcp_server.http import BearerTokenMiddleware, is_loopback, security_settings, token_from_env
from mcp_server.prompts import register as register_prompts
from mcp_server.resources import WorkspaceServer
from mcp_server.roots import ClientRoots
from mcp_server.tools import register_all
from mcp_server.workspace import ENV_VAR, roots_from_env
from profiler_core import __version__
from profiler_core.errors import ProfilerError
from profiler_core.numpy_pages import small_pages

logger = logging.getLogger(__name__)

SERVER_NAME = "oprof"
DEFAULT_PORT = 8765
INSTRUCTIONS = (
    "operator-profiler: which PyTorch operator is slow on an NVIDIA GPU, and why (hardware counters per "
    "operator). Typical flow: capture a workload (a job: capture_status, capture_result), attribute the "
    "run, diagnose, list_passes / apply_pass, capture the optimized workload, walltime (baseline and "
    "optimized, end to end), compare, report; or optimize runs that whole loop as one job. Claim a speedup "
    "only from end_to_end (wall time per step), never from profiled kernel time alone. The prompt "
    "'optimize' gives the protocol; runs and profiles are resources (oprof://runs). "
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

    mcp = WorkspaceServer(SERVER_NAME, title="operator-profiler", version=__version__, instructions=INSTRUCTIONS,
                          lifespan=lifespan, log_level="WARNING")
    mcp.attach(ctx, ClientRoots(ctx.workspace, operator_roots=bool(ctx.config.roots)))
    register_all(mcp, ctx)
    register_prompts(mcp)
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
    parser.add_argument("--allowed-host", action="append", default=[], metavar="HOST[:PORT]",
                        help="another Host header to accept (repeatable; the bound address always is)")
    parser.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                        help="another Origin to accept, e.g. http://myhost:8765 (repeatable)")
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], help="stderr log level")
    parser.add_argument("--version", action="version", version=f"oprof-mcp {__version__}")
    return parser


def serve_http(mcp: MCPServer, *, host: str, port: int, allowed_hosts: Sequence[str] = (),
               allowed_origins: Sequence[str] = (), token: str | None = None) -> None:
    """Serve streamable HTTP with explicit Host/Origin allow-lists and, if given, a bearer token."""
    import uvicorn

    security = security_settings(host, port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    app = mcp.streamable_http_app(transport_security=security, host=host)
    served = BearerTokenMiddleware(app, token) if token else app
    logger.info("accepting Host %s", ", ".join(security.allowed_hosts))
    config = uvicorn.Config(served, host=host.strip("[]"), port=port, log_level="warning")

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:  # the readiness line clients and tests wait for (stdout stays clean)
                sys.stderr.write(f"oprof-mcp: serving http://{host}:{port}/mcp\n")
                sys.stderr.flush()

    anyio.run(AnnouncingServer(config).serve)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``oprof-mcp``)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    roots = tuple(Path(r) for r in args.root) or roots_from_env()  # empty: ToolContext takes the cwd
    try:
        mcp = create_server(ServerConfig(roots=roots, runs_dir=args.runs_dir))
        if args.http:
            token = token_from_env()
            security_settings(args.host, args.port, allowed_hosts=args.allowed_host,
                              allowed_origins=args.allowed_origin)  # refuse bad settings before serving
    except ProfilerError as err:
        sys.stderr.write(f"oprof-mcp: error: {err}\n")
        raise SystemExit(2) from None
    if not args.http:
        with small_pages():  # the tools read and analyse profiles in this process, as oprof's commands do
            mcp.run()
        return
    if not is_loopback(args.host) and token is None:
        logger.warning("serving on %s without a bearer token: every tool (captures run code) is reachable "
                       "from the network; set OPROF_MCP_TOKEN", args.host)
    try:
        with small_pages():
            serve_http(mcp, host=args.host, port=args.port, allowed_hosts=args.allowed_host,
                       allowed_origins=args.allowed_origin, token=token)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
