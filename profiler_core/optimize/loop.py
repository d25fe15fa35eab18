"""The closed loop without an LLM: capture, attribute, diagnose, transform, validate, re-measure, compare.

    baseline capture -> profile -> findings (structural first, then by their bound on the gain)
      while the budget lasts, take the first licensed pass not tried yet:
        plan = accepted passes + this one -> apply + validate numerics (rejected: say why)
        capture the plan's workload_optimized.py -> profile -> compare with the best so far
        keep the pass only when validation passed and the comparable capture is faster (in profiled
        kernel time; in end-to-end wall time when the licensing finding is about the timeline:
        a CUDA graph removes launch gaps, not kernels);
        a kept pass makes its capture the best, and its findings (re-diagnosed) the next candidates
    -> run dir: baseline/, trial-N-<pass>/ (plan, wrapper, capture; findings.json when kept), findings.json,
       comparison.json, report.html, walltime.json, optimize.json

The same function backs ``oprof optimize``, the MCP server and the Claude Code plugin.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from profiler_core.analysis.findings import in_priority_order
from profiler_core.atomic_write import write_text_atomic
from profiler_core.capture.config import CaptureConfig, CompileMode
from profiler_core.errors import CaptureCancelledError, PassError, ProfilerError
from profiler_core.optimize import walltime
from profiler_core.optimize.walltime import WallTime
from profiler_core.rundir import FINDINGS_NAME, PROFILE_NAME
from profiler_core.schema import Profile, read_profile

if TYPE_CHECKING:
    from profiler_core.capture.pipeline import ProgressFn
    from profiler_core.passes.policy import ValidationPolicy


@dataclass(frozen=True)
class OptimizeConfig:
    """Settings of one loop; ``capture`` is used for every capture (baseline and trials), on ``device``."""

    out_dir: Path | None = None
    baseline_run: Path | None = None  # reuse this capture directory as the baseline (no new capture)
    budget: int = 4  # passes tried at most (a transformation no pass implements costs nothing)
    device: str = "cuda"  # for captures, passes and wall times alike (it replaces capture.device)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    min_speedup: float = 1.01  # a pass must make profiled kernel time at least 1% faster
    wall_iters: int = 30  # end-to-end timing (CUDA events); 0 skips it
    wall_warmup: int = 5
    validation: ValidationPolicy | None = None  # how every trial's outputs are judged (None: DEFAULT_POLICY)


class Trial(BaseModel):
    """One pass tried on top of the passes already kept."""

    model_config = ConfigDict(extra="forbid")
    transformation: str
    finding: str = ""  # the rule whose finding licensed it
    passes: list[str]
    outcome: Literal["kept", "rejected_validation", "not_applied", "not_faster", "not_comparable",
                     "no_pass", "failed"]
    reason: str = ""
    run_dir: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    kernel_ns: int | None = None
    speedup_vs_best: float | None = None
    wall_s: float | None = None  # what the trial cost: apply, validate, capture (seconds)
    # what decided "faster": profiled kernel time, or (for a finding about the timeline, such as
    # host-bound steps that CUDA graphs address) the end-to-end median of the best so far and of this plan
    judged_on: Literal["kernel_time", "wall_time"] = "kernel_time"
    best_wall_ms: float | None = None
    wall_ms: float | None = None
    # the plan's verdict (passes.verdict.VerdictRecord): reference, rule, the line, per-output numbers
    validation: dict[str, Any] | None = None


class OptimizeResult(BaseModel):
    """optimize.json: what the loop tried, what it kept, and the before/after figures."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    workload: str
    created_at: str
    run_dir: str
    kept_passes: list[str] = Field(default_factory=list)
    trials: list[Trial] = Field(default_factory=list)
    baseline_kernel_ns: int = 0
    optimized_kernel_ns: int = 0
    kernel_speedup: float = 1.0
    baseline_attributed_pct: float = 0.0
    optimized_attributed_pct: float = 0.0
    wall_time: dict[str, dict[str, float | int]] = Field(default_factory=dict)  # "baseline"/"optimized"
    wall_speedup: float | None = None
    validation: dict[str, float | None] = Field(default_factory=dict)
    final_run_dir: str | None = None
    validation_failures: int = 0
    notes: list[str] = Field(default_factory=list)
    training: bool = False  # the workload's model is in train mode: inference-only passes are not tried
    baseline_capture_s: float | None = None  # the loop's own cost, beside ...
    plain_run_s: float | None = None  # ... one plain run of the workload (the baseline's wall-time process)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _capture_profile(workload: Path, run_dir: Path, base: CaptureConfig, progress: ProgressFn | None,
                     cancel: threading.Event | None) -> Profile:
    from profiler_core.capture.pipeline import capture

    _check_cancel(cancel)
    capture(workload, dataclasses.replace(base, out_dir=run_dir, attribute=True), progress=progress, cancel=cancel)
    return read_profile(run_dir / PROFILE_NAME)


