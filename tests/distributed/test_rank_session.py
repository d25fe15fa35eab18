"""The multi-rank capture is the capture session with a rank dimension: every rank is checked and has a manifest.

No GPU here, so the phases are not launched: each rank's run directory gets the real H200 phases
(Kineto trace, nsys export, ncu CSV), and the session's own check and manifests run on them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profiler_core.capture.config import CaptureConfig, ClockPolicy, CounterMode
from profiler_core.capture.pipeline import Tools
from profiler_core.distributed.attribute import attribute_ranks
from profiler_core.distributed.capture import RankSession, capture_ranks
from profiler_core.errors import DeterminismError, ProfilerError
from profiler_core.rundir import open_run, rank_dir, read_manifest, read_ranks_manifest
from profiler_core.rundir.layout import COUNTERS_CSV_NAME, KINETO_NAME, TIMELINE_NAME
from tests.capture.conftest import H200

NO_TOOLS = Tools(ncu=None, nsys=None, nsys_missing=None, nvidia_smi=None)


def _session(tmp_path: Path, joinable: Path, counters_of: dict[int, str]) -> RankSession:
    """A two-rank session whose ranks hold the real phases (``counters_of``: each rank's ncu CSV)."""
    workload = tmp_path / "ddp.py"
    workload.write_text((joinable / "tiny_attention.py").read_text())
    run = tmp_path / "run"
    config = CaptureConfig(out_dir=run, counters=CounterMode.FULL, clocks=ClockPolicy.OFF, ranks=2)
    session = RankSession(workload, config, H200, NO_TOOLS, run, None, None, 2)
    for r in (0, 1):
        here = rank_dir(run, r)
        shutil.copy(joinable / "kineto.json", here / KINETO_NAME)
        shutil.copy(joinable / "nsys.sqlite", here / TIMELINE_NAME)
        shutil.copy(joinable / counters_of[r], here / COUNTERS_CSV_NAME)
        art = session.art[r]
        art.kineto, art.timeline, art.counters_csv = KINETO_NAME, TIMELINE_NAME, COUNTERS_CSV_NAME
    return session


def test_every_rank_is_checked_and_gets_a_manifest(tmp_path: Path, joinable: Path) -> None:
    session = _session(tmp_path, joinable, {0: "ncu_full_raw.csv", 1: "ncu_full_raw.csv"})
    session.check()
    session.save()
    top = read_ranks_manifest(session.run_dir)
    assert top.world_size == 2 and [e.dir for e in top.ranks] == ["rank0", "rank1"]
    for r in (0, 1):
        m = read_manifest(rank_dir(session.run_dir, r))
        assert m.determinism.checked and m.determinism.passed and m.determinism.compared == ["nsys", "ncu"]
        assert m.determinism.kernels == 44 and m.counters.rows == 44
        assert m.workload.device == f"cuda:{r}" and m.environment["RANK"] == str(r)
        assert m.timeline_source == "nsys" and m.gpu.name == "NVIDIA H200"
    run = open_run(session.run_dir)
    assert run.is_multi_rank and [r for r, _ in run.ranks()] == [0, 1]
    merged = attribute_ranks(session.run_dir)
    assert [r.kernels for r in merged.ranks] == [44, 44]


def test_a_rank_whose_phases_diverge_fails_the_check_on_its_own_record(tmp_path: Path, joinable: Path) -> None:
    session = _session(tmp_path, joinable, {0: "ncu_full_raw.csv", 1: "ncu_per_config_raw.csv"})
    with pytest.raises(DeterminismError, match="ncu report"):
        session.check()
    session.save()
    first, second = (read_manifest(rank_dir(session.run_dir, r)).determinism for r in (0, 1))
    assert first.passed is True
    assert second.passed is False and "ncu report" in (second.note or "")


def test_clock_locking_across_ranks_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    joinable: Path) -> None:
    from profiler_core.distributed import capture as module

    monkeypatch.setattr(module, "visible_gpu_count", lambda python: 2)
    workload = tmp_path / "ddp.py"
    workload.write_text((joinable / "tiny_attention.py").read_text())
    with pytest.raises(ProfilerError, match="--clocks lock"):
        capture_ranks(workload, CaptureConfig(out_dir=tmp_path / "run", clocks=ClockPolicy.LOCK), 2)
    assert not (tmp_path / "run").exists()


def test_the_single_session_refuses_a_rank_count(tmp_path: Path) -> None:
    from profiler_core.capture.pipeline import capture

    with pytest.raises(ProfilerError, match="torchrun"):
        capture(tmp_path / "w.py", CaptureConfig(ranks=2))
