"""From a workload file to a validated optimization plan (and the optimized workload that applies it).

    plan = apply_pass_plan("workload.py", ["qkv_fusion", "sdpa"], device="cpu", out_dir="opt")

1. resolve the pass names (and the findings' transformations) before loading anything;
2. load the workload (profiler_core.workload), run its step once on the original model: the
   baseline (for a model in train mode, on a copy of model and inputs together, so its
   optimizer steps the copy: step_run.py); run it again with another seed, and refuse a
   workload whose results moved (it draws random numbers: no pass could be judged);
3. apply the passes to a copy (manager.apply_passes), run the same step on the same inputs
   (three times under CUDA graphs, so a replayed graph is what gets checked; a training
   step's state is put back before each run, so every run starts where the baseline did);
4. validate outputs (and for training, every gradient and updated parameter) under the
   plan's compute precision; a mismatch rejects the plan, with the numbers and the worst
   leaves, and raises ValidationFailedError (unless ``raise_on_failure=False``);
5. with ``out_dir``: write plan.json always, and workload_optimized.py only for a validated plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from profiler_core.errors import PassError, ProfilerError, ValidationFailedError, WorkloadError
from profiler_core.passes.findings import read_findings
from profiler_core.passes.manager import Step, apply_passes, resolve_requests, run_transformed
from profiler_core.passes.plan import OptimizationPlan, PlanStatus, write_plan
from profiler_core.passes.step_run import (
    StateSnapshot,
    StepRecord,
    base_module,
    copy_state,
    find_optimizers,
    parameter_versions,
    run_step,
)
from profiler_core.passes.step_validation import check_reproducible, check_step_compares_something, compare_steps
from profiler_core.passes.validation import DtypePolicy
from profiler_core.passes.wrapper import write_optimized_workload
from profiler_core.rundir.layout import OPTIMIZED_WORKLOAD_NAME, PLAN_NAME
from profiler_core.workload import load_workload

PLAN_FILE = PLAN_NAME
WRAPPER_FILE = OPTIMIZED_WORKLOAD_NAME
CUDA_GRAPH_RUNS = 3  # warm-up, record, replay: check the replayed graph's outputs


def _baseline(step: Step, model: Any, inputs: tuple[Any, ...], path: Path, seed: int = 0) -> StepRecord:
    try:
        return run_step(step, model, inputs, seed=seed)
    except ProfilerError:
        raise
    except Exception as err:
        raise WorkloadError(
            f"{path}: the step raised {type(err).__name__} on the original model: {err}") from err


def _training_state(model: Any, inputs: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    try:
        return copy_state(model, inputs)
    except Exception as err:
        raise WorkloadError(
            f"the model in train mode and its inputs cannot be deep-copied ({type(err).__name__}: {err}); "
            "validation runs baseline and candidate from copies of the same state") from err


def judged_baseline(step: Step, model: Any, inputs: tuple[Any, ...], path: Path) -> StepRecord:
    """The baseline step, once it is known to be reproducible and to give something to compare.

    A model in train mode runs on a copy of (model, inputs), and the original's parameters
    must not move meanwhile: if they do, the step updates them through an optimizer outside
    the inputs, which the copies cannot follow.
    """
    training = bool(getattr(base_module(model), "training", False))
    versions = parameter_versions(model) if training else {}
    run_model, run_inputs = _training_state(model, inputs) if training else (model, inputs)
    snapshot = StateSnapshot(run_model, find_optimizers(run_inputs)) if training else None
    first = _baseline(step, run_model, run_inputs, path)
    if first.foreign_optimizers or (training and parameter_versions(model) != versions):
        what = f"{first.foreign_optimizers[0]}.step()" if first.foreign_optimizers else "an update"
        raise WorkloadError(
            f"{path}: the step runs {what} on an optimizer that is not among the inputs, so it steps the "
            "original model's parameters rather than those of the copy being validated; return the optimizer "
            "with the inputs from get_model_and_inputs (return model, (batch, labels, optimizer)) and take "
            "it from the inputs in step()")
    check_step_compares_something(first, str(path))
    if snapshot is not None:
        snapshot.restore()
    second = _baseline(step, run_model, run_inputs, path, seed=1)
    check_reproducible(first, second, str(path))
    return first


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def build_optimized_model(
    model: Any,
    inputs: tuple[Any, ...],
    passes: Iterable[str],
    *,
    device: str,
    compile_mode: str | None = None,
    compiler: str = "inductor",
) -> Any:
    """Apply ``passes`` to ``model`` and return it compiled (lazily; no validation): for workload wrappers."""
    compiled, _ = apply_passes(model, inputs, list(passes), device=device, compile_mode=compile_mode,
                               compiler=compiler, warmup=False, copy_model=False)
    return compiled


def apply_pass_plan(
    workload_path: str | Path,
    pass_names: Sequence[str] = (),
    *,
    device: str = "cuda",
    findings: str | Path | Sequence[Mapping[str, Any]] | None = None,
    out_dir: str | Path | None = None,
    compile_mode: str | None = None,
    compiler: str = "inductor",
    raise_on_failure: bool = True,
) -> OptimizationPlan:
    """Apply passes to a workload, validate against the baseline, optionally write plan + wrapper.

    ``compiler="eager"`` runs the Level-1 rewrites without Inductor (Level 2 and 3 then do
    nothing): a fast check of the graph rewrites and their numerics.
    """
    found = read_findings(findings) if isinstance(findings, str | Path) else list(findings or [])
    if not resolve_requests(pass_names, found):
        raise PassError("no pass to apply: name one with --pass (see 'oprof passes'), or give findings "
                        "whose 'transformation' names a pass")
    workload = load_workload(workload_path, device=device)
    baseline = judged_baseline(workload.step, workload.model, workload.inputs, workload.path)
    training = baseline.training
    cand_model, cand_inputs = (_training_state(workload.model, workload.inputs) if training
                               else (workload.model, workload.inputs))
    snapshot = StateSnapshot(cand_model, find_optimizers(cand_inputs)) if training else None
    model, record = apply_passes(
        cand_model, cand_inputs, pass_names, device=device, findings=found,
        compile_mode=compile_mode, step=workload.step, compiler=compiler, copy_model=not training,
    )
    runs = CUDA_GRAPH_RUNS if record.inductor_config.get("triton.cudagraphs") else 1
    for _ in range(runs):
        if snapshot is not None:
            snapshot.restore()  # the warm-up trained the copy: start again where the baseline did
        candidate = run_step(workload.step, model, cand_inputs, seed=0, call=run_transformed)
    result = compare_steps(baseline, candidate, DtypePolicy(record.compute_precision))
    plan = OptimizationPlan(
        **record.model_dump(), workload=str(workload.path), device=device,
        status=PlanStatus.VALIDATED if result.passed else PlanStatus.REJECTED,
        validation=result, torch_version=torch.__version__,
    )
    plan_path: Path | None = None
    if out_dir is not None:
        out = Path(out_dir)
        plan_path = out / PLAN_FILE
        artifacts = {"plan": str(plan_path)}
        if result.passed:
            artifacts["workload"] = str(out / WRAPPER_FILE)
        plan = plan.model_copy(update={"artifacts": artifacts})
        if result.passed:
            write_optimized_workload(out / WRAPPER_FILE, plan)
        write_plan(plan_path, plan)
    if not result.passed and raise_on_failure:
        where = f"; the rejected plan is in {plan_path}" if plan_path else ""
        raise ValidationFailedError(
            f"{workload.path}: validation failed, plan rejected (max abs err {_num(result.max_abs_err)}, "
            f"max rel err {_num(result.max_rel_err)}, {result.compute_precision} tolerance): "
            f"{result.reason}{where}; "
            "apply the passes one at a time to find the one that changes the numerics")
    return plan
