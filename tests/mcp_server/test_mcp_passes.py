"""``list_passes`` and ``apply_pass`` on the real workload of the H200 capture (CPU, eager: fast)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from profiler_core.errors import CaptureCancelledError
from profiler_core.passes import list_passes, read_plan
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = pytest.mark.anyio
FAST = {"device": "cpu", "compiler": "eager"}


@pytest.fixture
def passes_ws(workspace: Path, joinable: Path) -> Path:
    shutil.copy(joinable / "tiny_attention.py", workspace / "tiny_attention.py")
    return workspace


async def test_list_passes_is_the_registry(workspace: Path) -> None:
    async with connect(roots=(workspace,)) as client:
        out = await call_ok(client, "list_passes")
    assert [p["name"] for p in out["passes"]] == [s.name for s in list_passes()]
    sdpa = next(p for p in out["passes"] if p["name"] == "sdpa")
    assert sdpa["level"] == "dynamo_fx" and "attention" in sdpa["symptom"] and sdpa["source"] == "builtin"
    assert next(p for p in out["passes"] if p["name"] == "rnn_reroute")["structural"] is True


@pytest.mark.slow
async def test_apply_pass_validates_and_writes_the_optimized_workload(passes_ws: Path) -> None:
    async with connect(roots=(passes_ws,)) as client:
        args = {"workload": "tiny_attention.py", "passes": ["sdpa", "qkv_fusion"], "out_dir": "opt", **FAST}
        out = await call_ok(client, "apply_pass", args)
    plan = read_plan(out["plan_file"])
    assert out["plan_file"] == str((passes_ws / "opt" / "plan.json").resolve())
    assert out["status"] == "validated" == plan.status.value
    assert out["applied"] == ["qkv_fusion", "sdpa"]  # application order, not request order
    assert out["validation"]["passed"] and out["validation"]["max_abs_err"] < 1e-4
    assert Path(out["optimized_workload"]).is_file() and Path(out["optimized_workload"]).parent == Path(
        out["plan_file"]).parent
    sdpa = next(p for p in out["passes"] if p["name"] == "sdpa")
    assert sdpa["status"] == "APPLIED" and sdpa["ops_added"] == {"scaled_dot_product_attention": 1}
    assert sdpa["requested_by"] == ["argument"]


@pytest.mark.slow
async def test_findings_travel_only_with_the_chosen_passes(passes_ws: Path, joinable: Path) -> None:
    # The same model's real profile: its findings license several passes; only sdpa is chosen.
    run = passes_ws / "h200"
    run.mkdir()
    for name in ("kineto.json", "nsys.sqlite", "ncu_full_raw.csv", "torch_trace.tgz"):
        shutil.copy(joinable / name, run / name)
    async with connect(roots=(passes_ws,)) as client:
        await call_ok(client, "attribute", {"run_dir": "h200"})
        diag = await call_ok(client, "diagnose", {"profile": "h200/profile.json", "top_k": 30})
        licensed = {f["licenses"] for f in diag["findings"]}
        assert {"sdpa", "qkv_fusion"} <= licensed
        out = await call_ok(client, "apply_pass", {"workload": "tiny_attention.py", "passes": ["sdpa"],
                                                   "findings": "h200/findings.json", **FAST})
    assert out["applied"] == ["sdpa"] and [p["name"] for p in out["passes"]] == ["sdpa"]
    sdpa = out["passes"][0]
    assert "argument" in sdpa["requested_by"] and any(r.startswith("finding") for r in sdpa["requested_by"])
    assert Path(out["plan_file"]).parent.parent == (passes_ws / "oprof-runs").resolve()


@pytest.mark.parametrize(("args", "match"), [
    ({"passes": []}, "at least 1 item"),
    ({"passes": ["warp_speed"]}, "unknown pass 'warp_speed'"),
    ({"passes": ["sdpa"], "workload": "/etc/hostname"}, "outside the workspace"),
    ({"passes": ["sdpa"], "workload": "notes.txt"}, "a workload is a .py file"),
    ({"passes": ["sdpa"], "findings": "missing.json"}, "no such findings file"),
    ({"passes": ["sdpa"], "findings": "notes.txt"}, "not a readable JSON findings file"),
    ({"passes": ["sdpa"], "out_dir": "/tmp"}, "outside the workspace"),
    ({"passes": ["sdpa"], "device": "tpu"}, "'cuda' or 'cpu'"),
], ids=["no-pass", "unknown-pass", "outside", "not-python", "missing-findings", "bad-findings", "out-outside",
        "bad-device"])
@pytest.mark.slow
async def test_apply_pass_refusals(passes_ws: Path, args: dict, match: str) -> None:
    (passes_ws / "notes.txt").write_text("not json")
    async with connect(roots=(passes_ws,)) as client:
        text = await call_err(client, "apply_pass", {"workload": "tiny_attention.py", **FAST, **args})
    assert match in text


@pytest.mark.slow
async def test_apply_pass_on_the_gpu_waits_for_a_running_capture(passes_ws: Path) -> None:
    def slow_capture(workload: Path, config: Any, *, progress: Any, cancel: threading.Event) -> None:
        progress("kineto", 1, 3, "torch.profiler trace")
        cancel.wait(30)
        raise CaptureCancelledError("capture cancelled during phase 'kineto'")

    args = {"workload": "tiny_attention.py", "passes": ["sdpa"]}
    async with connect(roots=(passes_ws,), capture_fn=slow_capture) as client:
        job = await call_ok(client, "capture", {"workload": "tiny_attention.py"})
        text = await call_err(client, "apply_pass", {**args, "device": "cuda"})
        assert job["job_id"] in text and "device='cpu'" in text
        out = await call_ok(client, "apply_pass", {**args, **FAST})  # the CPU is free while the GPU captures
        assert out["status"] == "validated"
        assert (await call_ok(client, "cancel_capture", {"job_id": job["job_id"]}))["state"] == "cancelled"
