"""The closed loop without an LLM: capture, attribute, diagnose, transform, validate, re-measure, compare.

    baseline capture -> profile -> findings (structural first, then by their bound on the gain)
    judge the baseline once: its step must be reproducible, or no pass could be validated
    while the budget lasts: take the next candidate (combinations a kept pass suggests, then the
      findings' passes) and run_trial it (optimize/trial.py): a pass that cannot apply costs nothing;
      one that is rejected or not faster leaves the loop going on to the next
    -> compare, report, end-to-end wall times, and the yardstick: the recipe a user writes instead
       (optimize/yardstick.py), timed the same way, with the verdict
    -> run dir (names in rundir/layout.py): baseline/, trial-N-<pass>/, findings.json, comparison.json,
       report.html, walltime.json, optimize.json

The same function backs ``oprof optimize``, the MCP server and the Claude Code plugin.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from profiler_core.atomic_write import write_text_atomic
from profiler_core.errors import ProfilerError
from profiler_core.optimize import yardstick
from profiler_core.optimize.result import OptimizeConfig, OptimizeResult, Trial
from profiler_core.optimize.state import LoopState
from profiler_core.optimize.trial import (
    candidate_passes,
    judged_on_timeline,
    next_candidate,
    plan_compile,
    run_trial,
    suggest_after_keep,
)
from profiler_core.profile_io import read_profile
from profiler_core.rundir.layout import (
    BASELINE_DIR,
    COMPARISON_NAME,
    FINDINGS_NAME,
    OPTIMIZE_NAME,
    OPTIMIZED_WORKLOAD_NAME,
    PROFILE_NAME,
    REPORT_NAME,
    WALLTIME_NAME,
)
from profiler_core.schema import Profile

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import ProgressFn

__all__ = ["OptimizeConfig", "OptimizeResult", "Trial", "candidate_passes", "judged_on_timeline", "model_trains",
           "optimize", "plan_compile"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _baseline_profile(run_dir: Path) -> Profile:
    """The profile of an existing capture directory (attributed now if it has none)."""
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import write_profile

    if (run_dir / PROFILE_NAME).exists():
        return read_profile(run_dir / PROFILE_NAME)
    profile = attribute_run(run_dir)
    write_profile(run_dir / PROFILE_NAME, profile)
    return profile


def model_trains(run_dir: Path) -> bool:
    """Whether the capture in ``run_dir`` ran a model in train mode (its harness says so)."""
    from profiler_core.rundir import read_manifest

    try:
        manifest = read_manifest(run_dir)
    except ProfilerError:
        return False
    return any(bool((phase.harness or {}).get("model_training")) for phase in manifest.phases)


def optimize(workload: str | Path, config: OptimizeConfig | None = None, *, progress: ProgressFn | None = None,
             cancel: threading.Event | None = None) -> OptimizeResult:
    """Run the loop on ``workload``; every artifact lands in the run directory (see module docstring).

    Each capture keeps its Inductor cache (in a temporary directory, removed at the end) so the
    end-to-end timing of the baseline and of the kept plan loads the kernels their captures
    compiled instead of compiling them cold again.
    """
    caches = Path(tempfile.mkdtemp(prefix="oprof-optimize-caches-"))
    try:
        state = _start(Path(workload).resolve(), config or OptimizeConfig(), progress, cancel, caches)
        _trials(state)
        return _finish(state)
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def _save(state: LoopState) -> None:
    write_text_atomic(state.out / OPTIMIZE_NAME, state.result.model_dump_json(indent=1))


def _start(path: Path, cfg: OptimizeConfig, progress: ProgressFn | None, cancel: threading.Event | None,
           caches: Path) -> LoopState:
    """The baseline: captured (or reused), diagnosed; the loop's state around it."""
    from profiler_core.analysis import diagnose
    from profiler_core.optimize.trial import capture_profile
    from profiler_core.rundir.create import DEFAULT_RUNS_DIR, default_run_dir

    cap = dataclasses.replace(cfg.capture, device=cfg.device)
    out = Path(cfg.out_dir) if cfg.out_dir else default_run_dir(path, DEFAULT_RUNS_DIR, kind="optimize")
    result = OptimizeResult(workload=str(path), created_at=_now(), run_dir=str(out))
    say = (lambda m: progress("optimize", 0, cfg.budget + 2, m)) if progress else (lambda m: None)
    baseline_dir = Path(cfg.baseline_run) if cfg.baseline_run else out / BASELINE_DIR
    if cfg.baseline_run:
        say(f"reusing the baseline capture {baseline_dir}")
        baseline = _baseline_profile(baseline_dir)
    else:
        say("capturing the baseline")
        started = time.perf_counter()
        baseline = capture_profile(path, baseline_dir,
                                   dataclasses.replace(cap, inductor_cache_dir=caches / BASELINE_DIR),
                                   progress, cancel)
        result.baseline_capture_s = round(time.perf_counter() - started, 3)
    result.training = model_trains(baseline_dir)
    out.mkdir(parents=True, exist_ok=True)
    findings = diagnose(baseline)
    write_text_atomic(out / FINDINGS_NAME, findings.model_dump_json(indent=1))
    result.baseline_kernel_ns = result.optimized_kernel_ns = baseline.coverage.duration_ns
    result.baseline_attributed_pct = result.optimized_attributed_pct = baseline.coverage.attributed_time_pct
    return LoopState(workload=path, out=out, cfg=cfg, cap=cap, result=result, baseline=baseline,
                     baseline_dir=baseline_dir, findings=findings, caches=caches, progress=progress, cancel=cancel)