def _check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise CaptureCancelledError("the optimization loop was cancelled")


def plan_compile(mode: CompileMode) -> tuple[str | None, str]:
    """(compile_mode, compiler) for apply_pass_plan so a plan's model is compiled as the captures are.

    Eager captures leave the model uncompiled, so the plan runs its graph rewrites without
    Inductor; apply_pass_plan knows no "eager" compile mode.
    """
    if mode is CompileMode.EAGER:
        return None, "eager"
    return mode.value, "inductor"


def _baseline_profile(run_dir: Path) -> Profile:
    """The profile of an existing capture directory (attributed now if it has none)."""
    from profiler_core.attribution import attribute_run
    from profiler_core.schema import write_profile

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


def optimize(workload: str | Path, config: OptimizeConfig | None = None, *, progress: ProgressFn | None = None,
             cancel: threading.Event | None = None) -> OptimizeResult:
    """Run the loop on ``workload``; every artifact lands in the run directory (see module docstring).

    Each capture keeps its Inductor cache (in a temporary directory, removed at the end) so the
    end-to-end timing of the baseline and of the kept plan loads the kernels their captures
    compiled instead of compiling them cold again.
    """
    caches = Path(tempfile.mkdtemp(prefix="oprof-optimize-caches-"))
    try:
        return _optimize(workload, config, progress=progress, cancel=cancel, caches=caches)
    finally:
        shutil.rmtree(caches, ignore_errors=True)


