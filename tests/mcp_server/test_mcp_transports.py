"""The real entry point over its transports: ``python -m mcp_server`` on stdio, and on HTTP."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.anyio
@pytest.mark.slow
async def test_stdio_subprocess(joinable_ws: Path) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mcp_server", "--root", str(joinable_ws)],
                                   env={"PYTHONPATH": str(REPO)}, cwd=str(REPO))
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"capture", "attribute", "list_runs", "list_passes"} <= names
        passes = await client.call_tool("list_passes", {})
        assert not passes.is_error and "sdpa" in {p["name"] for p in passes.structured_content["passes"]}
        assert (await client.call_tool("list_runs", {})).structured_content["runs"] == []
        attributed = await client.call_tool("attribute", {"run_dir": "h200", "top_k": 3})
        assert not attributed.is_error, attributed.content[0].text
        assert attributed.structured_content["kernel_count"] == 44
        runs = (await client.call_tool("list_runs", {})).structured_content["runs"]
        assert [r["profile"] for r in runs] == [str((joinable_ws / "h200" / "profile.json").resolve())]
        outside = await client.call_tool("get_operator", {"profile": "/etc/passwd", "operator": "x"})
        assert outside.is_error and "outside the workspace" in outside.content[0].text


READY_DEADLINE_S = 120  # generous: a loaded machine; the line comes as soon as the port is bound


def wait_for_announcement(proc: subprocess.Popen[bytes], line: str) -> None:
    """Read the server's stderr until it announces ``line``; fail naming what was awaited and what came."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        text = proc.stderr.readline().decode(errors="replace")
        if not text:
            break
        seen.append(text.rstrip())
        if line in text:
            return
    pytest.fail(f"oprof-mcp did not announce {line!r} on stderr within {READY_DEADLINE_S} s "
                f"(exit status {proc.poll()}); its stderr: {seen[-10:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
@pytest.mark.slow
async def test_http_binds_loopback_and_keeps_stdout_clean(workspace: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcp_server", "--http", "--port", str(port),
                             "--root", str(workspace)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await anyio.to_thread.run_sync(wait_for_announcement, proc, f"serving http://127.0.0.1:{port}/mcp")
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            result = await client.call_tool("list_runs", {})
            assert not result.is_error and result.structured_content["searched"] == [str(workspace.resolve())]
    finally:
        proc.terminate()
        stdout, _ = proc.communicate(timeout=10)
    assert stdout == b""
