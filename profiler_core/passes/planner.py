"""From a workload file to a validated optimization plan (and the optimized workload that applies it).

    plan = apply_pass_plan("workload.py", ["qkv_fusion", "sdpa"], device="cpu", out_dir="opt")

1. resolve the pass names (and the findings' transformations) before loading anything;
2. load the workload (profiler_core.workload), run its step once on the original model: the
   baseline; run it again with another seed, and refuse a workload whose results moved (it
   draws random numbers: no pass could be judged). A model in train mode: baseline, twin
   and candidate are each a fresh build (a new import and call of get_model_and_inputs,
   builds.py), so each step's optimizer, wherever the workload keeps it, is that build's own;
   the builds must start from identical state, or the workload is refused by name;
3. apply the passes (manager.apply_passes_to_step): to a copy of an inference model, to the
   candidate build of a training one; run the plan's step on the same inputs (three times
   under CUDA graphs, so a replayed graph is what gets checked; a training step's state is
   put back before each run, so every run starts where the baseline did);
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
from profiler_core.passes.builds import check_same_state, fresh_build, initial_state
from profiler_core.passes.findings import read_findings
from profiler_core.passes.manager import Step, apply_passes_to_step, resolve_requests, run_transformed
from profiler_core.passes.plan import OptimizationPlan, PlanStatus, write_plan
from profiler_core.passes.policy import DEFAULT_POLICY, ValidationPolicy
from profiler_core.passes.reference import Reference, float64_reference
from profiler_core.passes.step_run import (
    StateSnapshot,
    StepRecord,
    base_module,
    optimizers_of,
    parameter_versions,
    run_step,
)
from profiler_core.passes.step_validation import check_reproducible, check_step_compares_something
from profiler_core.passes.verdict import judge_steps
from profiler_core.passes.wrapper import write_optimized_workload
from profiler_core.rundir.layout import OPTIMIZED_WORKLOAD_NAME, PLAN_NAME
from profiler_core.workload import Workload, default_step, load_workload

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


def _check_own_optimizer(record: StepRecord, others: Sequence[Workload], versions: list[dict[str, int]],
                         path: Path) -> None:
    """WorkloadError when a build's step updated another build's parameters (state outside the file)."""
    moved = any(parameter_versions(o.model) != v for o, v in zip(others, versions, strict=True))
    if record.foreign_optimizers or moved:
        what = f"{record.foreign_optimizers[0]}.step()" if record.foreign_optimizers else "an update"
        raise WorkloadError(
            f"{path}: the step runs {what} on an optimizer that does not hold the parameters of the model it "
            "was built with, so each build's step would update another build's model; create the optimizer "
            "in get_model_and_inputs (among the inputs, on the model, in a global or closure of the workload "
            "file), not in a module the workload imports")


def judged_baseline(step: Step, model: Any, inputs: tuple[Any, ...], path: Path, *,
                    check_reproducible_again: bool = True) -> StepRecord:
    """The baseline step of an inference workload, once it is reproducible and gives something to compare.

    ``check_reproducible_again=False``: the caller has judged this workload already (the optimize
    loop does so once, before its first trial), so the second run with another seed is skipped.
    """
    first = _baseline(step, model, inputs, path)
    check_step_compares_something(first, str(path))
    if not check_reproducible_again:
        return first
    second = _baseline(step, model, inputs, path, seed=1)
    check_reproducible(first, second, str(path))
    return first


def experts_per_token(model: Any) -> int | None:
    """How many experts an MoE model routes each token to, where its config says (transformers' names)."""
    config = getattr(base_module(model), "config", None)
    for name in ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def judged_training_baseline(first: Workload, path: Path, device: str) -> tuple[StepRecord, dict[str, Any]]:
    """The baseline step of a training build, and its state before the step (for later builds to match).

    A twin build, which must start from the identical state, runs the step again with another
    seed: the two must agree, or the workload draws random numbers (dropout left on).
    """
    state = initial_state(first)
    twin = fresh_build(path, device)
    check_same_state(state, initial_state(twin), path)
    versions = [parameter_versions(twin.model)]
    record = _baseline(first.step, first.model, first.inputs, path)
    _check_own_optimizer(record, [twin], versions, path)
    check_step_compares_something(record, str(path))
    versions = [parameter_versions(first.model)]
    second = _baseline(twin.step, twin.model, twin.inputs, path, seed=1)
    _check_own_optimizer(second, [first], versions, path)
    check_reproducible(record, second, str(path))
    return record, state


def judged_original(workload: Workload, device: str, *,
                    check_reproducible_again: bool = True) -> tuple[StepRecord, dict[str, Any] | None]:
    """The original step, judged: a training workload from two fresh builds (with the state both
    start from), an inference one on the workload itself (state None)."""
    if bool(getattr(base_module(workload.model), "training", False)):
        return judged_training_baseline(workload, workload.path, device)
    return judged_baseline(workload.step, workload.model, workload.inputs, workload.path,
                           check_reproducible_again=check_reproducible_again), None


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def original_reference(workload: Workload, state: dict[str, Any] | None, device: str) -> Reference:
    """The float64 run of the original step: on the workload itself (inference: the step changes
    nothing), or on a build of its own (training: it must start from the baseline's ``state``)."""
    if state is None:
        return float64_reference(workload.step, workload.model, workload.inputs, device=device)
    ref = fresh_build(workload.path, device)
    check_same_state(state, initial_state(ref), workload.path)
    return float64_reference(ref.step, ref.model, ref.inputs, device=device, in_place=True)


def build_optimized_model(
    model: Any,
    inputs: tuple[Any, ...],
    passes: Iterable[str],
    *,
    device: str,
    compile_mode: str | None = None,
    compiler: str = "inductor",
) -> Any:
    """Apply ``passes`` to ``model`` and return it compiled (lazily; no validation)."""
    return build_optimized_workload(model, inputs, passes, device=device, compile_mode=compile_mode,
                                    compiler=compiler)[0]


def build_optimized_workload(
    model: Any,
    inputs: tuple[Any, ...],
    passes: Iterable[str],
    *,
    step: Step | None = None,
    device: str,
    compile_mode: str | None = None,
    compiler: str = "inductor",
) -> tuple[Any, Step | None]:
    """(model, step) with ``passes`` applied (lazily compiled; no validation): for workload wrappers.

    The step is ``step`` itself (None without one) unless a pass wraps or compiles it.
    """
    compiled, run, _ = apply_passes_to_step(model, inputs, list(passes), device=device,
                                            compile_mode=compile_mode, step=step, compiler=compiler,
                                            warmup=False, copy_model=False)
    return compiled, (step if run is (step or default_step) else run)


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
    policy: ValidationPolicy | None = None,
    baseline_judged: bool = False,
) -> OptimizationPlan:
    """Apply passes to a workload, validate against the baseline, optionally write plan + wrapper.

    ``policy`` (default ``DEFAULT_POLICY``) is how outputs are judged: against a float64 run of
    the original step, per kind of output (policy.py, verdict.py).
    ``baseline_judged``: the workload's step is known to be reproducible (the caller ran
    :func:`judged_baseline` on it once), so the baseline step runs once here, not twice.

    ``compiler="eager"`` runs the Level-1 rewrites without Inductor (Level 2 and 3 then do
    nothing): a fast check of the graph rewrites and their numerics.
    """
    found = read_findings(findings) if isinstance(findings, str | Path) else list(findings or [])
    if not resolve_requests(pass_names, found):
        raise PassError("no pass to apply: name one with --pass (see 'oprof passes'), or give findings "
                        "whose 'transformation' names a pass")
    workload = load_workload(workload_path, device=device)
    baseline, state = judged_original(workload, device, check_reproducible_again=not baseline_judged)
    training = state is not None
    if state is not None:  # each run from its own build, so the optimizer stepping it is its own (builds.py)
        cand = fresh_build(workload.path, device)
        check_same_state(state, initial_state(cand), workload.path)
    else:  # the step changes nothing: the passes work on a copy of the model, the original is the baseline
        cand = workload
    snapshot = StateSnapshot(cand.model, optimizers_of(cand.model)) if training else None
    model, run, record = apply_passes_to_step(
        cand.model, cand.inputs, pass_names, device=device, findings=found,
        compile_mode=compile_mode, step=cand.step, compiler=compiler, copy_model=not training,
    )
    runs = CUDA_GRAPH_RUNS if record.inductor_config.get("triton.cudagraphs") else 1
    for _ in range(runs):
        if snapshot is not None:
            snapshot.restore()  # the warm-up trained the candidate: start again where the baseline did
        candidate = run_step(run, model, cand.inputs, seed=0, call=run_transformed)
    policy = policy or DEFAULT_POLICY
    reference = (original_reference(workload, state if training else None, device) if policy.reference
                 else Reference(None, device, "turned off by the validation policy"))
    result = judge_steps(baseline, candidate, reference, policy, record.compute_precision,
                         router_top_k=experts_per_token(workload.model))
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
            f"{workload.path}: plan {result.verdict}{where}; "
            "apply the passes one at a time to find the one that changes the numerics")
    return plan


def apply_pass_plan_in_child(*, policy: Mapping[str, Any] | None = None, **kwargs: Any) -> OptimizationPlan:
    """``apply_pass_plan`` as profiler_core.workload_process calls it: the policy arrives as its fields."""
    return apply_pass_plan(**kwargs, policy=None if policy is None else ValidationPolicy(**policy))
