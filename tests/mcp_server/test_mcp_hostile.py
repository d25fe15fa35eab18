"""A hostile client: paths that lead out of the workspace, special files, huge paths, clobbering outputs.

Each case runs through the in-memory client on a workspace holding a copy of a shipped
H200 run directory; ``outside`` is a directory beside the workspace holding a "secret" that
must never be read, listed or overwritten. The HTTP cases start the real server process on
127.0.0.1 and stop it at the end of the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"
OTHER_RUN = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace holding run/, a copy of a real run directory; a directory outside with a secret)."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    shutil.copytree(RUN, ws / "run")
    (outside / "secret.json").write_text('{"secret": true}')
    shutil.copy(RUN / "kineto.json.gz", outside / "kineto.json.gz")
    return ws, outside


def _edit_manifest(run: Path, **artifacts: str | None) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["artifacts"].update(artifacts)
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.anyio
async def test_the_untouched_run_attributes(hostile: tuple[Path, Path]) -> None:
    ws, _ = hostile
    async with connect(roots=(ws,)) as client:
        result = await call_ok(client, "attribute", {"run_dir": "run"})
    assert result["kernel_count"] == 30 and (ws / "run" / "profile.json").is_file()


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["symlinked-trace", "absolute-manifest-entry", "dotdot-manifest-entry",
                                 "symlinked-inductor-log"])
async def test_artifacts_leading_out_are_never_read(hostile: tuple[Path, Path], how: str) -> None:
    ws, outside = hostile
    run = ws / "run"
    if how == "symlinked-trace":
        (run / "kineto.json.gz").unlink()
        (run / "kineto.json.gz").symlink_to(outside / "kineto.json.gz")
        match = "outside the workspace"
    elif how == "absolute-manifest-entry":
        _edit_manifest(run, kineto=str(outside / "kineto.json.gz"))
        match = "outside its run directory"
    elif how == "dotdot-manifest-entry":
        _edit_manifest(run, kineto="../../outside/kineto.json.gz")
        match = "outside its run directory"
    else:
        shutil.move(run / "inductor" / "torch_trace.tgz", outside / "torch_trace.tgz")
        (run / "inductor" / "torch_trace.tgz").symlink_to(outside / "torch_trace.tgz")
        match = "outside the workspace"
    async with connect(roots=(ws,)) as client:
        text = await call_err(client, "attribute", {"run_dir": "run"})
        assert match in text, text
        assert not (run / "profile.json").exists()
        runs = (await call_ok(client, "list_runs", {}))["runs"]
    assert all(str(outside) not in path for r in runs for path in r["artifacts"].values())


@pytest.mark.anyio
async def test_an_inductor_folder_never_leads_out(hostile: tuple[Path, Path]) -> None:
    ws, outside = hostile
    shutil.copy(RUN / "inductor" / "output_code.log", outside / "output_code.log")
    folder = ws / "logs"
    folder.mkdir()
    (folder / "a.log").symlink_to(outside / "output_code.log")
    async with connect(roots=(ws,)) as client:
        text = await call_err(client, "attribute", {"kineto": "run/kineto.json.gz", "ncu": "run/counters.csv",
                                                    "inductor": "logs"})
    assert "outside the workspace" in text, text


@pytest.mark.anyio
async def test_list_runs_does_not_reveal_outside_files(hostile: tuple[Path, Path]) -> None:
    ws, outside = hostile
    _edit_manifest(ws / "run", profile=str(outside / "secret.json"), counters_report="../../outside/secret.json")
    async with connect(roots=(ws,)) as client:
        runs = (await call_ok(client, "list_runs", {}))["runs"]
    assert len(runs) == 1
    assert "counters_report" not in runs[0]["artifacts"] and runs[0]["profile"] is None


@pytest.mark.anyio
@pytest.mark.parametrize("special", ["dev-zero", "fifo"])
async def test_special_files_are_refused_before_reading(hostile: tuple[Path, Path], special: str) -> None:
    ws, _ = hostile
    run = ws / "run"
    (run / "kineto.json.gz").unlink()
    target = run / "kineto.json.gz"
    if special == "dev-zero":
        target.symlink_to("/dev/zero")
        # /dev/zero lies outside the workspace; inside one it would still be refused as a device
        match = "outside the workspace"
    else:
        os.mkfifo(target)
        match = "FIFO, not a regular file"
    async with connect(roots=(ws,)) as client:
        with anyio.fail_after(30):  # a FIFO read would block forever
            text = await call_err(client, "attribute", {"run_dir": "run"})
    assert match in text, text


@pytest.mark.anyio
async def test_a_device_inside_the_roots_is_refused(tmp_path: Path) -> None:
    async with connect(roots=(tmp_path, Path("/dev"))) as client:
        text = await call_err(client, "attribute", {"kineto": "/dev/zero"})
    assert "character device, not a regular file" in text


@pytest.mark.anyio
async def test_huge_paths_are_refused_at_once(hostile: tuple[Path, Path]) -> None:
    ws, _ = hostile
    async with connect(roots=(ws,)) as client:
        started = time.monotonic()
        text = await call_err(client, "attribute", {"run_dir": "a/" * 250_000})
        elapsed = time.monotonic() - started
    assert "at most 4096 characters" in text and elapsed < 5 and len(text) < 600


@pytest.mark.anyio
@pytest.mark.parametrize(("output", "match"), [
    ("run/kineto.json.gz", "capture artifact"),
    ("run/manifest.json", "capture artifact"),
    ("run/inductor/extra.json", "capture artifact"),
    ("notes.txt", "not a file oprof wrote"),
    ("run", "is a directory"),
], ids=["trace", "manifest", "inductor-folder", "foreign-file", "directory"])
async def test_outputs_never_clobber(hostile: tuple[Path, Path], output: str, match: str) -> None:
    ws, _ = hostile
    (ws / "notes.txt").write_text("my notes\n")
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    async with connect(roots=(ws,)) as client:
        text = await call_err(client, "attribute", {"run_dir": "run", "output": output})
    assert match in text, text
    assert {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()} == before


@pytest.mark.anyio
async def test_an_earlier_output_of_the_same_kind_is_replaced(hostile: tuple[Path, Path]) -> None:
    ws, _ = hostile
    async with connect(roots=(ws,)) as client:
        await call_ok(client, "attribute", {"run_dir": "run", "output": "p.json"})
        await call_ok(client, "attribute", {"run_dir": "run", "output": "p.json"})  # its own kind: replaced
        await call_ok(client, "diagnose", {"profile": "p.json", "output": "f.json"})
        text = await call_err(client, "diagnose", {"profile": "p.json", "output": "p.json"})
    assert "exists and is a profile file" in text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(ws: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
    proc = subprocess.Popen([sys.executable, "-m", "mcp_server", "--http", "--port", str(port), "--root", str(ws),
                             *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    deadline = time.monotonic() + 120  # generous: a busy machine starts Python slowly
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return proc, f"{host}:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"server did not accept connections on {host}:{port} (it exited, or 120 s passed): "
                         f"{proc.communicate(timeout=10)[1].decode()[-2000:]}")


_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _post(address: str, **headers: str) -> int:
    with httpx2.Client(timeout=10) as http:
        return http.post(f"http://{address}/mcp", json=_INIT, headers={**_HEADERS, **headers}).status_code


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_http_checks_host_and_origin_on_every_loopback_address(workspace: Path, host: str) -> None:
    proc, address = _start(workspace, "--host", host)
    try:
        port = address.rsplit(":", 1)[1]
        assert _post(address) == 200
        assert _post(address, host="evil.com") == 421
        assert _post(address, host=f"evil.com:{port}") == 421
        assert _post(address, origin="http://localhost:3000") == 403  # same host, another port
        assert _post(address, origin="http://evil.com") == 403
        assert _post(address, origin=f"http://{address}") == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


@pytest.mark.slow
def test_http_wildcard_bind_needs_explicit_hosts(workspace: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mcp_server", "--http", "--host", "0.0.0.0", "--root", str(workspace)],
                          cwd=REPO, capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and b"--allowed-host" in done.stderr


@pytest.mark.anyio
@pytest.mark.slow
async def test_http_bearer_token(workspace: Path) -> None:
    proc, address = _start(workspace, env={"OPROF_MCP_TOKEN": "s3cret-token"})
    try:
        assert _post(address) == 401
        assert _post(address, authorization="Bearer wrong") == 401
        assert _post(address, authorization="Bearer s3cret-token") == 200
        from mcp.client.streamable_http import streamable_http_client

        auth = httpx2.AsyncClient(headers={"authorization": "Bearer s3cret-token"}, timeout=30)
        async with auth, Client(streamable_http_client(f"http://{address}/mcp", http_client=auth)) as client:
            result = await client.call_tool("list_runs", {})
            assert not result.is_error
            outside = await client.call_tool("get_operator", {"profile": "/etc/passwd", "operator": "x"})
            assert outside.is_error and "outside the workspace" in outside.content[0].text
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
