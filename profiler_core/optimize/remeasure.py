"""Re-measure a finished optimize run against the yardstick, without a new capture (``oprof yardstick``).

An optimize run's verdict "plan vs recipe" holds for the machine and the torch it was timed on.
This times it again, here, the same way the loop's last step does (``_wall_times`` and
``_measure_yardstick`` in :mod:`profiler_core.optimize.loop`):

    RUN_DIR/optimize.json        what the loop kept, and the workload it ran
    the workload                 --workload, else optimize.json's, found from here or above RUN_DIR
    the plan                     the kept trial's workload_optimized.py, or one written from its plan.json
                                 (none when nothing was kept: the baseline is then the plan)
    -> baseline and plan timed end to end (walltime.measure), each recipe validated and timed
       (yardstick.measure_recipe), the verdict (yardstick.judge)
    -> optimize.json: its yardstick (these figures, when and where) and a note; the loop's own
       wall_time, walltime.json, captures, comparison and report stay as the loop left them
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.errors import ArtifactFormatError, OutputError, ProfilerError, WorkloadError
from profiler_core.optimize import walltime, yardstick
from profiler_core.optimize.result import OptimizeResult
from profiler_core.rundir.layout import (
    BASELINE_DIR,
    OPTIMIZE_NAME,
    OPTIMIZED_WORKLOAD_NAME,
    PLAN_NAME,
)

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import ProgressFn

__all__ = ["final_plan_dir", "read_optimize_result", "remeasure", "resolve_workload"]

SHIPPED_OPTIMIZED_DIR = "optimized"  # what scripts/ship_capture.py renames the kept trial to
DEFAULT_COMPILE_MODE = "default"  # the loop's (CaptureConfig's) when the baseline's manifest does not say
_FIX = "point at an `oprof optimize` run directory"
_MAX_OPTIMIZE_BYTES = 64 * 1024 * 1024


def read_optimize_result(run_dir: Path) -> OptimizeResult:
    """``run_dir/optimize.json``; ArtifactFormatError naming the file when it is missing or malformed."""
    from profiler_core.confinement import read_input

    path = run_dir / OPTIMIZE_NAME
    if not path.is_file():
        what = "no such file" if run_dir.is_dir() else "no such directory"
        raise ArtifactFormatError(f"{path}: {what}; {_FIX}")
    try:
        data = read_input(path, what="optimize summary", max_bytes=_MAX_OPTIMIZE_BYTES)
        return OptimizeResult.model_validate_json(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the top level"
        raise ArtifactFormatError(f"{path}: not an optimize run's summary (at '{where}': {first['msg']}); "
                                  f"{_FIX}") from err
    except OSError as err:
        raise ArtifactFormatError(f"{path}: cannot read it ({err.strerror or err}); {_FIX}") from err


def resolve_workload(run_dir: Path, recorded: str, given: Path | None = None) -> Path:
    """The workload to time: ``given``, else ``recorded`` as written (from the current directory),
    else relative to ``run_dir`` or a folder above it; WorkloadError suggesting --workload otherwise."""
    if given is not None:
        if not given.is_file():
            raise WorkloadError(f"{given}: no such workload file; pass the workload the run optimized with "
                                "--workload PATH")
        return given.resolve()
    path = Path(recorded)
    candidates = [path] if path.is_absolute() else [path, *(d / path for d in (run_dir, *run_dir.resolve().parents))]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise WorkloadError(f"{run_dir / OPTIMIZE_NAME}: its workload {recorded!r} is not found (looked from the current "
                        f"directory and from {run_dir} upwards); pass the workload file with --workload PATH")


def final_plan_dir(run_dir: Path, result: OptimizeResult) -> Path:
    """The kept trial's directory: optimize.json's ``final_run_dir`` (as written, then by its name inside
    ``run_dir``), else ``run_dir/optimized`` (a shipped run renames it); ArtifactFormatError if none is there."""
    candidates: list[Path] = []
    if result.final_run_dir:
        final = Path(result.final_run_dir)
        candidates += [run_dir / final, run_dir / final.name]
    candidates.append(run_dir / SHIPPED_OPTIMIZED_DIR)
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise ArtifactFormatError(f"{run_dir / OPTIMIZE_NAME}: the kept plan's directory "
                              f"{result.final_run_dir or SHIPPED_OPTIMIZED_DIR!r} is not in {run_dir}; {_FIX} "
                              "that still holds its kept trial")


def plan_workload(run_dir: Path, result: OptimizeResult, workload: Path, scratch: Path) -> Path | None:
    """The kept plan as a workload file (None when nothing was kept): the kept trial's
    workload_optimized.py, else one written from its plan.json beside it (into ``scratch`` when
    that directory cannot be written)."""
    from profiler_core.passes.plan import read_plan
    from profiler_core.passes.wrapper import write_optimized_workload

    if not result.kept_passes:
        return None
    final = final_plan_dir(run_dir, result)
    target = final / OPTIMIZED_WORKLOAD_NAME
    if target.is_file():
        return target
    plan_file = final / PLAN_NAME
    if not plan_file.is_file():
        raise ArtifactFormatError(f"{plan_file}: not found, and no {OPTIMIZED_WORKLOAD_NAME} beside it: nothing "
                                  f"says how to apply the kept passes ({', '.join(result.kept_passes)}); {_FIX} "
                                  "that still holds its kept trial")
    plan = read_plan(plan_file).model_copy(update={"workload": str(workload)})
    try:
        return write_optimized_workload(target, plan)
    except OutputError:  # a read-only run directory: the file only has to live while it is timed
        return write_optimized_workload(scratch / OPTIMIZED_WORKLOAD_NAME, plan)


def baseline_compile_mode(run_dir: Path) -> str:
    """The compile mode the loop timed with: its baseline capture's, else the loop's default."""
    from profiler_core.rundir import read_manifest

    try:
        return str(read_manifest(run_dir / BASELINE_DIR).workload.compile_mode)
    except (ProfilerError, OSError, ValueError):
        return DEFAULT_COMPILE_MODE


def _check_writable(run_dir: Path) -> None:
    """Refuse before any timing a run directory whose optimize.json cannot be replaced."""
    targets = [run_dir, *(p for p in (run_dir / OPTIMIZE_NAME,) if p.exists())]
    if not all(os.access(p, os.W_OK) for p in targets):
        raise OutputError(f"{run_dir}: cannot write {OPTIMIZE_NAME} there; copy the run directory somewhere "
                          "writable and point at the copy")


def _time(what: str, workload: Path, *, iters: int, warmup: int, compile_mode: str, device: str,
          python: str) -> walltime.WallTime:
    """``walltime.measure`` of ``workload``; its failure as a WorkloadError saying which side failed."""
    try:
        return walltime.measure(workload, iters=iters, warmup=warmup, compile_mode=compile_mode, device=device,
                                python=python)
    except ProfilerError as err:
        raise WorkloadError(f"timing {what} failed, so nothing was re-measured: {err}") from err


def _machine(device: str) -> str:
    """Where the timings ran: the CUDA device's name (else ``device``) and torch's version."""
    import torch

    where = device
    try:
        if torch.device(device).type == "cuda" and torch.cuda.is_available():
            where = torch.cuda.get_device_name(torch.device(device))
    except (RuntimeError, AssertionError, ValueError):
        pass
    return f"{where}, torch {torch.__version__}"


def remeasure(run_dir: Path, *, workload: Path | None, wall_iters: int, warmup: int, device: str,
              backend: str, python: str, progress: ProgressFn | None = None,
              compile_mode: str | None = None) -> OptimizeResult:
    """Time the run's baseline, its kept plan and every recipe again; update optimize.json's yardstick.

    ``backend``: the recipes' torch.compile backend. ``compile_mode``: how the baseline and the plan are
    compiled when timed (None: as the loop timed them, the baseline capture's mode, else "default").
    """
    result = read_optimize_result(run_dir)
    original = resolve_workload(run_dir, result.workload, workload)
    _check_writable(run_dir)
    total = 2 + len(yardstick.RECIPES)
    say = (lambda step, m: progress("yardstick", step, total, m)) if progress else (lambda step, m: None)
    with tempfile.TemporaryDirectory(prefix="oprof-yardstick-") as scratch:
        plan = plan_workload(run_dir, result, original, Path(scratch))
        mode = compile_mode or baseline_compile_mode(run_dir)
        say(0, f"timing {wall_iters} end-to-end iterations of the baseline {original}")
        base = _time("the baseline", original, iters=wall_iters, warmup=warmup, compile_mode=mode, device=device,
                     python=python)
        opt = None
        if plan is not None:
            say(1, f"timing {wall_iters} end-to-end iterations of the kept plan ({', '.join(result.kept_passes)})")
            opt = _time("the kept plan", plan, iters=wall_iters, warmup=warmup, compile_mode=mode, device=device,
                        python=python)
    recipes = []
    for step, recipe in enumerate(yardstick.RECIPES, start=2):
        say(step, f"validating and timing {recipe.code}")
        recipes.append(yardstick.measure_recipe(original, recipe, iters=wall_iters, warmup=warmup, device=device,
                                                python=python, backend=backend))
    _record(result, base, opt, recipes, device=device)
    say(total, result.yardstick.verdict if result.yardstick else "")
    write_text_atomic(run_dir / OPTIMIZE_NAME, result.model_dump_json(indent=1))
    return result


def _record(result: OptimizeResult, base: walltime.WallTime, opt: walltime.WallTime | None,
            recipes: list[yardstick.RecipeResult], *, device: str) -> None:
    """The new figures into ``result.yardstick``, judged as the loop judges them, with where and when.

    The loop's own ``wall_time`` (what it decided on) stays as it was: the yardstick holds the
    side-by-side timing of baseline, plan and recipes, and a note gives both.
    """
    plan = opt if opt is not None else base
    label = "the kept plan" if opt is not None else "the baseline (nothing kept)"
    stick = yardstick.judge(recipes, plan.median_ms, label, nothing_kept=opt is None, plan_wall=plan.as_dict())
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    stick.remeasured = f"{when} on {_machine(device)}"
    stick.baseline_wall_time = base.as_dict()
    stick.plan_wall_time = opt.as_dict() if opt is not None else {}
    result.yardstick = stick
    loop = ", ".join(f"{side} {figures['median_ms']:.3f} ms" for side, figures in result.wall_time.items()
                     if isinstance(figures.get("median_ms"), int | float))
    now = f"baseline {base.median_ms:.3f} ms" + (f", plan {opt.median_ms:.3f} ms" if opt is not None else "")
    result.notes.append(f"yardstick re-measured by `oprof yardstick` at {stick.remeasured}: {now}, each recipe "
                        "timed beside them; no new capture"
                        + (f" (the loop's own end-to-end medians, kept in wall_time: {loop})" if loop else ""))
