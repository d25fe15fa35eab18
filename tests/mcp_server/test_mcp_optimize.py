"""The optimize loop and wall-time runs over MCP, on a CPU: an SDK client drives them as jobs.

Only the GPU capture is faked (``profiler_core.capture.pipeline.capture``): it writes the real
H200 pair's profiles (the baseline for the workload, the optimized half for a pass's wrapper)
after running the wrapper's step once, as a capture would. The loop itself, its passes,
their validation and the end-to-end timing (perf_counter on a CPU, each run its own process)
are real. Slow: every trial applies passes with torch, and each timing starts an interpreter.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import profiler_core.capture.pipeline as pipeline
import profiler_core.optimize.trial as trial
from profiler_core.profile_io import write_profile
from profiler_core.workload import load_workload
from tests.analysis.real_profiles import pair_profile
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


class FakeGpuCapture:
    """Stands in for the capture pipeline: writes profile.json into the run directory it is given."""

    def __init__(self, *, block: bool = False) -> None:
        self.workloads: list[Path] = []
        self.block = block
        self.entered = threading.Event()

    def __call__(self, workload: Path, config: Any, *, progress: Any = None,
                 cancel: threading.Event | None = None) -> Any:
        from profiler_core.errors import CaptureCancelledError

        self.workloads.append(Path(workload))
        if progress is not None:
            progress("kineto", 1, 1, f"fake capture of {Path(workload).name}")
        if self.block:
            self.entered.set()
            while cancel is not None and not cancel.wait(0.01):
                pass
            raise CaptureCancelledError("capture cancelled during phase 'kineto'")
        run_dir = Path(config.out_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        optimized = Path(workload).name == "workload_optimized.py"
        if optimized:  # what a real capture does first: load the wrapper and run its step
            wl = load_workload(Path(workload), device="cpu")
            wl.step(wl.model, wl.inputs)
        write_profile(run_dir / "profile.json", pair_profile("opt" if optimized else "base"))
        return pipeline.CaptureResult(run_dir=run_dir, manifest={"status": "complete"})


@pytest.fixture
def example_ws(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")
    shutil.copy(REPO / "examples" / "sdpa_attention.py", workspace / "sdpa_attention.py")
    return workspace


async def test_optimize_runs_the_loop_as_a_job_and_leads_with_wall_time(
        example_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGpuCapture()
    monkeypatch.setattr(pipeline, "capture", fake)
    # three CPU iterations per process decide nothing: a busy machine once timed the faked kernel-time win
    # slower twice and the veto refused it; the veto is tests/optimize/test_loop.py's subject, not this one's
    monkeypatch.setattr(trial, "WALL_VETO", float("inf"))
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with connect(roots=(example_ws,)) as client:
        started = await call_ok(client, "optimize", {
            "workload": "sdpa_attention.py", "device": "cpu", "compile_mode": "eager", "budget": 3,
            "wall_iters": 3, "out_dir": "loop"})
        job = started["job_id"]
        assert job.startswith("opt-") and started["state"] in ("running", "succeeded")
        early = await call_err(client, "optimize_result", {"job_id": job}) if started["state"] == "running" \
            else "still running"
        assert "still running" in early
        status = started
        for _ in range(40):  # each call waits up to 100 s for the job to end
            status = await call_ok(client, "optimize_status", {"job_id": job, "wait_s": 100},
                                   progress_callback=on_progress)
            if status["state"] != "running":
                break
        assert status["state"] == "succeeded", status
        assert "optimize_result" in status["next_step"]
        done = await call_ok(client, "optimize_result", {"job_id": job})

    loop_dir = example_ws / "loop"
    result = done["result"]
    assert done["run_dir"] == result["run_dir"] == str(loop_dir)
    assert result == json.loads((loop_dir / "optimize.json").read_text())  # the loop's own JSON, as written
    assert fake.workloads[0] == example_ws / "sdpa_attention.py"
    assert any(msg.startswith("optimize") for msg in seen), seen
    assert result["kept_passes"], result["trials"]
    e2e = done["end_to_end"]
    base_ms = result["wall_time"]["baseline"]["median_ms"]
    opt_ms = result["wall_time"]["optimized"]["median_ms"]
    assert e2e["verdict_basis"] == "wall_time"
    assert (e2e["base_wall_ms"], e2e["opt_wall_ms"]) == (base_ms, opt_ms)
    assert e2e["speedup"] == pytest.approx(base_ms / opt_ms)
    assert e2e["kernel_speedup"] == pytest.approx(result["kernel_speedup"])
    assert e2e["headline"].startswith(f"{e2e['verdict'].upper()} end to end")
    assert json.loads((loop_dir / "walltime.json").read_text())["baseline"]["median_ms"] == base_ms
    assert result["yardstick"] is not None and result["yardstick"]["recipes"], result["yardstick"]


async def test_optimize_refusals_and_cancel(example_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGpuCapture(block=True)
    monkeypatch.setattr(pipeline, "capture", fake)
    (example_ws / "full").mkdir()
    (example_ws / "full" / "x.txt").write_text("x")
    async with connect(roots=(example_ws,)) as client:
        assert "outside the workspace" in await call_err(client, "optimize", {"workload": "/etc/hostname"})
        assert "not empty" in await call_err(client, "optimize", {"workload": "sdpa_attention.py",
                                                                   "out_dir": "full"})
        assert "no optimize job 'opt-nope'" in await call_err(client, "optimize_status", {"job_id": "opt-nope"})
        started = await call_ok(client, "optimize", {"workload": "sdpa_attention.py", "device": "cpu",
                                                     "compile_mode": "eager", "wall_iters": 0})
        assert await anyio.to_thread.run_sync(fake.entered.wait, 60)
        busy = await call_err(client, "capture", {"workload": "sdpa_attention.py"})
        assert started["job_id"] in busy and "optimize_status" in busy and "cancel_optimize" in busy
        stopped = await call_ok(client, "cancel_optimize", {"job_id": started["job_id"], "wait_s": 30})
        assert stopped["state"] == "cancelled", stopped
        assert "cancelled" in await call_err(client, "optimize_result", {"job_id": started["job_id"]})


async def test_walltime_times_both_sides_and_compare_leads_with_it(example_ws: Path, pair_ws: Path) -> None:
    shutil.copytree(pair_ws / "base", example_ws / "base")
    shutil.copytree(pair_ws / "opt", example_ws / "opt")
    async with connect(roots=(example_ws,)) as client:
        timed = await call_ok(client, "walltime", {
            "workload": "sdpa_attention.py", "baseline_workload": "sdpa_attention.py", "device": "cpu",
            "compile_mode": "eager", "iters": 3, "warmup": 1, "output": "timing/walltime.json", "wait_s": 100})
        for _ in range(5):
            if timed["state"] != "running":
                break
            timed = await call_ok(client, "walltime_status", {"job_id": timed["job_id"], "wait_s": 100})
        assert timed["state"] == "succeeded", timed
        written = json.loads((example_ws / "timing" / "walltime.json").read_text())
        assert timed["walltime_file"] == str(example_ws / "timing" / "walltime.json")
        # two processes per side, in alternating order, pooled
        assert written["baseline"]["iterations"] == written["optimized"]["iterations"] == 6
        assert len(written["baseline"]["process_medians_ms"]) == len(timed["optimized"]["process_medians_ms"]) == 2
        assert timed["wall_speedup"] == pytest.approx(
            written["baseline"]["median_ms"] / written["optimized"]["median_ms"])
        compared = await call_ok(client, "compare", {"baseline": "base", "optimized": "opt",
                                                     "walltime": "timing/walltime.json"})
        e2e = compared["end_to_end"]
        assert e2e["verdict_basis"] == "wall_time" and e2e["kernel_verdict"] == compared["verdict"] == "faster"
        assert e2e["base_wall_ms"] == written["baseline"]["median_ms"]
        reported = await call_ok(client, "report", {"profile": "opt", "baseline": "base",
                                                    "walltime": "timing/walltime.json", "include_findings": False})
        assert reported["comparison"]["end_to_end"]["headline"] == e2e["headline"]
        assert "end to end" in (example_ws / "opt" / "report.html").read_text()
        assert "no baseline and optimized" in await call_err(client, "compare", {
            "baseline": "base", "optimized": "opt", "walltime": "base/profile.json"})
