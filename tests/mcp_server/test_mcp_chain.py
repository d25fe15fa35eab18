"""An agent's whole protocol through the server: capture -> attribute -> diagnose -> apply_pass ->
capture -> attribute -> compare, on real H200 captures of the attention example.

The capture tool runs a pipeline that plays back the shipped H200 run directories (the baseline
for the example, the optimized run for the plan's workload), so everything after it, and the
server's job model around it, is the real code on real data. A real GPU capture through the
same tool is ``test_real_capture_then_attribute`` (marked gpu).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from profiler_core.capture.pipeline import CaptureResult
from profiler_core.rundir.manifest import read_manifest
from tests.mcp_server.mcp_helpers import call_ok, connect

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "examples" / "captures" / "h200" / "sdpa_attention"


class ReplayCapture:
    """A capture pipeline that hands back a real H200 capture instead of running the GPU."""

    def __init__(self) -> None:
        self.workloads: list[str] = []

    def __call__(self, workload: Path, config: Any, *, progress: Any, cancel: threading.Event) -> CaptureResult:
        self.workloads.append(workload.name)
        side = "optimized" if workload.name == "workload_optimized.py" else "baseline"
        run_dir = Path(config.out_dir)
        shutil.copytree(CAPTURES / side, run_dir)
        for i, phase in enumerate(("kineto", "timeline", "counters"), start=1):
            progress(phase, i, 3, f"{phase} (H200 {side} capture)")
        return CaptureResult(run_dir=run_dir, manifest=read_manifest(run_dir))


async def _capture(client: Any, workload: str) -> str:
    status = await call_ok(client, "capture", {"workload": workload, "wait_s": 30})
    assert status["state"] == "succeeded", status
    result = await call_ok(client, "capture_result", {"job_id": status["job_id"]})
    assert result["run"]["status"] == "complete"
    return str(result["run"]["run_dir"])


@pytest.mark.slow
async def test_an_agent_drives_the_whole_loop_through_the_server(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")  # validation of the plan runs the small config on CPU
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shutil.copy(REPO / "examples" / "sdpa_attention.py", workspace / "sdpa_attention.py")
    replay = ReplayCapture()
    async with connect(roots=(workspace,), capture_fn=replay) as client:
        base_run = await _capture(client, "sdpa_attention.py")
        base = await call_ok(client, "attribute", {"run_dir": base_run})
        assert base["coverage"]["attributed_time_pct"] == pytest.approx(100.0)

        diag = await call_ok(client, "diagnose", {"profile": base["profile"], "top_k": 30})
        available = {p["name"] for p in (await call_ok(client, "list_passes"))["passes"]}
        chosen = sorted({f["licenses"] for f in diag["findings"]} & available & {"sdpa", "qkv_fusion"})
        assert chosen == ["qkv_fusion", "sdpa"]  # what the H200 profile licenses, among graph rewrites

        plan = await call_ok(client, "apply_pass", {
            "workload": "sdpa_attention.py", "passes": chosen, "findings": diag["findings_file"],
            "out_dir": "plan", "device": "cpu", "compiler": "eager"})
        assert plan["status"] == "validated" and sorted(plan["applied"]) == chosen
        assert plan["optimized_workload"] is not None

        opt_run = await _capture(client, plan["optimized_workload"])
        opt = await call_ok(client, "attribute", {"run_dir": opt_run})
        cmp = await call_ok(client, "compare", {"baseline": base["profile"], "optimized": opt["profile"]})
    assert replay.workloads == ["sdpa_attention.py", "workload_optimized.py"]
    assert cmp["verdict"] == "faster" and cmp["speedup"] > 5 and cmp["comparable"]
    assert Path(cmp["comparison_file"]).is_file()
    assert Path(cmp["comparison_file"]).resolve().is_relative_to(workspace.resolve())
