"""``list_runs``: run directories found under the workspace, newest first, with manifest summaries."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from profiler_core.rundir.manifest import (
    Artifacts,
    ClockRecord,
    CounterRecord,
    GpuRecord,
    RunManifest,
    WorkloadRecord,
)
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = pytest.mark.anyio


def _manifest(workload: str, status: str = "complete", **extra: object) -> dict:
    """A manifest as the capture pipeline writes it (validated by its own model)."""
    return RunManifest(
        operator_profiler="0.1.0", created_at="2026-11-29T08:00:00Z", status=status,
        workload=WorkloadRecord(path=workload, sha256="0" * 64, compile_mode="default", warmup_iterations=2,
                                measured_iterations=3, device="cuda", seed=0, python="python3"),
        gpu=GpuRecord(name="NVIDIA H200", chip="gh100", sm_count=132), clocks=ClockRecord(policy="observe"),
        counters=CounterRecord(mode="per-config"), timeline_source="nsys",
        artifacts=Artifacts(kineto="kineto.json", timeline="timeline.sqlite"), total_duration_s=42.5,
        warnings=["sm clock moved 1980 -> 1755 MHz during counters"], **extra,
    ).model_dump(mode="json")


def _run(root: Path, name: str, manifest: dict | None, *, profile: bool = False, age_s: float = 0) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "kineto.json").write_text("{}")
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    if profile:
        (run / "profile.json").write_text("{}")
    stamp = time.time() - age_s
    for f in run.iterdir():
        os.utime(f, (stamp, stamp))
    return run


async def test_lists_runs_newest_first_with_summary(workspace: Path) -> None:
    _run(workspace / "oprof-runs", "old", _manifest("/w/a.py"), age_s=100)
    new = _run(workspace / "oprof-runs", "new", _manifest("/w/b.py", status="failed", error="ncu missing"))
    _run(workspace, "attributed_only", None, profile=True, age_s=50)
    _run(workspace / ".hidden", "skip", _manifest("/w/c.py"))
    _run(workspace / "node_modules", "skip", _manifest("/w/c.py"))
    (workspace / "not_a_run").mkdir()
    async with connect(roots=(workspace,)) as client:
        out = await call_ok(client, "list_runs")
    names = [Path(r["run_dir"]).name for r in out["runs"]]
    assert names == ["new", "attributed_only", "old"]
    first = out["runs"][0]
    assert first["run_dir"] == str(new.resolve())
    assert (first["status"], first["error"], first["workload"]) == ("failed", "ncu missing", "/w/b.py")
    assert (first["gpu"], first["compile_mode"]) == ("NVIDIA H200", "default")
    assert first["measured_iterations"] == 3
    assert (first["counter_mode"], first["timeline_source"]) == ("per-config", "nsys")
    assert first["warning_count"] == 1
    assert first["artifacts"] == {"kineto": str(new.resolve() / "kineto.json")}  # timeline.sqlite is absent
    assert out["runs"][1]["status"] == "attributed" and out["runs"][1]["profile"].endswith("profile.json")
    assert out["showing"] == "3 of 3 runs, newest first"


async def test_limit_and_under(workspace: Path) -> None:
    for i in range(4):
        _run(workspace / "oprof-runs", f"r{i}", _manifest(f"/w/{i}.py"), age_s=10 * i)
    _run(workspace / "elsewhere", "x", _manifest("/w/x.py"))
    async with connect(roots=(workspace,)) as client:
        out = await call_ok(client, "list_runs", {"limit": 2})
        assert [Path(r["run_dir"]).name for r in out["runs"]] == ["x", "r0"]
        assert out["showing"].startswith("2 of 5 runs") and "raise limit" in out["showing"]
        out = await call_ok(client, "list_runs", {"under": "oprof-runs"})
        assert len(out["runs"]) == 4 and out["searched"] == [str((workspace / "oprof-runs").resolve())]
        assert "outside the workspace" in await call_err(client, "list_runs", {"under": "/"})


async def test_broken_and_escaping_manifests_are_reported_not_fatal(workspace: Path, tmp_path: Path) -> None:
    bad = _run(workspace, "bad", None)
    (bad / "manifest.json").write_text("{not json")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(_manifest("/secret/workload.py")))
    sneaky = _run(workspace, "sneaky", None)
    os.symlink(secret, sneaky / "manifest.json")
    async with connect(roots=(workspace,)) as client:
        out = await call_ok(client, "list_runs")
    by_name = {Path(r["run_dir"]).name: r for r in out["runs"]}
    assert "unreadable manifest" in by_name["bad"]["error"]
    assert "outside the workspace" in by_name["sneaky"]["error"]
    assert by_name["sneaky"]["workload"] is None  # nothing read from the linked file


async def test_symlinked_directories_are_not_followed(workspace: Path, tmp_path: Path) -> None:
    _run(tmp_path / "outside", "r", _manifest("/w/o.py"))
    os.symlink(tmp_path / "outside", workspace / "link")
    async with connect(roots=(workspace,)) as client:
        assert (await call_ok(client, "list_runs"))["runs"] == []
