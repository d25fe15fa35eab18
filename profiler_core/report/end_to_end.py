"""What a run measured beyond kernel time: end-to-end wall time and validation error, and the verdict.

Kernel time alone can claim a speedup the step never sees (a host-bound step: kernels 8.7x faster,
wall time 1.01x). Reports put wall time and the plan's validation error beside kernel time wherever
the run has them, and the banner's verdict follows wall time when it was measured:

    e = read_end_to_end(Path("examples/captures/h200/sdpa_attention"))
    e = end_to_end_for(Path(".../sdpa_attention/baseline"), Path(".../sdpa_attention/optimized"))
    banner(comparison, e)  ->  ("unchanged", "UNCHANGED end to end: 0.555 -> 0.550 ms wall time per step (1.01x);
                                profiled kernel time 822.1 -> 94.4 us (8.71x): the kernels are faster ...")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from profiler_core.analysis.compare import Comparison
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds
from profiler_core.confinement import read_input
from profiler_core.errors import ProfilerError
from profiler_core.report.digest import us
from profiler_core.rundir.layout import OPTIMIZE_NAME, PLAN_NAME, WALLTIME_NAME

Verdict = Literal["faster", "slower", "unchanged"]


@dataclass(frozen=True, slots=True)
class EndToEnd:
    """Median wall time per step (ms) of each side, and the optimized plan's validation error."""

    base_wall_ms: float | None = None
    opt_wall_ms: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    source: Path | None = None  # the directory whose optimize.json / walltime.json these came from
    # the yardstick: the recipe a user writes instead, each as (what they write, outcome, median ms or why not)
    recipes: tuple[tuple[str, str, str], ...] = ()
    recipe_verdict: str = ""
    # each timing process's median, where the figures pool several (the MCP walltime tool's rounds)
    base_process_ms: tuple[float, ...] = ()
    opt_process_ms: tuple[float, ...] = ()

    @property
    def process_pairs(self) -> tuple[tuple[float, float], ...]:
        """(baseline, optimized) median of each round of processes: the two timed one after the other."""
        return tuple(zip(self.base_process_ms, self.opt_process_ms, strict=False))

    def pair_verdicts(self, t: Thresholds = DEFAULT_THRESHOLDS) -> tuple[Verdict, ...]:
        """Each round's verdict on its own pair of processes (empty unless each side ran in several)."""
        pairs = self.process_pairs
        if len(pairs) < 2 or any(o <= 0 for _, o in pairs):
            return ()
        return tuple(speedup_verdict(b / o, t) for b, o in pairs)

    @property
    def within_process_noise(self) -> bool:
        """Each side was timed in several processes and the rounds disagree: one pair of processes says
        faster (or slower) and another does not. A step whose wall time moves that much between processes
        has no verdict. The rule is the loop's: a wall-time verdict stands only if every pair gives it."""
        return len(set(self.pair_verdicts())) > 1

    @property
    def wall_speedup(self) -> float | None:
        """Baseline over optimized wall time (None unless both were measured)."""
        if self.base_wall_ms and self.opt_wall_ms:
            return self.base_wall_ms / self.opt_wall_ms
        return None


def _median(entry: object) -> float | None:
    value = entry.get("median_ms") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _process_medians(entry: object) -> tuple[float, ...]:
    values = entry.get("process_medians_ms") if isinstance(entry, dict) else None
    if not isinstance(values, list):
        return ()
    return tuple(float(v) for v in values if isinstance(v, int | float))


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(read_input(path, what="run summary", max_bytes=64 * 1024 * 1024))
    except (OSError, ValueError, ProfilerError):  # unreadable, or outside the confinement roots
        return {}
    return data if isinstance(data, dict) else {}