def _judge_baseline(state: LoopState) -> bool:
    """Run the original step twice from identical state (once per loop) and ask each pass whether it
    can apply to this model; False (with a note) when no pass could be judged on this workload."""
    from profiler_core.passes import PassContext, list_passes
    from profiler_core.passes.planner import judged_original
    from profiler_core.passes.static_kv_cache import step_calls_generate
    from profiler_core.passes.step_run import optimizers_of
    from profiler_core.workload import load_workload

    try:
        wl = load_workload(state.workload, device=state.cfg.device)
        training = judged_original(wl, state.cfg.device)[1] is not None
    except ProfilerError as err:  # NotReproducibleError above all: every trial would fail the same way
        state.result.notes.append(f"no pass judged: {err}")
        return False
    ctx = PassContext(model=wl.model, inputs=tuple(wl.inputs), device=state.cfg.device,
                      optimizers=tuple(optimizers_of(wl.model)) if training else ())
    generates = step_calls_generate(wl.step if wl.custom_step else None) is True
    for spec in list_passes():
        why = spec.cannot_apply(ctx)
        if why is not None and not generates:  # asked again after a kept structural pass (trial.py)
            state.by_model.add(spec.name)
        if why is None and generates and not spec.structural:
            why = ("the step calls generate(), which runs the model's own forward: torch.compile(model) never "
                   "compiles it, so a pass on the compiled graph has nothing to change (static_kv_cache "
                   "compiles the decode step)")
        if why is not None:
            state.cannot_apply[spec.name] = why
    return True


def _trials(state: LoopState) -> None:
    """Trials while the budget lasts; optimize.json after each (a loop killed in the next keeps them)."""
    from profiler_core.analysis import diagnose

    if state.cfg.budget < 1 or not candidate_passes(state.findings) or not _judge_baseline(state):
        return
    while state.tried < state.cfg.budget and (candidate := next_candidate(state)) is not None:
        state.check_cancel()
        started = time.perf_counter()
        trial = run_trial(state, candidate, state.cfg)
        if trial.run_dir is not None:
            trial.wall_s = round(time.perf_counter() - started, 3)
        if trial.outcome != "no_pass":
            why = f" ({trial.reason[:160]})" if trial.reason else ""
            state.note(state.tried, f"{trial.transformation}: {trial.outcome}{why}")
        _save(state)
        if trial.outcome == "kept":
            # the kept pass changed what there is to fix: a symptom it removed licenses nothing now,
            # one it exposed licenses its own pass, and the pass suggests what to combine with it
            assert state.best is not None and state.best_dir is not None
            state.current = diagnose(state.best)
            write_text_atomic(state.best_dir / FINDINGS_NAME, state.current.model_dump_json(indent=1))
            suggest_after_keep(state, trial.passes[-1])


