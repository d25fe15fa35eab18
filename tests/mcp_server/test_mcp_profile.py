"""``attribute`` and ``get_operator`` on the real H200 capture (44 kernels that join 1:1)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.mcp_server.mcp_helpers import JOINABLE_FILES, call_err, call_ok, connect

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def attributed(tmp_path_factory: pytest.TempPathFactory, joinable: Path) -> Path:
    """A workspace whose run directory already holds the profile.json attribute wrote."""
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import write_profile

    ws = tmp_path_factory.mktemp("attributed")
    run = ws / "h200"
    run.mkdir()
    for name in JOINABLE_FILES:
        shutil.copy(joinable / name, run / name)
    write_profile(run / "profile.json", attribute_run(run))
    return ws


async def test_attribute_run_dir_writes_profile(joinable_ws: Path) -> None:
    async with connect(roots=(joinable_ws,)) as client:
        out = await call_ok(client, "attribute", {"run_dir": "h200", "top_k": 5})
    profile = json.loads(Path(out["profile"]).read_text())
    assert out["profile"] == str((joinable_ws / "h200" / "profile.json").resolve())
    assert out["kernel_count"] == len(profile["kernels"]) == 44
    assert out["operator_count"] == len(profile["operators"])
    cov = out["coverage"]
    assert cov["kernel_count"] == 44
    assert cov["attributed_time_pct"] == pytest.approx(profile["coverage"]["attributed_time_pct"], abs=0.01)
    assert sum(t["kernel_count"] for t in cov["by_tier"]) == 44
    times = [op["time_us"] for op in out["top_operators"]]
    assert len(times) == 5 and times == sorted(times, reverse=True)
    assert out["showing"].startswith(f"5 of {out['operator_count']} operators")
    biggest = max(profile["operators"], key=lambda o: o["duration_ns"])
    assert out["top_operators"][0]["key"] == biggest["key"]


async def test_attribute_files_to_chosen_output(joinable_ws: Path) -> None:
    run = joinable_ws / "h200"
    args = {"kineto": str(run / "kineto.json"), "nsys": "h200/nsys.sqlite", "ncu": "h200/ncu_full_raw.csv",
            "inductor": "h200/torch_trace.tgz", "output": "out/p.json"}
    async with connect(roots=(joinable_ws,)) as client:
        out = await call_ok(client, "attribute", args)
    assert out["profile"] == str((joinable_ws / "out" / "p.json").resolve())
    assert out["kernel_count"] == 44 and out["coverage"]["counters_measured_kernels"] > 0


@pytest.mark.parametrize(("args", "match"), [
    ({}, "nothing to attribute"),
    ({"run_dir": "h200", "ncu": "h200/ncu_full_raw.csv"}, "not both"),
    ({"ncu": "h200/ncu_full_raw.csv"}, "no timeline given"),
    ({"run_dir": "missing"}, "does not exist"),
    ({"run_dir": "h200", "output": "../escape.json"}, "outside the workspace"),
    ({"kineto": "/etc/hostname"}, "outside the workspace"),
    ({"run_dir": "h200/kineto.json"}, "is a file"),
], ids=["nothing", "both", "no-timeline", "missing-dir", "output-outside", "input-outside", "file-as-dir"])
async def test_attribute_refusals(joinable_ws: Path, args: dict, match: str) -> None:
    async with connect(roots=(joinable_ws,)) as client:
        assert match in await call_err(client, "attribute", args)


async def test_attribute_broken_artifact_names_the_file(joinable_ws: Path) -> None:
    bad = joinable_ws / "bad"
    bad.mkdir()
    (bad / "kineto.json").write_text('{"traceEvents": [')
    async with connect(roots=(joinable_ws,)) as client:
        text = await call_err(client, "attribute", {"run_dir": "bad"})
    assert "kineto.json" in text and text.startswith("Error executing tool attribute: ")


async def test_symlinks_are_judged_by_their_target(joinable_ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside_target"
    outside.mkdir()
    shutil.copy(joinable_ws / "h200" / "kineto.json", outside / "kineto.json")
    os.symlink(outside, joinable_ws / "link_out")  # inside the workspace, pointing out: refused
    os.symlink(joinable_ws / "h200", tmp_path / "link_in")  # outside, pointing in: its target is inside
    async with connect(roots=(joinable_ws,)) as client:
        text = await call_err(client, "attribute", {"run_dir": "link_out"})
        assert "outside the workspace" in text and str(outside) in text
        text = await call_err(client, "attribute", {"kineto": "link_out/kineto.json"})
        assert "outside the workspace" in text
        out = await call_ok(client, "attribute", {"run_dir": str(tmp_path / "link_in")})
    assert out["profile"] == str((joinable_ws / "h200" / "profile.json").resolve())


async def test_get_operator_drills_into_kernels(attributed: Path) -> None:
    profile = json.loads((attributed / "h200" / "profile.json").read_text())
    op = max(profile["operators"], key=lambda o: o["kernel_count"] * 10**12 + o["duration_ns"])
    async with connect(roots=(attributed,)) as client:
        out = await call_ok(client, "get_operator", {"profile": "h200/profile.json", "operator": op["key"],
                                                     "max_kernels": 25})
    assert out["operator"]["key"] == op["key"] and out["operator"]["kernel_count"] == op["kernel_count"]
    assert sorted(k["id"] for k in out["kernels"]) == sorted(op["kernel_ids"])
    by_id = {k["id"]: k for k in profile["kernels"]}
    assert sum(round(by_id[k["id"]]["duration_ns"]) for k in out["kernels"]) == op["duration_ns"]
    for kernel in out["kernels"]:
        assert kernel["tier"] == by_id[kernel["id"]]["attribution"]["tier"]
        assert kernel["evidence"], "every attributed kernel says which tiers spoke"


async def test_get_operator_caps_kernels(attributed: Path) -> None:
    profile = json.loads((attributed / "h200" / "profile.json").read_text())
    op = max(profile["operators"], key=lambda o: o["kernel_count"])
    if op["kernel_count"] < 2:
        pytest.skip("no operator with two kernels in this capture")
    async with connect(roots=(attributed,)) as client:
        out = await call_ok(client, "get_operator", {"profile": "h200/profile.json", "operator": op["key"],
                                                     "max_kernels": 1})
    assert len(out["kernels"]) == 1
    assert out["showing"].startswith(f"1 of {op['kernel_count']} kernels")


async def test_get_operator_by_name_and_its_errors(attributed: Path) -> None:
    profile = json.loads((attributed / "h200" / "profile.json").read_text())
    names: dict[str, list[str]] = {}
    for op in profile["operators"]:
        names.setdefault(op["name"], []).append(op["key"])
    async with connect(roots=(attributed,)) as client:
        unique = next((n for n, keys in names.items() if len(keys) == 1), None)
        if unique is not None:
            out = await call_ok(client, "get_operator", {"profile": "h200/profile.json", "operator": unique})
            assert out["operator"]["key"] == names[unique][0]
        repeated = next((n for n, keys in names.items() if len(keys) > 1), None)
        if repeated is not None:
            text = await call_err(client, "get_operator",
                                  {"profile": "h200/profile.json", "operator": repeated})
            assert "pass one key" in text and names[repeated][0] in text
        some_key = profile["operators"][0]["key"]
        text = await call_err(client, "get_operator",
                              {"profile": "h200/profile.json", "operator": some_key + "x"})
        assert f"did you mean {some_key}" in text or some_key in text


async def test_get_operator_bad_profiles(attributed: Path) -> None:
    (attributed / "broken.json").write_text('{"schema_version": 1, "kernels": 3}')
    async with connect(roots=(attributed,)) as client:
        assert "invalid profile" in await call_err(client, "get_operator",
                                                   {"profile": "broken.json", "operator": "x"})
        assert "no such" in await call_err(client, "get_operator", {"profile": "nope.json", "operator": "x"})
