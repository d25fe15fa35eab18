"""Start-up stays light: nothing heavy (torch, Inductor, pandas) is imported before the server answers.

An MCP client waits for the reply to ``initialize`` (Claude Code about 30 s); importing torch
and Inductor first cost ~10 s of CPU on a quiet machine and failed the connection on a busy one.
Each check runs in a fresh interpreter, since this test process has torch loaded already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "torch._inductor", "pandas", "pyarrow", "numpy", "triton")

SERVE_AND_LIST = """
import json, sys
import anyio
from mcp import Client
from mcp_server.server import ServerConfig, create_server

async def main():
    async with Client(create_server(ServerConfig(roots=(sys.argv[1],)))) as client:
        tools = (await client.list_tools()).tools
        resources = (await client.list_resources()).resources
        prompts = (await client.list_prompts()).prompts
    heavy = [m for m in {heavy!r} if m in sys.modules]
    print(json.dumps({{"tools": len(tools), "resources": len(resources), "prompts": len(prompts), "heavy": heavy}}))

anyio.run(main)
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_importing_the_server_module_imports_no_torch() -> None:
    out = _run(f"import sys, mcp_server.server, mcp_server.__main__; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert out.strip() == "[]"


@pytest.mark.slow
def test_serving_initialize_and_the_listings_imports_no_torch(tmp_path: Path) -> None:
    doc = json.loads(_run(SERVE_AND_LIST.format(heavy=HEAVY), str(tmp_path)).strip().splitlines()[-1])
    assert doc["tools"] >= 20 and doc["resources"] >= 1 and doc["prompts"] == 1
    assert doc["heavy"] == [], f"imported before the first tool call: {doc['heavy']}"