def read_end_to_end(run_dir: Path, optimized_dir: Path | None = None) -> EndToEnd | None:
    """Wall times and validation from a run directory (optimize.json, walltime.json, the plan.json
    of ``optimized_dir``); None when it holds none of them."""
    summary = _read_json(run_dir / OPTIMIZE_NAME)
    wall = summary.get("wall_time") or _read_json(run_dir / WALLTIME_NAME)
    validation = summary.get("validation") or {}
    if not validation and optimized_dir is not None:
        validation = _read_json(optimized_dir / PLAN_NAME).get("validation") or {}
    stick = summary.get("yardstick") or {}
    e = EndToEnd(base_wall_ms=_median(wall.get("baseline")), opt_wall_ms=_median(wall.get("optimized")),
                 max_abs_err=validation.get("max_abs_err"), max_rel_err=validation.get("max_rel_err"),
                 source=run_dir, recipes=recipe_rows(stick.get("recipes") or []),
                 recipe_verdict=str(stick.get("verdict") or ""))
    return e if any(v is not None for v in (e.base_wall_ms, e.opt_wall_ms, e.max_abs_err)) or e.recipes else None


def recipe_rows(recipes: list) -> tuple[tuple[str, str, str], ...]:
    """optimize.json's yardstick recipes as report rows: (what the user writes, outcome, ms or why not)."""
    rows = []
    for r in recipes:
        if not isinstance(r, dict):
            continue
        ms = r.get("median_ms")
        shown = f"{ms:.3f} ms" if isinstance(ms, int | float) else str(r.get("reason") or "-")[:200]
        rows.append((str(r.get("code") or r.get("recipe")), str(r.get("outcome")), shown))
    return tuple(rows)


def run_dir_of(path: Path) -> Path:
    """The run directory a profile argument names: the directory itself, or the one holding the file."""
    return path if path.is_dir() else path.parent


def _is_optimized_run(home: Path, opt_dir: Path) -> bool:
    """Whether ``opt_dir`` is the optimized side that ``home``'s wall times measured.

    That is ``home/optimized`` (a shipped example), or the optimize loop's kept trial
    (``final_run_dir`` in optimize.json), that trial's ``capture/`` included.
    """
    if opt_dir == home / "optimized":
        return True
    final = _read_json(home / OPTIMIZE_NAME).get("final_run_dir")
    if not isinstance(final, str) or not final:
        return False
    trial = home / Path(final).name
    return opt_dir in (trial, trial / "capture")


def end_to_end_for(base: Path, opt: Path) -> EndToEnd | None:
    """The end-to-end figures recorded for exactly this baseline and optimized run, else None.

    Wall times live beside the runs they measured (``<home>/walltime.json`` or optimize.json's
    ``wall_time``, with ``<home>/baseline/``): they apply only when ``base`` is that baseline and
    ``opt`` is the optimized run they timed, so another pair never borrows them.
    """
    base_dir, opt_dir = run_dir_of(base).resolve(), run_dir_of(opt).resolve()
    home = base_dir.parent
    recorded = (home / WALLTIME_NAME).is_file() or (home / OPTIMIZE_NAME).is_file()
    if base_dir.name != "baseline" or not recorded:
        return None
    if not _is_optimized_run(home, opt_dir):
        return None
    plan_dir = opt_dir.parent if opt_dir.name == "capture" else opt_dir
    return read_end_to_end(home, plan_dir)


def speedup_verdict(speedup: float, t: Thresholds = DEFAULT_THRESHOLDS) -> Verdict:
    """faster / slower / unchanged for a baseline-over-optimized ratio, within the unchanged tolerance."""
    delta_pct = (1.0 / speedup - 1.0) * 100.0
    return "unchanged" if abs(delta_pct) <= t.unchanged_tolerance_pct else "faster" if delta_pct < 0 else "slower"


def wall_verdict(e: EndToEnd | None, t: Thresholds = DEFAULT_THRESHOLDS) -> Verdict | None:
    """faster / slower / unchanged by median wall time per step (None unless both sides were timed)."""
    speedup = e.wall_speedup if e is not None else None
    if speedup is None or e is None:
        return None
    rounds = set(e.pair_verdicts(t))
    if len(rounds) > 1:
        return "unchanged"
    return rounds.pop() if rounds else speedup_verdict(speedup, t)


