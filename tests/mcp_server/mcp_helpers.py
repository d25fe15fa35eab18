"""Helpers for the MCP server tests: an in-process client, calls checked against output schemas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
from mcp import Client
from mcp.types import CallToolResult

from mcp_server.server import ServerConfig, create_server

# The real H200 capture as a run directory (no manifest): every phase of one compiled workload.
JOINABLE_FILES = ("kineto.json", "nsys.sqlite", "ncu_full_raw.csv", "torch_trace.tgz", "tiny_attention.py")


@asynccontextmanager
async def connect(**config: Any) -> AsyncIterator[Client]:
    """An in-process client of a server built from ``ServerConfig(**config)``."""
    async with Client(create_server(ServerConfig(**config)), raise_exceptions=True) as client:
        yield client


async def call_ok(client: Client, name: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """Call a tool, assert it succeeded and that its structured output matches its output schema."""
    result = await client.call_tool(name, args or {}, **kw)
    assert not result.is_error, result.content[0].text if result.content else result
    tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools[name].output_schema
    assert schema is not None, f"{name} has no output schema"
    jsonschema.validate(result.structured_content, schema)
    return result.structured_content


async def call_err(client: Client, name: str, args: dict[str, Any] | None = None) -> str:
    """Call a tool that must fail; return the error text the model reads."""
    result: CallToolResult = await client.call_tool(name, args or {})
    assert result.is_error, result.structured_content
    return result.content[0].text


# The real H200 pair (baseline FP32 / optimized BF16+QKV+SDPA), as two run directories.
PAIR_FILES = {"kineto.json": "{side}_kineto.json", "ncu_full_raw.csv": "{side}_ncu_raw.csv",
              "output_code.log": "{side}_fusion_comments.txt"}
