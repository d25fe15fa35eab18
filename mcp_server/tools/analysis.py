"""Analysis tools: ``diagnose`` (findings), ``compare`` (baseline vs optimized), ``report`` (HTML + summary).

Each writes its full result beside the profile it read (findings.json, comparison.json,
report.html, or ``<stem>.<name>`` for a profile not named profile.json) and returns a
bounded summary with that file's path.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_server.arguments import PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.models import (
    CheckRow,
    ClassDeltaRow,
    CompareResult,
    ComparisonHeadline,
    DiagnoseResult,
    EndToEndOut,
    FindingRow,
    GateOut,
    OperatorDeltaRow,
    OverheadDeltaRow,
    ReportResult,
    ShiftRow,
)
from mcp_server.tools import hints, load_profile
from mcp_server.views import MAX_WARNINGS, enum_value, showing, us
from profiler_core import api
from profiler_core.atomic_write import write_stream_atomic, write_text_atomic
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.rundir import COMPARISON_NAME, FINDINGS_NAME, PROFILE_NAME
from profiler_core.rundir.layout import WALLTIME_NAME
from profiler_core.schema import Profile

if TYPE_CHECKING:
    from profiler_core.analysis.compare import Comparison
    from profiler_core.analysis.findings import FindingsReport

PREFERRED_COUNTERS = (*HEADLINE_COUNTERS, "memory_throughput_pct", "local_memory_wavefronts")
SKIPPED_COUNTERS = frozenset({"gpu_time_duration_ns"})  # replayed under ncu: never a duration to compare
ProfileArg = Annotated[str, Field(max_length=PATH_CHARS,
                                  description="A profile.json written by attribute, or its run directory.")]
WallTimeArg = Annotated[str | None, Field(max_length=PATH_CHARS, description=(
    "walltime.json from the walltime tool (baseline and optimized timed end to end): the verdict then "
    "follows wall time per step. Default: the one recorded beside the runs, if any (optimize's run "
    "directory, a shipped example)."))]
OutputArg = Annotated[str | None, Field(max_length=PATH_CHARS,
    description="Where to write the full result; default beside the profile.")]


def sibling(profile_path: Path, name: str) -> Path:
    """``<dir>/<name>`` for ``profile.json``, else ``<dir>/<stem>.<name>`` (two profiles, two outputs)."""
    if profile_path.name == PROFILE_NAME:
        return profile_path.with_name(name)
    return profile_path.with_name(f"{profile_path.stem}.{name}")


def _telling(deltas: list[Any], limit: int = 4) -> list[str]:
    """The counter shifts worth reading first: headline counters, never ncu's replayed duration."""
    ranked = sorted((d for d in deltas if d.field not in SKIPPED_COUNTERS),
                    key=lambda d: PREFERRED_COUNTERS.index(d.field) if d.field in PREFERRED_COUNTERS
                    else len(PREFERRED_COUNTERS))
    return [d.text for d in ranked[:limit]]


def finding_row(f: Any) -> FindingRow:
    """One finding, as a model-sized row (the findings file holds the rest)."""
    return FindingRow(
        rule_id=f.rule_id, title=f.title, kind=enum_value(f.kind), licenses=f.licenses,
        alternatives=[enum_value(a) for a in f.alternatives], confidence=enum_value(f.confidence),
        gain_bound_pct=round(f.gain_bound_pct, 2), max_speedup=f.max_speedup,
        share_pct=round(f.evidence.share_pct, 2), symptom=f.symptom, bottleneck=f.bottleneck,
        operators=f.operators[:5], operator_count=len(f.operators), facts=f.evidence.facts[:3],
        expected_shifts={k: enum_value(v) for k, v in f.expected_shifts.items()},
    )


def _diagnose_to(profile: Profile, out: Path, *, roofline: bool = True) -> FindingsReport:
    """Diagnose ``profile`` and write every finding to ``out``; the FindingsReport."""
    report = api.diagnose_profile(profile, roofline=roofline)
    write_text_atomic(out, report.model_dump_json(indent=1))
    return report


def _compare(base: Profile, opt: Profile, *, base_path: Path, opt_path: Path, force: bool = True) -> Comparison:
    """The Comparison of two profiles, each labelled by its run directory's name."""
    return api.compare_profiles(base, opt, base_label=base_path.parent.name, opt_label=opt_path.parent.name,
                                force=force, force_option="force=true")


def wall_times_of(ws: Any, base_path: Path, opt_path: Path, walltime: str | None) -> Any:
    """The pair's wall times per step: from ``walltime`` when given, else recorded beside the runs (or None)."""
    from profiler_core.report.end_to_end import read_walltime_file

    if walltime:
        e = read_walltime_file(ws.existing_file(walltime, what=WALLTIME_NAME))
        if e is None or e.wall_speedup is None:
            raise ToolError(f"{walltime}: holds no baseline and optimized medians; call walltime with "
                            "workload and baseline_workload to write one")
        return e
    return api.end_to_end(base_path, opt_path)