def read_walltime_file(path: Path) -> EndToEnd | None:
    """The wall times of a walltime.json (``baseline`` / ``optimized`` medians), None when it has neither."""
    wall = _read_json(path)
    e = EndToEnd(base_wall_ms=_median(wall.get("baseline")), opt_wall_ms=_median(wall.get("optimized")),
                 source=path, base_process_ms=_process_medians(wall.get("baseline")),
                 opt_process_ms=_process_medians(wall.get("optimized")))
    return e if e.base_wall_ms is not None or e.opt_wall_ms is not None else None


def disagreement(kernel: Verdict, wall: Verdict) -> str:
    """Why profiled kernel time and wall time per step tell different stories."""
    if kernel == "faster":
        return (f"the kernels are faster but the step is {wall}, so the step's time is not in its kernels: it is "
                "host-bound or launch-bound (Python, dispatch, kernel launches, synchronisation)")
    if wall == "faster":
        return (f"the kernels are {kernel} but the step is faster: the time saved was outside the kernels "
                "(fewer launches or less host work, as CUDA graphs give)")
    return (f"the kernels are {kernel} but the step is {wall}: time outside the kernels changed "
            "(host work, launches or synchronisation)")


def banner(c: Comparison, e: EndToEnd | None, t: Thresholds = DEFAULT_THRESHOLDS) -> tuple[Verdict, str]:
    """The verdict and its sentence: by wall time when both sides were timed, else by kernel time."""
    speed = f"{c.speedup:.2f}x" if c.speedup else "n/a"
    per = " per iteration" if c.per_iteration else ""
    kernel = f"{us(c.base_total_ns)} -> {us(c.opt_total_ns)} us{per} ({speed})"
    wall_speedup = e.wall_speedup if e is not None else None
    if e is None or wall_speedup is None or e.base_wall_ms is None or e.opt_wall_ms is None:
        verdict: Verdict = c.verdict
        text = f"{verdict.upper()} on profiled kernel time: {kernel}; no end-to-end wall time measured"
    else:
        verdict = wall_verdict(e, t) or c.verdict
        text = (f"{verdict.upper()} end to end: {e.base_wall_ms:.3f} -> {e.opt_wall_ms:.3f} ms wall time per step "
                f"({wall_speedup:.2f}x)")
        rounds = e.pair_verdicts(t)
        if len(set(rounds)) > 1:
            pairs = ", ".join(f"{b:.3f} -> {o:.3f}" for b, o in e.process_pairs)
            text += f" within between-process noise: the rounds of processes disagree ({pairs} ms: {', '.join(rounds)})"
        text += f"; profiled kernel time {kernel}"
        if verdict != c.verdict:
            text += ": " + disagreement(c.verdict, verdict)
    if e is not None and e.max_abs_err is not None:
        rel = f", max rel err {e.max_rel_err:.3g}" if e.max_rel_err is not None else ""
        text += f". Outputs validated: max abs err {e.max_abs_err:.3g}{rel}"
    return verdict, text + "."


def verdict_fields(c: Comparison, e: EndToEnd | None) -> dict[str, object]:
    """The verdict as data, end to end first: what ``--json`` and the MCP tools return beside the comparison.

    ``verdict`` and ``speedup`` follow wall time per step when both sides were timed, else profiled
    kernel time (``verdict_basis`` says which); the kernel-time verdict is always there too.
    """
    verdict, text = banner(c, e)
    wall = wall_verdict(e)
    return {
        "verdict": verdict, "verdict_basis": "wall_time" if wall is not None else "kernel_time",
        "speedup": e.wall_speedup if wall is not None and e is not None else c.speedup, "headline": text,
        "base_wall_ms": e.base_wall_ms if e else None, "opt_wall_ms": e.opt_wall_ms if e else None,
        "wall_speedup": e.wall_speedup if e else None,
        "kernel_verdict": c.verdict, "kernel_speedup": c.speedup,
        "agree": wall is None or wall == c.verdict,
        "source": str(e.source) if e is not None and e.source is not None else None,
    }
