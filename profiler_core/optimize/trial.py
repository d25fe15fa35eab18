"""One trial of the loop, as a protocol: ``run_trial(state, candidate, cfg) -> Trial``.

    look the pass up (none implements it: no_pass, free)
    -> applicability (the module or pattern it needs, train mode, a change already in place: skipped, free)
    -> apply + validate numerics against the baseline (rejected_validation / not_applied / failed)
    -> capture the plan's workload_optimized.py -> compare with the best so far
    -> kept, not_faster or not_comparable (judged on wall time when the finding is about the timeline;
       a plan faster on kernel time is still refused when the step gets clearly slower end to end,
       and the graph pass is tried next, the refused pass on top of it)

Only a trial that reaches "apply" spends budget. ``next_candidate`` says what to try next: the
combinations a kept pass suggests first, then the best capture's findings in order.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from profiler_core.analysis.findings import in_priority_order
from profiler_core.capture.config import CaptureConfig, CompileMode
from profiler_core.errors import CaptureCancelledError, PassError, ProfilerError
from profiler_core.optimize.result import OptimizeConfig, Trial
from profiler_core.optimize.state import Candidate, LoopState
from profiler_core.rundir.layout import OPTIMIZED_WORKLOAD_NAME, TRIAL_CAPTURE_DIR, trial_dir

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import ProgressFn
    from profiler_core.optimize.walltime import WallTime
    from profiler_core.passes.plan import OptimizationPlan
    from profiler_core.schema import Profile


def capture_profile(workload: Path, run_dir: Path, base: CaptureConfig, progress: ProgressFn | None,
                    cancel: threading.Event | None) -> Profile:
    """Capture and attribute ``workload`` into ``run_dir``; the profile the capture wrote."""
    from profiler_core.capture.pipeline import capture
    from profiler_core.profile_io import read_profile

    if cancel is not None and cancel.is_set():
        raise CaptureCancelledError("the optimization loop was cancelled")
    done = capture(workload, dataclasses.replace(base, out_dir=run_dir, attribute=True), progress=progress,
                   cancel=cancel)
    return done.profile if done.profile is not None else read_profile(done.run_dir / "profile.json")


def plan_compile(mode: CompileMode) -> tuple[str | None, str]:
    """(compile_mode, compiler) for apply_pass_plan so a plan's model is compiled as the captures are.

    Eager captures leave the model uncompiled, so the plan runs its graph rewrites without
    Inductor; apply_pass_plan knows no "eager" compile mode.
    """
    if mode is CompileMode.EAGER:
        return None, "eager"
    return mode.value, "inductor"


def judged_on_timeline(findings: object, rule: str) -> bool:
    """Whether ``rule``'s finding bounds its gain on the timeline (idle gaps), not on kernel time."""
    return any(f.rule_id == rule and f.gain_basis == "timeline"
               for f in findings.findings)  # type: ignore[attr-defined]


def candidate_passes(findings: object) -> list[tuple[str, str]]:
    """(transformation, finding rule) in order of the findings' gain bound, each once.

    Structural findings go first: a structural change (rerouting an unrolled recurrence to cuDNN)
    removes the very kernels the tuning findings measured (tiny FP32 GEMMs, launch gaps), so
    tuning them first would spend the budget on symptoms.
    """
    seen: set[str] = set()
    out = []
    for f in in_priority_order(findings.findings):  # type: ignore[attr-defined]
        t = f.transformation
        if t and t not in seen:
            seen.add(t)
            out.append((t, f.rule_id))
    return out


def next_candidate(state: LoopState) -> Candidate | None:
    """A combination a kept pass suggests, else the next licensed pass of the best capture's findings."""
    while state.suggested:
        cand = state.suggested.pop(0)
        if cand.transformation not in state.kept and (*state.kept, cand.transformation) not in state.plans:
            return cand
    for t, rule in candidate_passes(state.current):
        if t not in state.considered:
            state.considered.add(t)
            return Candidate(t, rule)
    return None


def suggest_after_keep(state: LoopState, name: str) -> None:
    """Queue the passes ``name`` suggests on top of it (bf16 -> cuda_graphs), first in line."""
    from profiler_core.passes import get_pass

    try:
        follow = get_pass(name).suggests
    except PassError:
        return
    state.suggested[:0] = [Candidate(s, f"kept:{name}") for s in follow if s not in state.kept]


