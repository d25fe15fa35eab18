"""Server-wide checks: every tool's schema and hints, argument errors, the entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server.http import is_loopback as _is_loopback
from mcp_server.server import _parser
from tests.mcp_server.mcp_helpers import connect

EXPECTED_TOOLS = {
    "capture", "capture_status", "capture_result", "cancel_capture", "list_runs", "attribute", "get_operator",
    "diagnose", "compare", "report", "list_passes", "apply_pass", "get_roofline", "get_modules",
    "walltime", "walltime_status", "optimize", "optimize_status", "optimize_result", "cancel_optimize",
}
READ_ONLY = {"capture_status", "capture_result", "list_runs", "get_operator", "list_passes", "get_roofline",
             "get_modules", "walltime_status", "optimize_status", "optimize_result"}


@pytest.mark.anyio
async def test_every_tool_is_described_typed_and_hinted(workspace) -> None:
    async with connect(roots=(workspace,)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == EXPECTED_TOOLS
    for name, tool in tools.items():
        assert tool.title and tool.description, name
        assert tool.output_schema and tool.output_schema.get("type") == "object", name
        ann = tool.annotations
        hints = (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint, ann.open_world_hint)
        assert None not in hints and ann.title, name
        assert ann.read_only_hint is (name in READ_ONLY), name
        assert ann.open_world_hint is False, name
        for pname, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{pname} has no description"


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "match"), [
    ("list_runs", {"limit": 0}, "greater than or equal to 1"),
    ("get_operator", {"profile": "p.json"}, "operator"),
    ("capture_status", {"job_id": "cap-x", "wait_s": 1000}, "less than or equal to 110"),
    ("attribute", {"top_k": "many"}, "valid integer"),
    ("nope", {}, "Unknown tool"),
], ids=["below-minimum", "missing-argument", "wait-too-long", "wrong-type", "unknown-tool"])
async def test_bad_arguments_are_tool_errors(workspace, tool: str, args: dict, match: str) -> None:
    async with connect(roots=(workspace,)) as client:
        result = await client.call_tool(tool, args)
        assert result.is_error
        assert match in result.content[0].text
        assert not (await client.call_tool("list_runs", {})).is_error  # the server lives on


def test_cli_defaults_bind_loopback() -> None:
    args = _parser().parse_args([])
    assert (args.http, args.host, args.root) == (False, "127.0.0.1", [])
    args = _parser().parse_args(["--root", "a", "--root", "b", "--http", "--port", "9000"])
    assert (args.root, args.http, args.port) == (["a", "b"], True, 9000)


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                                ("0.0.0.0", False), ("10.1.2.3", False), ("myhost", False)],
                         ids=["v4", "v6", "name", "any", "lan", "hostname"])
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert _is_loopback(host) is loopback


def test_main_picks_roots_from_args_then_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mcp_server import server

    started: list[tuple[tuple[str, ...], dict]] = []
    monkeypatch.setattr(server.MCPServer, "run", lambda self, *a, **kw: started.append((a, kw)))
    monkeypatch.setattr(server, "serve_http", lambda mcp, **kw: started.append(((), kw)))
    built: list = []
    real_create = server.create_server
    monkeypatch.setattr(server, "create_server", lambda config: built.append(config) or real_create(config))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.setenv("OPROF_WORKSPACE", str(b))
    server.main(["--root", str(a)])
    server.main([])
    server.main(["--http", "--port", "9100"])
    assert [c.roots for c in built] == [(a,), (b,), (b,)]
    assert started[:2] == [((), {}), ((), {})]  # stdio
    assert started[2] == ((), {"host": "127.0.0.1", "port": 9100, "allowed_hosts": [], "allowed_origins": [],
                               "token": None})


def test_main_reports_a_bad_root_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_server import server

    with pytest.raises(SystemExit) as exit_info:
        server.main(["--root", str(tmp_path / "missing")])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "not a directory" in err
