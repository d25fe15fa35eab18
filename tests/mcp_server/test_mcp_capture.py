"""Capture tools with a fake pipeline: job ids, progress notifications, cancel, one GPU at a time."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from profiler_core.capture.pipeline import CaptureResult
from profiler_core.errors import CaptureCancelledError, ToolNotFoundError
from profiler_core.rundir.manifest import (
    Artifacts,
    ClockRecord,
    CounterRecord,
    GpuRecord,
    PhaseRecord,
    RunManifest,
    WorkloadRecord,
)
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = pytest.mark.anyio

PHASES = ("kineto", "timeline", "counters")


class FakePipeline:
    """Walks the three phases, writing a manifest; blocks in ``hold`` until released or cancelled."""

    def __init__(self, *, hold: str | None = None, fail: str | None = None) -> None:
        self.hold, self.fail = hold, fail
        self.release = threading.Event()
        self.entered_hold = threading.Event()
        self.calls: list[tuple[Path, Any]] = []
        self.cancel_event: threading.Event | None = None

    def __call__(self, workload: Path, config: Any, *, progress: Any,
                 cancel: threading.Event) -> CaptureResult:
        self.calls.append((workload, config))
        self.cancel_event = cancel
        run_dir = Path(config.out_dir)
        run_dir.mkdir(parents=True)
        for i, phase in enumerate(PHASES, start=1):
            progress(phase, i, len(PHASES), f"{phase} phase")
            if phase == self.fail:
                raise ToolNotFoundError("ncu not found on PATH; install Nsight Compute or pass "
                                        "counters='none'")
            if phase == self.hold:
                self.entered_hold.set()
                while not self.release.wait(0.01):
                    if cancel.is_set():
                        raise CaptureCancelledError(f"capture cancelled during phase '{phase}'")
        manifest = _manifest(workload, config, run_dir)
        return CaptureResult(run_dir=run_dir, manifest=manifest)


def _manifest(workload: Path, config: Any, run_dir: Path) -> RunManifest:
    """The manifest a complete capture returns (the pipeline's own model)."""
    (run_dir / "kineto.json").write_text("{}")
    return RunManifest(
        operator_profiler="0.1.0", created_at="2026-11-29T08:00:00Z", status="complete",
        workload=WorkloadRecord(path=str(workload), sha256="0" * 64, compile_mode=config.compile_mode.value,
                                warmup_iterations=config.warmup, measured_iterations=config.iters,
                                device=config.device, seed=config.seed, python=config.python),
        gpu=GpuRecord(name="NVIDIA H200"), clocks=ClockRecord(policy=config.clocks.value),
        counters=CounterRecord(mode=config.counters.value), timeline_source="nsys",
        phases=[PhaseRecord(name=p, status="ok", duration_s=1.5) for p in PHASES],
        artifacts=Artifacts(kineto="kineto.json"), warnings=[f"w{i}" for i in range(12)],
    )


@pytest.fixture
def workload(workspace: Path) -> Path:
    path = workspace / "model.py"
    path.write_text("def get_model_and_inputs(device='cuda'):\n    raise NotImplementedError\n")
    return path


async def test_capture_runs_to_completion_with_progress(workspace: Path, workload: Path) -> None:
    fake = FakePipeline()
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with connect(roots=(workspace,), capture_fn=fake) as client:
        args = {"workload": "model.py", "compile_mode": "eager", "iters": 5, "wait_s": 10}
        status = await call_ok(client, "capture", args, progress_callback=on_progress)
        assert status["state"] == "succeeded", status
        assert status["job_id"].startswith("cap-") and "capture_result" in status["next_step"]
        result = await call_ok(client, "capture_result", {"job_id": status["job_id"]})
    (_, config), = fake.calls
    # warmup was not given: the library's default stands
    assert (config.compile_mode.value, config.iters, config.warmup) == ("eager", 5, 2)
    run_dir = Path(status["run_dir"])
    assert run_dir.parent == (workspace / "oprof-runs").resolve() and run_dir.name.startswith("model-")
    assert [m for _, m in seen][-1].startswith("counters 3/3")
    assert [p for p, _ in seen] == sorted({p for p, _ in seen})  # strictly increasing
    assert {m.split()[0] for _, m in seen[1:]} == set(PHASES)
    assert result["run"]["run_dir"] == str(run_dir) and result["run"]["compile_mode"] == "eager"
    assert [p["name"] for p in result["phases"]] == list(PHASES)
    assert len(result["warnings"]) == 10 and result["warnings_showing"].startswith("10 of 12 warnings")


async def test_capture_returns_at_once_then_cancel_kills_it(workspace: Path, workload: Path) -> None:
    fake = FakePipeline(hold="counters")
    async with connect(roots=(workspace,), capture_fn=fake) as client:
        status = await call_ok(client, "capture", {"workload": str(workload)})
        job = status["job_id"]
        assert status["state"] == "running"
        assert await anyio.to_thread.run_sync(fake.entered_hold.wait, 5)
        status = await call_ok(client, "capture_status", {"job_id": job, "wait_s": 0.2})
        assert status["state"] == "running" and status["progress"]["phase"] == "counters"
        assert [r["phase"] for r in status["recent"]] == list(PHASES)
        text = await call_err(client, "capture_result", {"job_id": job})
        assert "still running" in text and f"capture_status('{job}'" in text
        cancelled = await call_ok(client, "cancel_capture", {"job_id": job, "wait_s": 5})
        assert fake.cancel_event is not None and fake.cancel_event.is_set()
        assert cancelled["state"] == "cancelled" and cancelled["cancel_requested"]
        assert "during phase 'counters'" in cancelled["error"]
        assert "was cancelled" in await call_err(client, "capture_result", {"job_id": job})


async def test_two_captures_at_once_are_refused(workspace: Path, workload: Path) -> None:
    fake = FakePipeline(hold="kineto")
    async with connect(roots=(workspace,), capture_fn=fake) as client:
        first = await call_ok(client, "capture", {"workload": "model.py"})
        assert await anyio.to_thread.run_sync(fake.entered_hold.wait, 5)
        text = await call_err(client, "capture", {"workload": "model.py"})
        assert first["job_id"] in text and "one capture at a time" in text and "cancel_capture" in text
        fake.release.set()
        done = await call_ok(client, "capture_status", {"job_id": first["job_id"], "wait_s": 10})
        assert done["state"] == "succeeded"
    assert len(fake.calls) == 1


async def test_failed_capture_reports_the_reason(workspace: Path, workload: Path) -> None:
    async with connect(roots=(workspace,), capture_fn=FakePipeline(fail="counters")) as client:
        status = await call_ok(client, "capture", {"workload": "model.py", "wait_s": 10})
        assert status["state"] == "failed" and "ncu not found" in status["error"]
        text = await call_err(client, "capture_result", {"job_id": status["job_id"]})
        assert "failed: ncu not found" in text and "counters='none'" in text


@pytest.mark.parametrize(("args", "match"), [
    ({"workload": "/etc/hostname"}, "outside the workspace"),
    ({"workload": "missing.py"}, "no such workload file"),
    ({"workload": "notes.txt"}, "a workload is a .py file"),
    ({"workload": "model.py", "out_dir": "../out"}, "outside the workspace"),
    ({"workload": "model.py", "out_dir": "full"}, "not empty"),
    ({"workload": "model.py", "compile_mode": "fast"}, "compile_mode"),
    ({"workload": "model.py", "iters": 0}, "greater than or equal to 1"),
], ids=["outside", "missing", "not-python", "out-outside", "out-not-empty", "bad-mode", "zero-iters"])
async def test_capture_refusals(workspace: Path, workload: Path, args: dict, match: str) -> None:
    (workspace / "notes.txt").write_text("x")
    (workspace / "full").mkdir()
    (workspace / "full" / "f").write_text("x")
    fake = FakePipeline()
    async with connect(roots=(workspace,), capture_fn=fake) as client:
        assert match in await call_err(client, "capture", args)
    assert fake.calls == []


async def test_unknown_job(workspace: Path) -> None:
    async with connect(roots=(workspace,), capture_fn=FakePipeline()) as client:
        for tool in ("capture_status", "capture_result", "cancel_capture"):
            text = await call_err(client, tool, {"job_id": "cap-nope"})
            assert "no capture job 'cap-nope'" in text and "list_runs" in text


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
async def test_real_pipeline_without_gpu_fails_the_job(workspace: Path, joinable: Path) -> None:
    if _cuda():
        pytest.skip("this machine has a GPU: the capture would run (see the gpu test)")
    shutil.copy(joinable / "tiny_attention.py", workspace)
    async with connect(roots=(workspace,)) as client:  # the real capture pipeline
        status = await call_ok(client, "capture", {"workload": "tiny_attention.py", "wait_s": 60})
        assert status["state"] == "failed" and "GPU" in status["error"]
        assert "failed" in await call_err(client, "capture_result", {"job_id": status["job_id"]})
        again = await call_ok(client, "capture", {"workload": "tiny_attention.py"})  # the GPU is not held
        assert again["job_id"] != status["job_id"]
        await call_ok(client, "capture_status", {"job_id": again["job_id"], "wait_s": 60})


@pytest.mark.gpu
@pytest.mark.slow
async def test_real_capture_then_attribute(workspace: Path, joinable: Path) -> None:
    shutil.copy(joinable / "tiny_attention.py", workspace)
    async with connect(roots=(workspace,)) as client:
        status = await call_ok(client, "capture", {"workload": "tiny_attention.py", "counters": "none"})
        for _ in range(20):  # up to 20 x 100 s
            status = await call_ok(client, "capture_status", {"job_id": status["job_id"], "wait_s": 100})
            if status["state"] != "running":
                break
        assert status["state"] == "succeeded", status
        result = await call_ok(client, "capture_result", {"job_id": status["job_id"]})
        assert result["run"]["status"] == "complete" and result["phases"]
        out = await call_ok(client, "attribute", {"run_dir": result["run"]["run_dir"]})
        assert out["kernel_count"] > 0 and out["coverage"]["attributed_time_pct"] > 0