def applicability_after_kept(state: LoopState, name: str) -> str | None:
    """Why ``name`` cannot apply, asked of the model the kept structural passes made where they changed it.

    The loop asks every pass once, of the original model; a structural pass kept since can lift
    the reason (moe_grouped_experts removes the host reads that kept cuda_graphs off). Such a pass
    is asked again, once per kept set, of a fresh build with those passes applied.
    """
    from profiler_core.passes import PassContext, get_pass
    from profiler_core.passes.planner import build_optimized_workload
    from profiler_core.workload import load_workload

    why = state.cannot_apply.get(name)
    structural = tuple(p for p in state.kept if get_pass(p).structural)
    if why is None or name not in state.by_model or not structural:
        return why
    key = (structural, name)
    if key not in state.rechecked:
        try:
            wl = load_workload(state.workload, device=state.cfg.device)
            model, _ = build_optimized_workload(wl.model, tuple(wl.inputs), structural, device=state.cfg.device,
                                                compiler="eager")
            ctx = PassContext(model=getattr(model, "_orig_mod", model), inputs=tuple(wl.inputs),
                              device=state.cfg.device)
            state.rechecked[key] = get_pass(name).cannot_apply(ctx)
        except Exception as err:  # a build that breaks leaves the first answer standing, and says why
            state.rechecked[key] = (f"{why} (asked again with {', '.join(structural)} applied, the build "
                                    f"failed: {type(err).__name__}: {err})")
        if state.rechecked[key] is None:
            state.note(state.tried, f"{name} applies once {', '.join(structural)} changed the model")
    return state.rechecked[key]


def run_trial(state: LoopState, candidate: Candidate, cfg: OptimizeConfig) -> Trial:
    """Try ``candidate`` on top of the kept passes; the trial is appended to the result as it goes."""
    from profiler_core.passes import get_pass

    t = candidate.transformation
    trial = Trial(transformation=t, finding=candidate.finding, passes=[*state.kept, t], outcome="failed")
    state.result.trials.append(trial)
    try:
        spec = get_pass(t)
    except PassError:
        trial.outcome, trial.reason = "no_pass", f"no graph pass implements '{t}' (finding {candidate.finding})"
        return trial
    why = applicability_after_kept(state, spec.name)
    by = next((k for k in state.kept if spec.name in get_pass(k).supersedes), None)
    if why is None and by is not None:
        why = f"{by}, kept, supersedes it"
    if why is not None:
        trial.outcome, trial.reason = "skipped", f"cannot apply, not tried: {why}"
        return trial
    trial.passes = [*state.kept, spec.name]
    state.plans.add(tuple(trial.passes))
    state.tried += 1
    state.number += 1
    state.note(state.tried, f"trying {spec.name} (finding {candidate.finding})")
    run_dir = trial_dir(state.out, state.number, spec.name)
    trial.run_dir = str(run_dir)
    plan = _apply(state, trial, run_dir, cfg)
    if plan is None:
        return trial
    try:
        wrapper = Path(plan.artifacts.get("workload", run_dir / OPTIMIZED_WORKLOAD_NAME))
        prof = capture_profile(wrapper, run_dir / TRIAL_CAPTURE_DIR,
                               dataclasses.replace(state.cap, inductor_cache_dir=state.caches / run_dir.name),
                               state.progress, state.cancel)
    except CaptureCancelledError:
        raise
    except Exception as err:  # a failed trial must not lose the loop's other results
        trial.outcome, trial.reason = "failed", f"{type(err).__name__}: {err}"
        return trial
    _judge(state, trial, candidate, prof, run_dir, cfg)
    return trial


