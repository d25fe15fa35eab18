"""A wall-time verdict over several timing processes per side: medians whose processes overlap decide nothing.

The figures are the H200's: a GPT-2 forward timed 4.411 ms in one process and 5.614 ms in the
next; with bf16_promotion 6.191 ms and 3.874 ms.
"""

from __future__ import annotations

import json
from pathlib import Path

from profiler_core.analysis.compare import compare
from profiler_core.report.end_to_end import banner, read_walltime_file, wall_verdict
from tests.analysis.real_profiles import pair_profile


def _walltime(tmp_path: Path, base: tuple[float, float, list[float]], opt: tuple[float, float, list[float]]) -> Path:
    path = tmp_path / "walltime.json"
    side = {}
    for name, (median, spread, processes) in (("baseline", base), ("optimized", opt)):
        side[name] = {"iterations": 60, "median_ms": median, "p10_ms": median - spread, "p90_ms": median + spread,
                      "min_ms": median - 2 * spread, "max_ms": median + 2 * spread, "process_medians_ms": processes}
    path.write_text(json.dumps(side))
    return path


def test_overlapping_processes_make_the_verdict_unchanged(tmp_path: Path) -> None:
    e = read_walltime_file(_walltime(tmp_path, (5.6, 0.6, [4.411, 5.614]), (4.4, 1.2, [6.191, 3.874])))
    assert e is not None and e.wall_speedup is not None and e.wall_speedup > 1.2  # the pooled medians alone: faster
    assert e.within_process_noise and wall_verdict(e) == "unchanged"
    verdict, text = banner(compare(pair_profile("base"), pair_profile("opt")), e)
    assert verdict == "unchanged"
    assert "within between-process noise (per-process medians: baseline 4.411-5.614 ms, optimized 3.874-6.191 ms)" \
        in text


def test_processes_apart_keep_the_verdict(tmp_path: Path) -> None:
    e = read_walltime_file(_walltime(tmp_path, (5.62, 0.02, [5.60, 5.65]), (3.88, 0.02, [3.87, 3.90])))
    assert e is not None and not e.within_process_noise and wall_verdict(e) == "faster"


def test_one_process_per_side_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "walltime.json"
    path.write_text(json.dumps({"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 4.0}}))
    e = read_walltime_file(path)
    assert e is not None and e.base_process_ms == () and wall_verdict(e) == "faster"
