"""Real captures on an NVIDIA GPU with ncu (and nsys) installed; skipped elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.capture.config import CaptureConfig
from profiler_core.capture.pipeline import capture
from profiler_core.metrics import ncu_names_for_chip
from profiler_core.rundir.manifest import PhaseStatus, RunStatus, read_manifest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.ncu
def test_capture_tiny_attention_for_real(joinable: Path, tmp_path: Path) -> None:
    result = capture(joinable / "tiny_attention.py", CaptureConfig(out_dir=tmp_path / "run"))
    run, m = result.run_dir, read_manifest(result.run_dir)
    assert m.status is RunStatus.COMPLETE, m.error
    # an nsys that cannot export (a missing library) is named with its fix; Kineto is then the timeline
    nsys_failed = [w for w in m.warnings if w.startswith("nsys profile failed")]
    for name in (
        "kineto.json",
        "inductor/torch_trace.tgz",
        "inductor/output_code.log",
        *(() if nsys_failed else ("timeline.sqlite",)),
        "counters.ncu-rep",
        "counters.csv",
        "manifest.json",
    ):
        assert (run / name).is_file() and (run / name).stat().st_size > 0, (name, m.warnings)
    if nsys_failed:
        assert "then capture again" in nsys_failed[0] and "the Kineto trace is the timeline" in nsys_failed[0]
        assert m.timeline_source == "kineto" and not (run / "timeline.sqlite").exists()
        assert m.determinism.passed and "ncu" in m.determinism.compared
    else:
        assert m.timeline_source == "nsys", m.warnings
        assert m.determinism.passed and m.determinism.compared == ["nsys", "ncu"]
    assert m.determinism.kernels == m.phase("kineto").harness["kernels"] > 0
    # the iterations' GPU time by CUDA events, for the overhead benchmark: within their host time, which
    # lies within the whole region's (that also holds the profiler's start and stop)
    records = [m.phase("kineto")] + ([] if nsys_failed else [m.phase("timeline")])
    for record in records:
        h = record.harness
        assert h is not None and 0 < h["gpu_ms"] <= h["region_ms"] * 1.01 <= h["measured_ms"] * 1.01, record.name
    assert m.gpu.chip and m.gpu.sm_count and m.versions.ncu and m.versions.torch
    # the 20 headline counters, and FLOP counters for the roofline as far as this ncu offers them
    headline = ncu_names_for_chip(m.gpu.chip).items()
    offered = ncu_names_for_chip(m.gpu.chip, flop_counters=True).items()
    measured = m.counters.metrics.items()
    assert len(headline) == 20 and headline <= measured <= offered and len(measured) > 20
    assert m.counters.replay_mode == "kernel"
    ran = [p for p in m.phases if not (nsys_failed and p.name.startswith("timeline"))]
    assert all(p.status is PhaseStatus.OK for p in ran)
    assert all(p.clocks is not None and p.clocks.samples > 0 for p in ran)


@pytest.mark.ncu
def test_full_mode_dedup_measures_one_iteration(joinable: Path, tmp_path: Path) -> None:
    config = CaptureConfig(out_dir=tmp_path / "run", counters="full", dedup_iterations=True, nsys=False)
    m = capture(joinable / "tiny_attention.py", config).manifest
    assert m.status is RunStatus.COMPLETE and m.determinism.passed
    assert m.counters.rows == m.counters.kernels_per_iteration == m.determinism.kernels // 2


def test_probe_phase_loads_the_gpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "profiler_core.capture.harness", "--phase", "probe", "--probe-seconds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["matmuls"] > 0 and result["load_end_unix"] - result["load_start_unix"] >= 1.0