def _apply(state: LoopState, trial: Trial, run_dir: Path, cfg: OptimizeConfig) -> OptimizationPlan | None:
    """Apply and validate the trial's plan; None (with the trial's outcome set) when it goes no further."""
    from profiler_core.passes import apply_pass_plan
    from profiler_core.passes.verdict import verdict_record

    compile_mode, compiler = plan_compile(state.cap.compile_mode)
    try:
        plan = apply_pass_plan(state.workload, trial.passes, device=cfg.device, out_dir=run_dir,
                               compile_mode=compile_mode, compiler=compiler, raise_on_failure=False,
                               baseline_judged=True, policy=cfg.validation)
    except ProfilerError as err:  # e.g. a pass that cannot run here: the other trials still count
        trial.outcome, trial.reason = "failed", f"{type(err).__name__}: {err}"
        return None
    v = plan.validation
    if v is not None:
        trial.max_abs_err, trial.max_rel_err = v.max_abs_err, v.max_rel_err
        trial.validation = verdict_record(v).model_dump()
    if plan.status.value != "validated":
        trial.outcome = "rejected_validation"
        trial.reason = (v.verdict or f"{v.reason} (max abs err {v.max_abs_err}, max rel err {v.max_rel_err})"
                        if v is not None else "validation did not run")
        state.result.validation_failures += 1
        return None
    name = trial.passes[-1]
    if name not in plan.applied:
        trial.outcome, trial.reason = "not_applied", plan.record(name).reason
        return None
    return plan


# they remove gaps, not kernels
GRAPH_PASSES = frozenset({"cuda_graphs", "whole_step_cuda_graphs", "step_graph_capture"})


def _on_timeline(state: LoopState, candidate: Candidate) -> bool:
    """Whether the candidate's gain shows on the timeline: it is a graph pass (whatever licensed it: a
    graph replays the same kernels, so kernel time cannot show its gain), its finding says so, it is
    the pass a host-bound step asked for (``host_bound:<pass>``), or (a suggested combination) some
    finding licensing the same pass did."""
    if candidate.transformation in GRAPH_PASSES or candidate.finding.startswith("host_bound:"):
        return True
    if judged_on_timeline(state.current, candidate.finding):
        return True
    if not candidate.finding.startswith("kept:"):
        return False
    return any(f.transformation == candidate.transformation and f.gain_basis == "timeline"
               for report in (state.findings, state.current) if report is not None for f in report.findings)


def _judge(state: LoopState, trial: Trial, candidate: Candidate, prof: Profile, run_dir: Path,
           cfg: OptimizeConfig) -> None:
    """Keep the plan when its capture is comparable and faster than the best so far."""
    from profiler_core.analysis import compare

    assert state.best is not None and state.best_dir is not None
    cmp = compare(state.best, prof)
    trial.kernel_ns, trial.speedup_vs_best = prof.coverage.duration_ns, cmp.speedup
    kernels = (f"profiled kernel time {state.best.coverage.duration_ns / 1e3:.1f} -> "
               f"{prof.coverage.duration_ns / 1e3:.1f} us")
    if not cmp.comparability.comparable:
        trial.outcome = "not_comparable"
        trial.reason = "; ".join(cmp.comparability.warnings) or "captures are not comparable"
    elif _on_timeline(state, candidate) and cfg.wall_iters > 0:
        trial.judged_on = "wall_time"
        state.note(state.tried, f"timing {cfg.wall_iters} end-to-end iterations of the best so far and of this plan")
        try:
            before, after = state.wall_of(state.best_dir)[0], state.wall_of(run_dir)[0]
        except ProfilerError as err:
            trial.outcome, trial.reason = "failed", f"end-to-end timing failed: {err}"
            return
        trial.best_wall_ms, trial.wall_ms = before.median_ms, after.median_ms
        trial.reason = f"end-to-end median {before.median_ms:.3f} -> {after.median_ms:.3f} ms"
        if after.median_ms * cfg.min_speedup > before.median_ms:  # a refusal: timed again before it stands
            again = _time_again(state, trial, run_dir, "not faster end to end")
            if again is not None:
                before, after = state.walls[state.best_dir][0], state.walls[run_dir][0]  # pooled
                trial.reason += (f"; {_again_text(again)}; pooled {before.median_ms:.3f} -> "
                                 f"{after.median_ms:.3f} ms")
        if after.median_ms * cfg.min_speedup > before.median_ms:
            trial.outcome = "not_faster"
            trial.reason += f" ({cfg.wall_iters} iterations each); {kernels}"
        else:
            state.keep(trial, prof, run_dir)
            trial.reason += f"; {kernels}"
    elif cmp.speedup is None or cmp.speedup < cfg.min_speedup:
        trial.outcome, trial.reason = "not_faster", kernels
    elif cfg.wall_iters > 0 and _slower_end_to_end(state, trial, run_dir, cfg):
        trial.reason += f"; {kernels} ({cmp.speedup:.2f}x)"
        _graphs_first(state, trial.transformation)
    else:
        state.keep(trial, prof, run_dir)


