"""``oprof apply-pass`` (apply, validate, write plan + optimized workload) and ``oprof passes``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from profiler_core import api
from profiler_core.cli import command, emit_json, out_console
from profiler_core.compile_mode import TORCH_COMPILE_MODES
from profiler_core.errors import PassError, ValidationFailedError
from profiler_core.passes.plan import OptimizationPlan, PassRecord, PassStatus, PlanStatus


def _check_device(device: str) -> str:
    if device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        return device
    raise PassError(f"unknown device '{device}'; use cpu, cuda or cuda:N")


def _ops(delta: dict[str, int], sign: str) -> list[str]:
    ordered = sorted(delta.items(), key=lambda kv: -kv[1])
    return [f"{sign}{op}" + (f" x{n}" if n > 1 else "") for op, n in ordered]


def summarize(record: PassRecord) -> str:
    """One line saying what a pass changed, or why it did not apply."""
    if record.status is not PassStatus.APPLIED:
        return record.reason
    parts: list[str] = []
    changed = record.ops_removed or record.ops_added or record.nodes_before != record.nodes_after
    if record.nodes_before is not None and record.nodes_after is not None and changed:
        parts.append(f"{record.nodes_before} -> {record.nodes_after} ops")
    changes = _ops(record.ops_removed, "-") + _ops(record.ops_added, "+")
    if changes:
        parts.append(", ".join(changes[:6]) + (" ..." if len(changes) > 6 else ""))
    scalars = [f"{k}={v}" for k, v in record.details.items()
               if isinstance(v, int | float | str) and not isinstance(v, bool) and len(str(v)) < 40]
    parts.extend(scalars[:3])
    return "; ".join(parts) or "applied"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _render(plan: OptimizationPlan) -> None:
    table = Table(title=f"{Path(plan.workload).name} on {plan.device}: compile mode {plan.compile_mode}")
    table.add_column("pass")
    table.add_column("level")
    table.add_column("status")
    table.add_column("what changed / why not", overflow="fold")
    styles = {PassStatus.APPLIED: "green", PassStatus.NOT_APPLIED: "yellow", PassStatus.PENDING: "cyan"}
    for record in plan.passes:
        level = f"{record.level.number} {record.level.value}" + (" (structural)" if record.structural else "")
        status = f"[{styles[record.status]}]{record.status.value}[/]"
        table.add_row(record.name, level, status, summarize(record))
    out_console.print(table)
    v = plan.validation
    if v is not None and v.verdict:
        style = "green" if v.passed else "bold red"
        out_console.print(f"[{style}]{escape(v.verdict)}[/]", soft_wrap=True)
        out_console.print(f"  rule: {escape(v.rule)}", soft_wrap=True)
        for line in v.notes:
            out_console.print(f"  {escape(line)}", soft_wrap=True)
    elif v is not None:
        verdict = "[green]passed[/]" if v.passed else "[bold red]FAILED[/]"
        tol = next((o.tolerance for o in v.outputs if o.tolerance is not None), None)
        tol_text = f", rtol {tol.rtol:g} atol {tol.atol:g}" if tol is not None else ""
        out_console.print(f"validation {verdict}: max abs err {_num(v.max_abs_err)}, max rel err "
                          f"{_num(v.max_rel_err)} ({v.compute_precision} tolerance{tol_text})"
                          + (f"; furthest apart: {v.worst}" if v.worst else ""), soft_wrap=True)
        for line in v.notes:
            out_console.print(f"  {line}", soft_wrap=True)
    for kind, path in plan.artifacts.items():
        out_console.print(f"wrote {kind}: {path}", soft_wrap=True)


@command("apply-pass")
def apply_pass(
    workload: Annotated[Path, typer.Argument(
        help="Workload .py file defining get_model_and_inputs(device).")],
    passes: Annotated[list[str] | None, typer.Option(
        "--pass", "-p", help="A pass to apply (repeat for several; see 'oprof passes').")] = None,
    from_findings: Annotated[Path | None, typer.Option(
        "--from-findings", help="findings.json: apply the transformation each finding names.")] = None,
    device: Annotated[str, typer.Option("--device", help="cuda, cuda:N or cpu.")] = "cuda",
    out: Annotated[Path | None, typer.Option(
        "--out", help="Directory for plan.json and workload_optimized.py "
                      "[default: oprof-runs/<name>-optimized-<time>].")
    ] = None,
    compile_mode: Annotated[str | None, typer.Option(
        "--compile-mode", help=f"torch.compile mode: {', '.join(TORCH_COMPILE_MODES)}.")] = None,
    compiler: Annotated[str, typer.Option(
        "--compiler", help="inductor, or eager: Level-1 rewrites only, no Inductor (a fast check).")
    ] = "inductor",
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON on stdout.")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help="Seconds the workload may run in its own process (default "
                          "$OPROF_WORKLOAD_TIMEOUT_S, else 1800).")] = None,
    memory_limit_gb: Annotated[float | None, typer.Option(
        "--memory-limit-gb", help="Address-space cap of the workload's process in GiB, 0 for none (default "
                                  "$OPROF_WORKLOAD_MEMORY_GB, else the machine's RAM on cpu, none on cuda).")
    ] = None,
) -> None:
    """Apply graph passes to a workload, validate its outputs, and write the plan and optimized workload.

    The workload runs in a child process, bounded by --timeout and --memory-limit-gb.
    """
    from profiler_core.rundir.create import DEFAULT_RUNS_DIR, default_run_dir
    from profiler_core.workload_process import ChildLimits

    out_dir = out if out is not None else default_run_dir(workload, DEFAULT_RUNS_DIR, kind="optimized")
    device = _check_device(device)
    limits = ChildLimits.for_device(device, timeout_s=timeout, memory_gb=memory_limit_gb)
    plan = api.apply_passes(
        workload, list(passes or []), device=device, findings=from_findings,
        out_dir=out_dir, compile_mode=compile_mode, compiler=compiler, raise_on_failure=False, limits=limits,
    )
    if as_json:
        emit_json(plan)
    else:
        _render(plan)
    if plan.status is PlanStatus.REJECTED and plan.validation is not None:
        v = plan.validation
        said = v.verdict or (f"rejected (max abs err {_num(v.max_abs_err)}, max rel err {_num(v.max_rel_err)}, "
                             f"{v.compute_precision} tolerance): {v.reason}")
        raise ValidationFailedError(
            f"validation failed, plan {said}; apply the passes one at a time to find the one "
            "that changes the numerics")


def _spec_row(spec: Any) -> dict[str, Any]:
    return {
        "name": spec.name, "level": spec.level.value, "level_number": spec.level.number,
        "symptom": spec.symptom, "description": spec.description, "structural": spec.structural,
        "aliases": list(spec.aliases), "source": spec.source,
    }


@command("passes")
def passes_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """List the registered passes with their level and the profile symptom each addresses."""
    specs = api.list_passes()
    if as_json:
        emit_json([_spec_row(s) for s in specs])
        return
    table = Table(title=f"{len(specs)} passes")
    table.add_column("pass")
    table.add_column("level")
    table.add_column("symptom it addresses", overflow="fold")
    table.add_column("what it does", overflow="fold")
    for spec in specs:
        level = f"{spec.level.number} {spec.level.value}" + (" (structural)" if spec.structural else "")
        table.add_row(spec.name, level, spec.symptom, spec.description)
    out_console.print(table)