def end_to_end_of(ws: Any, c: Comparison, base_path: Path, opt_path: Path, walltime: str | None) -> EndToEndOut:
    """The verdict, wall time per step first: from ``walltime`` when given, else recorded beside the runs."""
    from profiler_core.report.end_to_end import verdict_fields

    return EndToEndOut.model_validate(verdict_fields(c, wall_times_of(ws, base_path, opt_path, walltime)))


def _wall_for_html(ws: Any, e2e: EndToEndOut | None, walltime: str | None, base_path: Path | None,
                   opt_path: Path) -> Any:
    """The EndToEnd the HTML banner reads (the same figures the tool returns)."""
    from profiler_core.report.end_to_end import read_walltime_file

    if e2e is None or base_path is None:
        return None
    if walltime:
        return read_walltime_file(ws.existing_file(walltime, what=WALLTIME_NAME))
    return api.end_to_end(base_path, opt_path)


def write_comparison(out: Path, result: Any) -> None:
    """Write the comparison's JSON (the bytes of ``model_dump_json(indent=1)``) to ``out`` atomically,
    its operator rows a batch at a time: two 1M-kernel profiles' comparison is 3 GB of JSON."""
    from profiler_core.analysis.compare import comparison_json_fields
    from profiler_core.json_output import json_pieces, write_json

    pieces = json_pieces(comparison_json_fields(result), "operators", result.operators)
    write_stream_atomic(out, lambda handle: write_json(handle, pieces, final_newline=False))


