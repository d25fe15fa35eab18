"""Runs and profiles as resources, the /optimize prompt, and the client's roots honoured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import ListRootsResult, Root

from mcp_server.resources import RUNS_URI, profile_uri, run_uri
from mcp_server.server import ServerConfig, create_server
from tests.mcp_server.mcp_helpers import call_ok, connect

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


async def test_runs_and_profiles_are_resources(pair_ws: Path) -> None:
    async with connect(roots=(pair_ws,)) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        base, opt = pair_ws.resolve() / "base", pair_ws.resolve() / "opt"
        expected = {RUNS_URI, run_uri(base), run_uri(opt), profile_uri(base / "profile.json"),
                    profile_uri(opt / "profile.json")}
        assert expected <= set(listed), sorted(listed)
        assert all(r.mime_type == "application/json" for r in listed.values())

        runs = json.loads((await client.read_resource(RUNS_URI)).contents[0].text)
        tool = await call_ok(client, "list_runs", {"limit": 50})
        assert runs["runs"] == tool["runs"]  # the listing resource is list_runs' listing

        run = json.loads((await client.read_resource(run_uri(base))).contents[0].text)
        assert run["run_dir"] == str(base) and run["profile"] == str(base / "profile.json")
        prof = json.loads((await client.read_resource(profile_uri(base / "profile.json"))).contents[0].text)
        assert prof["profile"] == str(base / "profile.json") and prof["summary"]["kernels"] == 44

        by_dir = await call_ok(client, "get_operator", {"profile": "base", "operator": "aten::mm#0"})
        by_file = await call_ok(client, "get_operator", {"profile": "base/profile.json", "operator": "aten::mm#0"})
        assert by_dir == by_file  # a run directory is accepted wherever a profile is asked for

        with pytest.raises(Exception, match="outside the workspace"):
            await client.read_resource(run_uri("/etc"))
        with pytest.raises(Exception, match="no such resource"):
            await client.read_resource("oprof://nothing")


async def test_the_optimize_protocol_is_a_prompt(workspace: Path) -> None:
    async with connect(roots=(workspace,)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {a.name for a in prompts["optimize"].arguments or []} == {"workload", "goal"}
        got = await client.get_prompt("optimize", {"workload": "model.py", "goal": "keep fp32"})
    text = got.messages[0].content.text
    assert "Arguments: `model.py keep fp32`" in text
    assert "mcp__plugin_" not in text and not text.startswith("---")
    assert "end to end" in text and "walltime" in text
    source = (REPO / "commands" / "optimize.md").read_text()
    assert text.splitlines()[0] == source.split("---\n", 2)[2].lstrip().splitlines()[0]


def _roots_callback(*paths: Path):  # noqa: ANN202
    async def list_roots(_context: object) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=p.resolve().as_uri()) for p in paths])
    return list_roots


async def test_client_roots_replace_the_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, project = tmp_path / "cwd", tmp_path / "project"
    cwd.mkdir()
    project.mkdir()
    monkeypatch.chdir(cwd)  # no --root: the default root is the working directory
    async with Client(create_server(ServerConfig()), mode="legacy",
                      list_roots_callback=_roots_callback(project)) as client:
        listed = await call_ok(client, "list_runs", {})
    assert listed["searched"] == [str(project.resolve())]


async def test_client_roots_only_narrow_operator_roots(tmp_path: Path) -> None:
    root, inner, elsewhere = tmp_path / "root", tmp_path / "root" / "inner", tmp_path / "elsewhere"
    inner.mkdir(parents=True)
    elsewhere.mkdir()
    async with Client(create_server(ServerConfig(roots=(root,))), mode="legacy",
                      list_roots_callback=_roots_callback(inner, elsewhere)) as client:
        listed = await call_ok(client, "list_runs", {})
        assert listed["searched"] == [str(inner.resolve())]  # elsewhere is outside --root: ignored
    async with Client(create_server(ServerConfig(roots=(root,))), mode="legacy",
                      list_roots_callback=_roots_callback(elsewhere)) as client:
        listed = await call_ok(client, "list_runs", {})
        assert listed["searched"] == [str(root.resolve())]  # nothing inside: the operator's root stays
