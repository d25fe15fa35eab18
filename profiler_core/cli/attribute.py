"""``oprof attribute``: build profile.json from a run directory or from explicit files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from profiler_core import api
from profiler_core.attribution.operator_table import slowest
from profiler_core.cli import command, emit_json, err_console, out_console
from profiler_core.profile_io import write_profile
from profiler_core.rundir import PROFILE_NAME, RANKS_JSON
from profiler_core.schema import Profile

if TYPE_CHECKING:  # a multi-rank run's merge (its package imports the analysis layer)
    from profiler_core.distributed.attribute import MultiRankProfile

ELSEWHERE = Path("oprof-runs") / "attribute"  # profiles of captures the user only asked to read


def default_profile_path(run_dir: Path) -> Path:
    """``<run_dir>/profile.json``, unless the run is a shipped capture or not writable: then under ./oprof-runs/."""
    from profiler_core.cli.demo import CAPTURES

    resolved = run_dir.resolve()
    shipped = resolved.is_relative_to(CAPTURES.resolve())
    if not shipped and os.access(resolved, os.W_OK):
        return run_dir / PROFILE_NAME
    name = "-".join(resolved.relative_to(CAPTURES.resolve()).parts) if shipped else resolved.name
    return ELSEWHERE / name / PROFILE_NAME


@command("attribute", acyclic=True)
def attribute_cmd(
    run_dir: Annotated[Path | None, typer.Argument(help="A capture directory written by 'oprof capture'.")] = None,
    kineto: Annotated[Path | None, typer.Option(help="torch.profiler trace (.json or .json.gz).")] = None,
    nsys: Annotated[Path | None, typer.Option(help="Nsight Systems SQLite export.")] = None,
    ncu: Annotated[Path | None, typer.Option(help="Nsight Compute CSV (--page raw) or .ncu-rep.")] = None,
    inductor: Annotated[Path | None, typer.Option(
        help="TORCH_TRACE dir/.tgz or an output-code log.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Where to write profile.json (default: in the run directory, or ./profile.json; "
                            "a shipped or read-only capture's goes under oprof-runs/attribute/).")] = None,
    allow_partial: Annotated[bool, typer.Option(
        "--allow-partial", help="Keep launches that do not join as explicit holes instead of failing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the coverage summary as JSON on stdout.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Operators to list.")] = 10,
    output_alias: Annotated[Path | None, typer.Option("--output", hidden=True)] = None,  # the old spelling
) -> None:
    """Attribute every kernel to its operator, with counters and evidence tiers."""
    output = out or output_alias
    done = api.attribute(run_dir, kineto=kineto, nsys=nsys, ncu=ncu, inductor=inductor, allow_partial=allow_partial)
    if done.ranks is not None:
        if as_json:
            emit_json(done.ranks)
            return
        render_multi_rank(done.ranks, top=top)
        out_console.print(f"wrote {run_dir}/rank*/{PROFILE_NAME} and {run_dir}/{RANKS_JSON}")
        return
    profile = done.single()
    out = output or (default_profile_path(run_dir) if run_dir is not None else Path(PROFILE_NAME))
    write_profile(out, profile)
    if output is None and run_dir is not None and out.parent != run_dir:
        err_console.print(f"note: {run_dir} is a shipped or read-only capture; its profile goes to {out} "
                          "(--out chooses another place)", markup=False, soft_wrap=True)
    if as_json:
        emit_json({"profile": str(out), "coverage": profile.coverage.model_dump(mode="json"),
                   "warnings": profile.warnings})
        return
    render_attribution_summary(profile, top=top)
    out_console.print(f"wrote {out}")


def render_attribution_summary(profile: Profile, *, top: int = 10) -> None:
    """Coverage by tier, top operators with their bottleneck counters, disagreements, warnings."""
    cov = profile.coverage
    total = cov.duration_ns or 1
    t = Table(title=f"coverage: {cov.kernel_count} kernels, {cov.duration_ns / 1e3:.1f} us "
                    f"({cov.attributed_time_pct:.2f}% of time attributed at high/medium)")
    t.add_column("tier")
    t.add_column("kernels", justify="right")
    t.add_column("time %", justify="right")
    for tier, tc in sorted(cov.by_tier.items(), key=lambda kv: -kv[1].duration_ns):
        t.add_row(tier, str(tc.kernel_count), f"{100 * tc.duration_ns / total:.2f}")
    out_console.print(t)
    out_console.print(
        f"counters: measured {cov.counters_measured.kernel_count}, inherited {cov.counters_inherited.kernel_count}, "
        f"missing {cov.counters_missing.kernel_count} kernels; tiers overlapped on {cov.tier_overlaps} kernels, "
        f"disagreed on {cov.tier_disagreements}")
    ops = Table(title=f"top {top} operators by kernel time")
    for col in ("operator", "class", "kernels", "time us", "share %", "tensor %", "occupancy %", "dram %", "conf"):
        ops.add_column(col, justify="left" if col in ("operator", "class", "conf") else "right")
    for op in slowest(profile.operators, top):
        m = op.metrics
        ops.add_row(op.key, op.op_class.value, str(op.kernel_count), f"{op.duration_ns / 1e3:.1f}",
                    f"{100 * op.duration_ns / total:.1f}", _fmt(m.get("tensor_core_active_pct")),
                    _fmt(m.get("achieved_occupancy_pct")), _fmt(m.get("dram_throughput_pct")), op.confidence.value)
    out_console.print(ops)
    for w in profile.warnings[:10]:
        err_console.print(f"[yellow]warning:[/] {w}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_multi_rank(merged: MultiRankProfile, *, top: int = 10) -> None:
    """Per-rank totals and overlap, then the operators whose duration spreads most across ranks."""
    t = Table(title=f"{merged.world_size} ranks; slowest rank {merged.totals.slowest_rank}")
    for col in ("rank", "kernels", "time us", "comm us", "overlap %", "attributed %"):
        t.add_column(col, justify="right")
    for r in merged.ranks:
        share = r.overlap.overlap_share
        t.add_row(str(r.rank), str(r.kernels), f"{r.duration_ns / 1e3:.1f}", f"{r.communication_ns / 1e3:.1f}",
                  "n/a (no NCCL)" if share is None else f"{100 * share:.1f}", f"{r.attributed_time_pct:.1f}")
    out_console.print(t)
    ops = Table(title=f"top {top} operators by spread across ranks")
    for col in ("operator", "class", "min us", "median us", "max us", "slowest rank", "max/median"):
        ops.add_column(col, justify="left" if col in ("operator", "class") else "right")
    for o in merged.operators[:top]:
        ops.add_row(o.key, o.op_class.value, f"{o.min_ns / 1e3:.1f}", f"{o.median_ns / 1e3:.1f}",
                    f"{o.max_ns / 1e3:.1f}", str(o.slowest_rank),
                    "-" if o.straggler_factor is None else f"{o.straggler_factor:.2f}")
    out_console.print(ops)