def _optimize(workload: str | Path, config: OptimizeConfig | None, *, progress: ProgressFn | None,
              cancel: threading.Event | None, caches: Path) -> OptimizeResult:
    from profiler_core.analysis import compare, diagnose
    from profiler_core.passes import apply_pass_plan, get_pass
    from profiler_core.passes.verdict import verdict_record
    from profiler_core.report import render_html
    from profiler_core.report.end_to_end import EndToEnd
    from profiler_core.rundir.create import DEFAULT_RUNS_DIR

    config = config or OptimizeConfig()
    cap = dataclasses.replace(config.capture, device=config.device)
    compile_mode, compiler = plan_compile(cap.compile_mode)
    path = Path(workload).resolve()
    out = Path(config.out_dir or DEFAULT_RUNS_DIR / f"{path.stem}-optimize-{_now()}")
    result = OptimizeResult(workload=str(path), created_at=_now(), run_dir=str(out))

    def note(step: int, message: str) -> None:
        if progress is not None:
            progress("optimize", step, config.budget + 2, message)

    baseline_dir = Path(config.baseline_run) if config.baseline_run else out / "baseline"
    if config.baseline_run:
        note(0, f"reusing the baseline capture {baseline_dir}")
        baseline = _baseline_profile(baseline_dir)
    else:
        note(0, "capturing the baseline")
        started = time.perf_counter()
        baseline = _capture_profile(path, baseline_dir,
                                    dataclasses.replace(cap, inductor_cache_dir=caches / "baseline"), progress, cancel)
        result.baseline_capture_s = round(time.perf_counter() - started, 3)
    result.training = model_trains(baseline_dir)
    out.mkdir(parents=True, exist_ok=True)
    findings = diagnose(baseline)
    write_text_atomic(out / FINDINGS_NAME, findings.model_dump_json(indent=1))
    result.baseline_kernel_ns = result.optimized_kernel_ns = baseline.coverage.duration_ns
    result.baseline_attributed_pct = result.optimized_attributed_pct = baseline.coverage.attributed_time_pct
    kept: list[str] = []
    best, best_dir, tried = baseline, baseline_dir, 0

    def tell(trial: Trial) -> None:  # a tried pass's outcome, as a progress line
        if trial.outcome != "no_pass":
            why = f" ({trial.reason[:160]})" if trial.reason else ""
            note(tried, f"{trial.transformation}: {trial.outcome}{why}")

    considered: set[str] = set()
    current = findings  # the findings of the best capture so far: re-diagnosed after each kept pass

    def next_candidate() -> tuple[str, str] | None:
        return next(((t, rule) for t, rule in candidate_passes(current) if t not in considered), None)

    # end-to-end timings by run directory, each taken once: (figures, seconds the timing run took)
    walls: dict[Path, tuple[WallTime, float]] = {}

    def wall_of(run: Path) -> tuple[WallTime, float]:
        if run not in walls:
            workload, cache = (path, caches / "baseline") if run == baseline_dir else (
                run / "workload_optimized.py", caches / run.name)
            started = time.perf_counter()
            figures = walltime.measure(workload, iters=config.wall_iters, warmup=config.wall_warmup,
                                       compile_mode=cap.compile_mode.value, device=config.device,
                                       python=cap.python,
                                       inductor_cache=cache)
            walls[run] = (figures, time.perf_counter() - started)
        return walls[run]

    def run_trial(i: int, transformation: str, rule: str) -> Trial:
        nonlocal tried
        trial = Trial(transformation=transformation, finding=rule, passes=[*kept, transformation], outcome="failed")
        result.trials.append(trial)
        try:
            spec = get_pass(transformation)
        except PassError:
            trial.outcome, trial.reason = "no_pass", f"no graph pass implements '{transformation}' (finding {rule})"
            return trial
        if spec.inference_only and result.training:
            trial.outcome = "not_applied"
            trial.reason = f"'{spec.name}' is for inference and the workload trains (model in train mode): not tried"
            return trial
        tried += 1
        note(tried, f"trying {transformation} (finding {rule})")
        trial_dir = out / f"trial-{i}-{transformation}"
        trial.run_dir = str(trial_dir)
        try:
            plan = apply_pass_plan(path, trial.passes, device=config.device, out_dir=trial_dir,
                                   compile_mode=compile_mode, compiler=compiler, raise_on_failure=False,
                                   policy=config.validation)
        except ProfilerError as err:  # e.g. a pass that cannot run here: the other trials still count
            trial.outcome, trial.reason = "failed", f"{type(err).__name__}: {err}"
            return trial
        if plan.validation is not None:
            trial.max_abs_err, trial.max_rel_err = plan.validation.max_abs_err, plan.validation.max_rel_err
            trial.validation = verdict_record(plan.validation).model_dump()
        if plan.status.value != "validated":
            trial.outcome = "rejected_validation"
            v = plan.validation
            trial.reason = (v.verdict or f"{v.reason} (max abs err {v.max_abs_err}, max rel err {v.max_rel_err})"
                            if v is not None else "validation did not run")
            result.validation_failures += 1
            return trial
        if spec.name not in plan.applied:
            trial.outcome = "not_applied"
            trial.reason = plan.record(spec.name).reason
            return trial
        wrapper = Path(plan.artifacts.get("workload", trial_dir / "workload_optimized.py"))
        try:
            prof = _capture_profile(wrapper, trial_dir / "capture",
                                    dataclasses.replace(cap, inductor_cache_dir=caches / trial_dir.name),
                                    progress, cancel)
        except CaptureCancelledError:
            raise
        except Exception as err:  # a failed trial must not lose the loop's other results
            trial.outcome, trial.reason = "failed", f"{type(err).__name__}: {err}"
            return trial
        cmp = compare(best, prof)
        trial.kernel_ns = prof.coverage.duration_ns
        trial.speedup_vs_best = cmp.speedup
        if not cmp.comparability.comparable:
            trial.outcome = "not_comparable"
            trial.reason = "; ".join(cmp.comparability.warnings) or "captures are not comparable"
        elif judged_on_timeline(current, rule) and config.wall_iters > 0:
            trial.judged_on = "wall_time"
            note(tried, f"timing {config.wall_iters} end-to-end iterations of the best so far and of this plan")
            try:
                before, after = wall_of(best_dir)[0], wall_of(trial_dir)[0]
            except ProfilerError as err:
                trial.outcome, trial.reason = "failed", f"end-to-end timing failed: {err}"
                return trial
            trial.best_wall_ms, trial.wall_ms = before.median_ms, after.median_ms
            kernels = f"profiled kernel time {best.coverage.duration_ns} -> {prof.coverage.duration_ns} ns"
            if after.median_ms * config.min_speedup > before.median_ms:
                trial.outcome = "not_faster"
                trial.reason = (f"end-to-end median {before.median_ms:.3f} -> {after.median_ms:.3f} ms "
                                f"({config.wall_iters} iterations each); {kernels}")
            else:
                keep(trial, prof, trial_dir)
                trial.reason = f"end-to-end median {before.median_ms:.3f} -> {after.median_ms:.3f} ms; {kernels}"
        elif cmp.speedup is None or cmp.speedup < config.min_speedup:
            trial.outcome = "not_faster"
            trial.reason = f"profiled kernel time {best.coverage.duration_ns} -> {prof.coverage.duration_ns} ns"
        else:
            keep(trial, prof, trial_dir)
        return trial

    def keep(trial: Trial, prof: Profile, trial_dir: Path) -> None:
        nonlocal kept, best, best_dir
        trial.outcome = "kept"
        kept = trial.passes
        best, best_dir = prof, trial_dir
        result.validation = {"max_abs_err": trial.max_abs_err, "max_rel_err": trial.max_rel_err}

    i = 0
    while tried < config.budget and (candidate := next_candidate()) is not None:
        _check_cancel(cancel)
        i += 1
        considered.add(candidate[0])
        started = time.perf_counter()
        trial = run_trial(i, *candidate)
        if trial.run_dir is not None:
            trial.wall_s = round(time.perf_counter() - started, 3)
        tell(trial)
        # after every trial: a loop killed in the next one keeps what it had learned
        write_text_atomic(out / "optimize.json", result.model_dump_json(indent=1))
        if trial.outcome == "failed" and "gives different results on two runs" in trial.reason:
            result.notes.append("no pass judged: " + trial.reason)
            break  # the workload itself is not reproducible: every other trial would fail the same way
        if trial.outcome == "kept":
            # the kept pass changed what there is to fix: a symptom it removed licenses nothing now,
            # and one it exposed (a bf16 plan's per-call weight casts) licenses its own pass
            current = diagnose(best)
            write_text_atomic(best_dir / FINDINGS_NAME, current.model_dump_json(indent=1))
    result.kept_passes = kept
    result.final_run_dir = str(best_dir)
    result.optimized_kernel_ns = best.coverage.duration_ns
    result.optimized_attributed_pct = best.coverage.attributed_time_pct
    note(config.budget + 1, "comparing and reporting")
    comparison = compare(baseline, best, base_findings=findings, base_label="baseline", opt_label="optimized")
    # compare's figure, so optimize.json and comparison.json agree (it scales by iteration counts)
    result.kernel_speedup = comparison.speedup if comparison.speedup is not None else 1.0
    write_text_atomic(out / "comparison.json", comparison.model_dump_json(indent=1))
    def write_report() -> None:
        wall = {side: result.wall_time.get(side, {}).get("median_ms") for side in ("baseline", "optimized")}
        end_to_end = EndToEnd(
            base_wall_ms=float(wall["baseline"]) if wall["baseline"] is not None else None,
            opt_wall_ms=float(wall["optimized"]) if wall["optimized"] is not None else None,
            max_abs_err=result.validation.get("max_abs_err"), max_rel_err=result.validation.get("max_rel_err"))
        write_text_atomic(out / "report.html", render_html(best, findings=findings, comparison=comparison,
                                                           baseline=baseline, title=f"{path.name}: optimization",
                                                           end_to_end=end_to_end, trials=result.trials))

    write_report()
    # written now and again after the wall times: a slow or killed timing run loses nothing above
    write_text_atomic(out / "optimize.json", result.model_dump_json(indent=1))
    if config.wall_iters > 0:
        _check_cancel(cancel)
        note(config.budget + 1, f"timing {config.wall_iters} end-to-end iterations, baseline and optimized")
        try:
            _wall_times(baseline_dir, best_dir, result, wall_of)
        except ProfilerError as err:  # the end-to-end timing is extra: it must not lose the loop's results
            result.notes.append(f"wall time not measured: {err}")
        write_report()  # again, with the wall times beside kernel time
    write_text_atomic(out / "optimize.json", result.model_dump_json(indent=1))
    return result


def _wall_times(baseline_dir: Path, best_dir: Path, result: OptimizeResult,
                wall_of: Callable[[Path], tuple[WallTime, float]]) -> None:
    """The baseline's and the kept plan's end-to-end times (a timing a trial already took is reused)."""
    base, seconds = wall_of(baseline_dir)
    result.wall_time["baseline"] = base.as_dict()
    result.plain_run_s = round(seconds, 3)
    if best_dir != baseline_dir and (best_dir / "workload_optimized.py").exists():
        opt, _ = wall_of(best_dir)
        result.wall_time["optimized"] = opt.as_dict()
        result.wall_speedup = base.median_ms / opt.median_ms if opt.median_ms else None
    write_text_atomic(Path(result.run_dir) / "walltime.json", json.dumps(result.wall_time, indent=1))
