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


def test_the_server_serves_with_numpy_huge_page_advice_off(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    """The tools read and analyse profiles in the server's process, as oprof's commands do: it serves
    with NumPy's huge-page advice off (profiler_core/numpy_pages.py) and restores it after."""
    import numpy as np

    import mcp_server.server as server
    from profiler_core import numpy_pages

    setter = numpy_pages._advice_setter()
    if setter is None:
        pytest.skip("this NumPy has no huge-page switch")
    core = getattr(np, "_core", None) or np.core
    seen: list[bool] = []

    class Served:
        def run(self) -> None:
            seen.append(bool(core.multiarray._get_madvise_hugepage()))

    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    monkeypatch.setattr(server, "create_server", lambda config: Served())
    before = setter(True)
    try:
        server.main(["--root", str(tmp_path)])
        assert bool(core.multiarray._get_madvise_hugepage()) is True
    finally:
        setter(before)
    assert seen == [False]
