"""A wall-time verdict over several timing processes per side: it stands only if every round gives it.

The figures are the H200's: a GPT-2 forward timed 4.411 ms in one process and 5.614 ms in the
next; with bf16_promotion 6.191 ms and 3.874 ms. In a later run the MCP ``walltime`` tool's two
rounds gave 6.064 -> 5.173 ms and 4.660 -> 7.472 ms, while the loop's two pairs gave
5.050 -> 6.657 ms and 5.280 -> 6.796 ms.
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
    assert ("within between-process noise: the rounds of processes disagree (4.411 -> 6.191, 5.614 -> 3.874 ms: "
            "slower, faster)") in text


def test_processes_apart_keep_the_verdict(tmp_path: Path) -> None:
    e = read_walltime_file(_walltime(tmp_path, (5.62, 0.02, [5.60, 5.65]), (3.88, 0.02, [3.87, 3.90])))
    assert e is not None and not e.within_process_noise and wall_verdict(e) == "faster"


def test_one_process_per_side_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "walltime.json"
    path.write_text(json.dumps({"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 4.0}}))
    e = read_walltime_file(path)
    assert e is not None and e.base_process_ms == () and wall_verdict(e) == "faster"


def test_the_rounds_of_a_later_h200_run(tmp_path: Path) -> None:
    mcp = read_walltime_file(_walltime(tmp_path, (5.72, 0.8, [6.064, 4.660]), (6.77, 1.4, [5.173, 7.472])))
    assert mcp is not None and mcp.pair_verdicts() == ("faster", "slower") and wall_verdict(mcp) == "unchanged"
    loop = read_walltime_file(_walltime(tmp_path, (5.17, 0.2, [5.050, 5.280]), (6.73, 0.2, [6.657, 6.796])))
    assert loop is not None and not loop.within_process_noise and wall_verdict(loop) == "slower"


def test_rounds_that_agree_decide_although_the_processes_overlap(tmp_path: Path) -> None:
    """Each round 1.15x faster, though one round's optimized process is slower than the other's baseline."""
    e = read_walltime_file(_walltime(tmp_path, (5.0, 0.5, [4.0, 6.0]), (4.35, 0.5, [3.48, 5.22])))
    assert e is not None and max(e.opt_process_ms) > min(e.base_process_ms)
    assert e.pair_verdicts() == ("faster", "faster") and wall_verdict(e) == "faster"
