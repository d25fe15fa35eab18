"""Pass tools: ``list_passes`` (the registry), ``apply_pass`` (apply, validate, write the result)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_server.arguments import PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.models import (
    ApplyPassResult,
    ListPassesResult,
    PassInfo,
    PassOutcome,
    ValidationSummary,
)
from mcp_server.tools import hints, workload_file
from mcp_server.views import enum_value
from profiler_core import api
from profiler_core.compile_mode import TorchCompileMode
from profiler_core.rundir.create import default_run_dir
from profiler_core.rundir.layout import OPTIMIZED_WORKLOAD_NAME as WRAPPER_FILE
from profiler_core.rundir.layout import PLAN_NAME as PLAN_FILE
from profiler_core.workload_process import ChildLimits


def pass_info(spec: Any) -> PassInfo:
    """A registered pass, as listed to the model."""
    return PassInfo(name=spec.name, level=enum_value(spec.level), symptom=spec.symptom,
                    description=spec.description, structural=spec.structural, aliases=list(spec.aliases),
                    source=spec.source)


def plan_result(plan: Any, plan_file: Path) -> ApplyPassResult:
    """The wire form of an OptimizationPlan."""
    v = plan.validation
    validated = enum_value(plan.status) == "validated"
    workload = plan.artifacts.get("workload")
    return ApplyPassResult(
        workload=plan.workload, status=enum_value(plan.status), plan_file=str(plan_file),
        optimized_workload=workload if validated else None, applied=list(plan.applied),
        passes=[PassOutcome(name=r.name, level=enum_value(r.level), status=enum_value(r.status), reason=r.reason,
                            structural=r.structural, requested_by=list(r.requested_by),
                            nodes_before=r.nodes_before, nodes_after=r.nodes_after,
                            ops_removed=dict(r.ops_removed), ops_added=dict(r.ops_added))
                for r in plan.passes],
        compile_mode=plan.compile_mode, compiler=plan.compiler, compute_precision=plan.compute_precision,
        matmul_precision=plan.matmul_precision, inductor_config=dict(plan.inductor_config),
        graphs_compiled=plan.graphs_compiled, compile_s=plan.compile_s,
        validation=None if v is None else ValidationSummary(
            passed=v.passed, max_abs_err=v.max_abs_err, max_rel_err=v.max_rel_err,
            compute_precision=v.compute_precision, outputs_compared=len(v.outputs), reason=v.reason,
            verdict=v.verdict, reference=v.reference, rule=v.rule),
        notes=list(plan.notes),
        next_step=("capture optimized_workload with the baseline's settings, attribute it, then compare"
                   if validated else
                   "the outputs changed beyond tolerance: apply the passes one at a time to find which"),
    )


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws, jobs = ctx.workspace, ctx.jobs

    @mcp.tool(title="List graph passes", annotations=hints("List graph passes", read_only=True))
    def list_passes() -> ListPassesResult:
        """Every registered graph pass: its level, the profile symptom it addresses, and what it changes."""
        with tool_errors(ws):
            specs = api.list_passes()
            return ListPassesResult(passes=[pass_info(s) for s in specs])

    @mcp.tool(title="Apply graph passes", annotations=hints("Apply graph passes", read_only=False,
                                                            idempotent=False))
    def apply_pass(
        workload: Annotated[str, Field(max_length=PATH_CHARS,
                                       description="The workload .py file (get_model_and_inputs contract).")],
        passes: Annotated[list[Annotated[str, Field(max_length=200)]], Field(
            min_length=1, max_length=32, description="Pass names from list_passes.")],
        findings: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="findings.json from diagnose: the findings that license these passes are handed "
                        "to them as evidence (no other pass is applied).")] = None,
        device: Annotated[Literal["cuda", "cpu"], Field(
            description="Where the workload runs for the baseline and the validation.")] = "cuda",
        compile_mode: Annotated[TorchCompileMode | None, Field(
            description="torch.compile mode; default: the passes decide (cuda_graphs picks reduce-overhead).")
        ] = None,
        compiler: Annotated[Literal["inductor", "eager"], Field(
            description="'eager' checks the graph rewrites and their numerics without Inductor (fast).")
        ] = "inductor",
        out_dir: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Where plan.json and workload_optimized.py go; default a new folder under "
                        "oprof-runs/.")] = None,
    ) -> ApplyPassResult:
        """Apply graph passes to a workload, validate its outputs against the original, write the result.

        Each pass ends APPLIED or NOT APPLIED with its reason. The optimized workload (written
        only when validation passes) follows the same contract, so capture can measure it.
        """
        with tool_errors(ws):
            path = workload_file(ws, workload)
            if device == "cuda":
                busy = [s for s in jobs.snapshots() if s.live]
                if busy:
                    raise ToolError(
                        f"capture {busy[0].job_id} is running on the GPU; applying passes there now would "
                        f"disturb its measurement: wait for it (capture_status('{busy[0].job_id}')), "
                        "or validate with device='cpu'")
            if out_dir:
                out = ws.output_dir(out_dir)
            else:
                out = default_run_dir(path, ctx.runs_dir, kind="optimized")
            for name, kind in ((PLAN_FILE, "plan"), (WRAPPER_FILE, "optimized-workload")):
                ws.output_file(out / name, kind=kind)  # never over a capture's file or a foreign one
            evidence = None
            if findings:
                evidence = api.findings_for_passes(ws.existing_file(findings, what="findings file"), passes)
            # the workload runs in its own process: its exit, hang or memory use cannot reach the server
            limits = ctx.config.workload_limits or ChildLimits.for_device(device)
            plan = api.apply_passes(path, passes, device=device, findings=evidence, out_dir=out,
                                    compile_mode=compile_mode, compiler=compiler, raise_on_failure=False,
                                    limits=limits)
            return plan_result(plan, Path(plan.artifacts.get("plan", out / "plan.json")))