WALL_VETO = 1.03  # a plan faster on the GPU is refused when its step is this much slower end to end


def _again_text(again: tuple[WallTime, WallTime]) -> str:
    return f"again, the plan first: {again[0].median_ms:.3f} -> {again[1].median_ms:.3f} ms"


def _time_again(state: LoopState, trial: Trial, run_dir: Path, why: str) -> tuple[WallTime, WallTime] | None:
    """Time the best so far and ``run_dir``'s plan once more, in fresh processes and the plan first; pool
    each with its first figures (the trial's medians and the final comparison read the pooled ones).
    Returns the second pair (best, plan), None when that timing failed (the first pair decides)."""
    from profiler_core.optimize.walltime import WallTime

    assert state.best_dir is not None
    state.note(state.tried, f"{why}: timing both again in fresh processes, the plan first")
    try:
        after2 = state.wall_again(run_dir)
        before2 = state.wall_again(state.best_dir)
    except ProfilerError as err:
        state.result.notes.append(f"{trial.transformation}: second end-to-end timing failed ({err}); the first "
                                  "pair decides")
        return None
    for run, again in ((state.best_dir, before2), (run_dir, after2)):
        first, seconds = state.walls[run]
        state.walls[run] = (WallTime(first.iterations_ms + again.iterations_ms), seconds)
    trial.best_wall_ms, trial.wall_ms = state.walls[state.best_dir][0].median_ms, state.walls[run_dir][0].median_ms
    return before2, after2


def _clearly_slower(before: WallTime, after: WallTime) -> bool:
    """The plan's median over ``WALL_VETO`` times the best's, and its p10 over the best's median."""
    return after.median_ms > WALL_VETO * before.median_ms and after.quantile_ms(0.1) > before.median_ms


def _slower_end_to_end(state: LoopState, trial: Trial, run_dir: Path, cfg: OptimizeConfig) -> bool:
    """Whether a plan faster on kernel time makes the step clearly slower end to end (``_clearly_slower``):
    then it is not kept. A host-bound step pays for each added launch (a bf16 cast) however short the
    kernels get.

    A host-bound step's wall time also moves between processes (seen on an H200: one GPT-2 step
    4.41 ms in one process, 5.61 ms in the next, each tight within itself), so a refusal that goes
    against the kernel time is timed again, both sides in fresh processes and in the other order,
    and stands only if that pair says so too.
    """
    assert state.best_dir is not None
    state.note(state.tried, f"timing {cfg.wall_iters} end-to-end iterations of the best so far and of this plan")
    try:
        before, after = state.wall_of(state.best_dir)[0], state.wall_of(run_dir)[0]
    except ProfilerError as err:  # kernel time decided before the wall times existed: keep deciding on it
        state.result.notes.append(f"{trial.transformation}: end-to-end check skipped: {err}")
        return False
    trial.best_wall_ms, trial.wall_ms = before.median_ms, after.median_ms
    if not _clearly_slower(before, after):
        return False
    first = f"median {before.median_ms:.3f} -> {after.median_ms:.3f} ms"
    again = _time_again(state, trial, run_dir, "slower end to end although faster on the GPU")
    second = "" if again is None else f"; {_again_text(again)}"
    if again is not None and not _clearly_slower(*again):
        state.result.notes.append(
            f"{trial.transformation}: the end-to-end timings disagree between process pairs ({first}{second}): the "
            "step's wall time moves between processes more than this plan moves it, so kernel time decides")
        return False
    trial.outcome = "not_faster"
    trial.reason = (f"faster on the GPU but slower end to end: {first} ({cfg.wall_iters} iterations each){second}; "
                    "the step is bound by the host's launches, which a graph pass removes first")
    return True


def _graphs_first(state: LoopState, name: str) -> None:
    """After a pass lost end to end to the host: try the graph pass next (its suggestions bring the
    refused pass back on top of the graphs)."""
    graphs = "whole_step_cuda_graphs" if state.result.training else "cuda_graphs"  # of GRAPH_PASSES
    if graphs in state.kept or name == graphs or applicability_after_kept(state, graphs) is not None:
        return
    state.suggested.insert(0, Candidate(graphs, f"host_bound:{name}"))