def comparison_result(c: Any, *, baseline: Path, optimized: Path, out: Path, top_k: int,
                      end_to_end: EndToEndOut | None = None) -> CompareResult:
    """The wire form of a Comparison: headline, checks, classes, the top operator changes."""
    rows = [OperatorDeltaRow(label=r.label, op_class=enum_value(r.op_class), method=enum_value(r.method),
                             base_us=us(r.base_ns), opt_us=us(r.opt_ns), delta_us=us(r.delta_ns),
                             delta_pct=r.delta_pct, base_keys=r.base_keys[:3], opt_keys=r.opt_keys[:3])
            for r in c.operators.largest_changes(top_k)]
    return CompareResult(
        baseline=str(baseline), optimized=str(optimized), comparison_file=str(out), verdict=c.verdict,
        speedup=c.speedup, base_total_us=us(c.base_total_ns), opt_total_us=us(c.opt_total_ns),
        delta_pct=round(c.delta_pct, 2), per_iteration=c.per_iteration, comparable=c.comparability.comparable,
        checks=[CheckRow(name=k.name, status=k.status, required=k.required, base=k.base, opt=k.opt,
                         detail=k.detail) for k in c.comparability.checks],
        classes=[ClassDeltaRow(op_class=enum_value(r.op_class), base_us=us(r.base_ns), opt_us=us(r.opt_ns),
                               delta_pct=r.delta_pct, base_share_pct=round(r.base_share_pct, 2),
                               opt_share_pct=round(r.opt_share_pct, 2),
                               counters=_telling(r.counters))
                 for r in c.classes],
        operators=rows,
        operators_showing=showing(len(rows), len(c.operators), "operator groups, largest change first",
                                  f"raise top_k, or read {out}"),
        new_overhead=[OverheadDeltaRow(kind=enum_value(o.kind), kernel_count=o.kernel_count,
                                       time_us=us(o.duration_ns),
                                       share_of_opt_pct=round(o.share_of_opt_pct, 2),
                                       kernel_names=o.kernel_names[:3]) for o in c.new_overhead],
        new_overhead_us=us(c.new_overhead_ns),
        shift_checks=[ShiftRow(rule_id=s.rule_id, field=s.field, expected=s.expected, observed=s.observed,
                               as_predicted=s.as_predicted, text=s.text) for s in c.shift_checks],
        warnings=c.warnings[:MAX_WARNINGS],
        end_to_end=end_to_end,
    )


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws = ctx.workspace

    @mcp.tool(title="Diagnose a profile", annotations=hints("Diagnose a profile", read_only=False))
    def diagnose(
        profile: ProfileArg,
        output: OutputArg = None,
        top_k: Annotated[int, Field(ge=1, le=30, description="Findings to list, largest gain bound first.")
                         ] = 10,
        roofline: Annotated[bool, Field(description=(
            "Judge operators against the chip's roofline: flag those far below both roofs and cap "
            "precision-change bounds by the target precision's roofline. False: bounds from kernel time alone."))
        ] = True,
    ) -> DiagnoseResult:
        """Findings for one profile: symptom, bottleneck, the transformation it licenses, evidence, bound.

        Writes every finding to findings.json beside the profile (apply_pass reads it).
        """
        with tool_errors(ws):
            path, prof = load_profile(ws, profile)
            out = ws.output_file(output or sibling(path, FINDINGS_NAME), kind="findings")
            report = _diagnose_to(prof, out, roofline=roofline)
            rows = [finding_row(f) for f in report.findings[:top_k]]
            return DiagnoseResult(
                profile=str(path), findings_file=str(out), attributed_pct=round(report.attributed_pct, 2),
                unattributed_pct=round(report.unattributed_pct, 2), findings=rows,
                showing=showing(len(rows), len(report.findings), "findings, largest gain bound first",
                                f"raise top_k, or read {out}"),
                warnings=report.warnings[:MAX_WARNINGS],
            )

    @mcp.tool(title="Compare two profiles", annotations=hints("Compare two profiles", read_only=False))
    def compare(
        baseline: Annotated[str, Field(max_length=PATH_CHARS,
                                       description="The baseline profile.json, or its run directory.")],
        optimized: Annotated[str, Field(max_length=PATH_CHARS,
            description="The optimized profile.json or run directory (same workload, same settings).")],
        output: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Where to write the full comparison; default beside the optimized profile.")] = None,
        top_k: Annotated[int, Field(ge=1, le=50, description="Operator groups to list.")] = 10,
        force: Annotated[bool, Field(
            description="Compare even when the two profiles measure different workloads.")] = False,
        walltime: WallTimeArg = None,
        gate_pct: Annotated[float | None, Field(ge=0.0, le=1000.0, description=(
            "A CI gate: judge the pair faster / unchanged (within gate_pct percent) / slower / not_comparable, "
            "on wall time per step where measured, else kernel time; the result's gate field holds the "
            "outcome and the exit status oprof compare --gate gives. Different workloads are then judged "
            "not_comparable instead of refused."))] = None,
    ) -> CompareResult:
        """Baseline vs optimized: total and verdict, comparability checks, per-class and per-operator deltas.

        Also the new overhead the optimized run pays (casts, copies) and whether the counters the
        baseline's findings predicted actually moved. end_to_end leads with wall time per step
        wherever the pair was timed; speedup and verdict at the top level are profiled kernel time.
        """
        with tool_errors(ws):
            base_path, base = load_profile(ws, baseline)
            opt_path, opt = load_profile(ws, optimized)
            out = ws.output_file(output or sibling(opt_path, COMPARISON_NAME), kind="comparison")
            result = _compare(base, opt, base_path=base_path, opt_path=opt_path,
                              force=force or gate_pct is not None)
            from profiler_core.report.end_to_end import verdict_fields
            from profiler_core.report.gate import judge

            wall = wall_times_of(ws, base_path, opt_path, walltime)
            e2e = EndToEndOut.model_validate(verdict_fields(result, wall))
            write_comparison(out, result)
            done = comparison_result(result, baseline=base_path, optimized=opt_path, out=out, top_k=top_k,
                                     end_to_end=e2e)
            if gate_pct is not None:
                done.gate = GateOut.model_validate(judge(result, wall, gate_pct).as_dict())
            return done

    @mcp.tool(title="Report on a profile", annotations=hints("Report on a profile", read_only=False))
    def report(
        profile: ProfileArg,
        baseline: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="A baseline profile.json or run directory: the report then leads with the "
                        "comparison.")] = None,
        include_findings: Annotated[bool, Field(description="Run diagnose and include its findings.")] = True,
        html: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Where to write the HTML report; default report.html beside the profile.")] = None,
        top_k: Annotated[int, Field(ge=1, le=50, description="Operators in the summary.")] = 10,
        walltime: WallTimeArg = None,
    ) -> ReportResult:
        """A self-contained HTML report, and a compact summary of the profile for reading here."""
        from profiler_core.analysis.profile_view import shared_views

        with tool_errors(ws), shared_views():  # one view per profile for diagnose, compare and the renderers
            path, prof = load_profile(ws, profile)
            out = ws.output_file(html or sibling(path, "report.html"), kind="report")
            findings = findings_file = None
            if include_findings:
                findings_file = ws.output_file(sibling(path, FINDINGS_NAME), kind="findings")
                findings = _diagnose_to(prof, findings_file)
            comparison = headline = e2e = None
            if baseline:
                base_path, base = load_profile(ws, baseline)
                comparison = _compare(base, prof, base_path=base_path, opt_path=path)
                e2e = end_to_end_of(ws, comparison, base_path, path, walltime)
                headline = ComparisonHeadline(
                    baseline=str(base_path), verdict=comparison.verdict, speedup=comparison.speedup,
                    delta_pct=round(comparison.delta_pct, 2), comparable=comparison.comparability.comparable,
                    end_to_end=e2e)
            elif walltime:
                raise ToolError("walltime compares a baseline with this profile: pass baseline too")
            rendered = api.Report(prof, findings=findings, comparison=comparison)
            wall = _wall_for_html(ws, e2e, walltime, base_path if baseline else None, path)
            write_text_atomic(out, rendered.html(end_to_end=wall))
            summary = rendered.summary(top_k=top_k)
            return ReportResult(profile=str(path), html=str(out),
                                findings_file=str(findings_file) if findings_file else None,
                                comparison=headline, summary=summary)

