"""From a workload file to a validated optimization plan (and the optimized workload that applies it).

    plan = apply_pass_plan("workload.py", ["qkv_fusion", "sdpa"], device="cpu", out_dir="opt")

1. resolve the pass names (and the findings' transformations) before loading anything;
2. load the workload (profiler_core.workload), run its step once on the original model: the
   baseline outputs;
3. apply the passes to a copy (manager.apply_passes), run the same step on the same inputs
   (three times under CUDA graphs, so a replayed graph is what gets checked);
4. validate outputs under the plan's compute precision; a mismatch rejects the plan, with
   the numbers, and raises ValidationFailedError (unless ``raise_on_failure=False``);
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
from profiler_core.passes.validation import DtypePolicy, snapshot_outputs, validate_outputs
from profiler_core.passes.wrapper import write_optimized_workload
from profiler_core.workload import load_workload

PLAN_FILE = "plan.json"
WRAPPER_FILE = "workload_optimized.py"
CUDA_GRAPH_RUNS = 3  # warm-up, record, replay: check the replayed graph's outputs


def _baseline(step: Step, model: Any, inputs: tuple[Any, ...], path: Path) -> Any:
    torch.manual_seed(0)  # the same RNG state for both models (dropout in train mode still differs)
    try:
        return snapshot_outputs(step(model, inputs))
    except ProfilerError:
        raise
    except Exception as err:
        raise WorkloadError(
            f"{path}: the step raised {type(err).__name__} on the original model: {err}") from err


def _candidate(step: Step, model: Any, inputs: tuple[Any, ...]) -> Any:
    torch.manual_seed(0)
    return snapshot_outputs(run_transformed(model, inputs, step))


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
                               compiler=compiler, warmup=False)
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
    baseline = _baseline(workload.step, workload.model, workload.inputs, workload.path)
    model, record = apply_passes(
        workload.model, workload.inputs, pass_names, device=device, findings=found,
        compile_mode=compile_mode, step=workload.step, compiler=compiler,
    )
    runs = CUDA_GRAPH_RUNS if record.inductor_config.get("triton.cudagraphs") else 1
    for _ in range(runs):
        candidate = _candidate(workload.step, model, workload.inputs)
    result = validate_outputs(baseline, candidate, dtype_policy=DtypePolicy(record.compute_precision))
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