def _finish(state: LoopState) -> OptimizeResult:
    """Compare, report, time end to end, measure the recipe beside the plan; optimize.json."""
    from profiler_core.analysis import compare

    assert state.best is not None and state.best_dir is not None
    result, cfg = state.result, state.cfg
    result.kept_passes = state.kept
    result.final_run_dir = str(state.best_dir)
    result.optimized_kernel_ns = state.best.coverage.duration_ns
    result.optimized_attributed_pct = state.best.coverage.attributed_time_pct
    state.note(cfg.budget + 1, "comparing and reporting")
    comparison = compare(state.baseline, state.best, base_findings=state.findings, base_label="baseline",
                         opt_label="optimized")
    # compare's figure, so optimize.json and comparison.json agree (it scales by iteration counts)
    result.kernel_speedup = comparison.speedup if comparison.speedup is not None else 1.0
    write_text_atomic(state.out / COMPARISON_NAME, comparison.model_dump_json(indent=1))
    _write_report(state, comparison)
    # written now and again after the wall times: a slow or killed timing run loses nothing above
    _save(state)
    if cfg.wall_iters > 0:
        state.check_cancel()
        state.note(cfg.budget + 1, f"timing {cfg.wall_iters} end-to-end iterations, baseline and optimized")
        try:
            _wall_times(state)
        except ProfilerError as err:  # the end-to-end timing is extra: it must not lose the loop's results
            result.notes.append(f"wall time not measured: {err}")
        _measure_yardstick(state)
        _write_report(state, comparison)  # again, with the wall times and the recipe beside kernel time
    elif cfg.yardstick:
        result.notes.append("yardstick not measured: it is timed like the plan, and wall_iters is 0")
    _save(state)
    return result


def _write_report(state: LoopState, comparison: object) -> None:
    from profiler_core.report import render_html
    from profiler_core.report.end_to_end import EndToEnd, recipe_rows

    result = state.result
    wall = {side: result.wall_time.get(side, {}).get("median_ms") for side in ("baseline", "optimized")}
    stick = result.yardstick
    end_to_end = EndToEnd(
        base_wall_ms=float(wall["baseline"]) if wall["baseline"] is not None else None,
        opt_wall_ms=float(wall["optimized"]) if wall["optimized"] is not None else None,
        max_abs_err=result.validation.get("max_abs_err"), max_rel_err=result.validation.get("max_rel_err"),
        recipes=recipe_rows([r.model_dump() for r in stick.recipes]) if stick else (),
        recipe_verdict=stick.verdict if stick else "")
    write_text_atomic(state.out / REPORT_NAME, render_html(
        state.best, findings=state.findings, comparison=comparison,  # type: ignore[arg-type]
        baseline=state.baseline, title=f"{state.workload.name}: optimization", end_to_end=end_to_end,
        trials=state.result.trials, training=_training_section(state)))


def _training_section(state: LoopState) -> str | None:
    """The report's training view (kernel time per phase, per kept pass) of a training workload."""
    from profiler_core.report.training_view import build_training_view, kept_profiles, training_view_html

    if not state.result.training:
        return None
    try:
        kept = kept_profiles([t.model_dump(mode="json") for t in state.result.trials])
    except (OSError, ProfilerError) as err:
        state.result.notes.append(f"training view left out: {err}")
        return None
    view = build_training_view(state.baseline, kept)
    return training_view_html(view) if view is not None else None


def _wall_times(state: LoopState) -> None:
    """The baseline's and the kept plan's end-to-end times (a timing a trial already took is reused)."""
    assert state.best_dir is not None
    result = state.result
    base, seconds = state.wall_of(state.baseline_dir)
    result.wall_time["baseline"] = base.as_dict()
    result.plain_run_s = round(seconds, 3)
    if state.best_dir != state.baseline_dir and (state.best_dir / OPTIMIZED_WORKLOAD_NAME).exists():
        opt, _ = state.wall_of(state.best_dir)
        result.wall_time["optimized"] = opt.as_dict()
        result.wall_speedup = base.median_ms / opt.median_ms if opt.median_ms else None
    write_text_atomic(state.out / WALLTIME_NAME, json.dumps(result.wall_time, indent=1))


def _measure_yardstick(state: LoopState) -> None:
    """Each recipe validated and timed like the plan; the verdict says who is ahead and by how much."""
    cfg = state.cfg
    if not cfg.yardstick:
        return
    recipes = []
    for recipe in yardstick.RECIPES:
        state.check_cancel()
        state.note(cfg.budget + 1, f"yardstick: validating and timing {recipe.code}")
        recipes.append(yardstick.measure_recipe(state.workload, recipe, iters=cfg.wall_iters, warmup=cfg.wall_warmup,
                                                device=cfg.device, python=state.cap.python,
                                                backend=cfg.yardstick_backend))
    kept = "optimized" in state.result.wall_time
    label = "the kept plan" if kept else "the baseline (nothing kept)"
    walls = state.result.wall_time
    state.result.yardstick = yardstick.judge(recipes, state.result.plan_wall_ms, label, nothing_kept=not kept,
                                             plan_wall=walls.get("optimized") or walls.get("baseline"))
    state.note(cfg.budget + 1, f"yardstick: {state.result.yardstick.verdict}")
