"""The use cases, typed: what ``oprof`` (profiler_core.cli) and ``oprof-mcp`` (mcp_server) both call.

The adapters parse arguments (and, for MCP, confine paths to the workspace), call one of
these, and format the result; the rules of a use case live here once::

    from profiler_core import api

    done = api.attribute(Path("oprof-runs/gpt2-..."))     # one capture, or every rank of a multi-rank run
    prof = api.load_profile(Path("oprof-runs/gpt2-..."))  # profile.json, or the run directory (stale refused)
    findings = api.diagnose_profile(prof)
    cmp = api.compare_profiles(base, prof, force=False, force_option="--force")
    rep = api.report(prof, baseline=base)                 # .html(), .markdown(), .summary(), .perfetto()
    api.capture(Path("model.py"), CaptureConfig(ranks=2))  # one capture per rank, under torchrun
    plan = api.apply_passes(Path("model.py"), ["sdpa"], device="cpu")

Every heavy import (torch, pandas, the capture pipeline) happens inside the function that
needs it, so a light command stays light.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler_core.errors import AttributionError, PassError, ProfilerError, WorkloadMismatchError

if TYPE_CHECKING:
    import threading

    from profiler_core.analysis.compare import Comparison
    from profiler_core.analysis.findings import FindingsReport
    from profiler_core.capture.config import CaptureConfig
    from profiler_core.distributed.attribute import MultiRankProfile
    from profiler_core.distributed.compare import MultiRankComparison
    from profiler_core.optimize.loop import OptimizeConfig, OptimizeResult
    from profiler_core.passes.plan import OptimizationPlan
    from profiler_core.passes.policy import ValidationPolicy
    from profiler_core.passes.registry import PassSpec
    from profiler_core.report.end_to_end import EndToEnd
    from profiler_core.rundir import RanksManifest, RunManifest
    from profiler_core.schema import Profile
    from profiler_core.workload_process import ChildLimits

ProgressFn = Callable[[str, int, int, str], None]  # (phase, step, total, message)
ARTIFACT_KINDS = ("kineto", "nsys", "ncu", "inductor")


# ------------------------------------------------------------------ attribute


@dataclass(frozen=True)
class Attributed:
    """What attributing gave: one profile, or the merged view of a multi-rank run (rank profiles written)."""

    profile: Profile | None = None
    ranks: MultiRankProfile | None = None
    run_dir: Path | None = None

    def single(self) -> Profile:
        """The profile of a single capture (a multi-rank run has one per rank: see ``ranks``)."""
        if self.profile is None:
            raise ProfilerError(f"{self.run_dir}: a multi-rank run has one profile per rank; read its ranks")
        return self.profile


def attribute(run_dir: Path | None = None, *, kineto: Path | None = None, nsys: Path | None = None,
              ncu: Path | None = None, inductor: Path | None = None, allow_partial: bool = False) -> Attributed:
    """Attribute a run directory (one capture or many ranks), or artifact files named one by one.

    A multi-rank run writes ``rank<N>/profile.json`` and ``ranks.json`` itself; the caller
    writes a single capture's profile where it chooses.
    """
    given = {k: v for k, v in zip(ARTIFACT_KINDS, (kineto, nsys, ncu, inductor), strict=True) if v is not None}
    if run_dir is not None and given:
        raise ProfilerError("give either a run directory or the artifact files (kineto, nsys, ncu, inductor), "
                            "not both")
    if run_dir is not None:
        from profiler_core.rundir import open_run

        if open_run(run_dir).is_multi_rank:
            from profiler_core.distributed.attribute import attribute_ranks

            return Attributed(ranks=attribute_ranks(run_dir, allow_partial=allow_partial), run_dir=run_dir)
        from profiler_core.attribution import attribute_run

        return Attributed(profile=attribute_run(run_dir, allow_partial=allow_partial), run_dir=run_dir)
    if not given:
        raise ProfilerError("nothing to attribute: pass a run directory, or a timeline (a kineto trace and/or "
                            "an nsys export) with its ncu counters")
    if kineto is None and nsys is None:
        raise AttributionError("no timeline given: pass a kineto trace (.json) and/or an nsys export (.sqlite)")
    from profiler_core.attribution import attribute_files

    return Attributed(profile=attribute_files(kineto=kineto, nsys=nsys, ncu=ncu, inductor=inductor,
                                              allow_partial=allow_partial))


# ------------------------------------------------------------------ load, diagnose, compare


def load_profile(path: Path) -> Profile:
    """A profile.json, or a run directory (its profile.json while current, else attributed now).

    A profile.json that no longer describes the run beside it is refused, naming the fix.
    """
    from profiler_core.attribution.sources import current_profile, stale_reason
    from profiler_core.profile_io import read_profile

    if path.is_dir():
        return current_profile(path)
    profile = read_profile(path)
    reason = stale_reason(path, profile)
    if reason is not None:
        raise ProfilerError(f"{reason}: it is stale; attribute its run directory {path.parent} again to "
                            "rewrite it")
    return profile


def diagnose_profile(profile: Profile, *, threshold_overrides: list[str] | None = None,
                     roofline: bool = True) -> FindingsReport:
    """The findings for one profile (``threshold_overrides``: ``NAME=VALUE`` strings)."""
    from profiler_core.analysis.diagnose import diagnose
    from profiler_core.analysis.thresholds import parse_threshold_overrides, thresholds_with

    thresholds = thresholds_with(parse_threshold_overrides(threshold_overrides or []))
    return diagnose(profile, thresholds, roofline=roofline)


def compare_profiles(base: Profile, opt: Profile, *, base_label: str = "baseline", opt_label: str = "optimized",
                     force: bool = False, force_option: str = "force", base_findings: FindingsReport | None = None,
                     ) -> Comparison:
    """Compare an optimized profile with its baseline; two different workloads are refused unless ``force``.

    ``force_option`` is how the caller spells the override, for the message.
    """
    from profiler_core.analysis.comparability import workload_mismatch_text
    from profiler_core.analysis.compare import compare

    result = compare(base, opt, base_findings=base_findings, base_label=base_label, opt_label=opt_label)
    mismatches = result.comparability.workload_mismatches()
    if mismatches and not force:
        raise WorkloadMismatchError(workload_mismatch_text(base_label, opt_label, mismatches)
                                    + f": pass the baseline of the same workload, or {force_option} to compare "
                                      "anyway")
    return result


@dataclass(frozen=True)
class Compared:
    """Two profiles and their comparison, or (two multi-rank runs) the rank-by-rank comparison."""

    comparison: Comparison | None = None
    base: Profile | None = None
    opt: Profile | None = None
    ranks: MultiRankComparison | None = None
    end_to_end: EndToEnd | None = None  # wall time per step recorded beside the two runs, when there is one


def end_to_end(base: Path, opt: Path) -> EndToEnd | None:
    """The end-to-end wall times (walltime.json / optimize.json) recorded for this baseline and optimized run."""
    from profiler_core.report.end_to_end import end_to_end_for

    return end_to_end_for(base, opt)


def compare_paths(base: Path, opt: Path, *, force: bool = False, force_option: str = "force") -> Compared:
    """Compare two profiles or run directories; two multi-rank runs are compared rank by rank."""
    from profiler_core.rundir import is_multi_rank

    if is_multi_rank(base) and is_multi_rank(opt):
        from profiler_core.distributed.attribute import load_rank_profiles
        from profiler_core.distributed.compare import compare_ranks

        return Compared(ranks=compare_ranks(load_rank_profiles(base), load_rank_profiles(opt),
                                            base_label=str(base), opt_label=str(opt)))
    base_profile, opt_profile = load_profile(base), load_profile(opt)
    result = compare_profiles(base_profile, opt_profile, base_label=str(base), opt_label=str(opt), force=force,
                              force_option=force_option)
    return Compared(comparison=result, base=base_profile, opt=opt_profile, end_to_end=end_to_end(base, opt))


# ------------------------------------------------------------------ report


@dataclass(frozen=True)
class Report:
    """A profile with its findings and (given a baseline) its comparison, ready to render."""

    profile: Profile
    findings: FindingsReport | None = None
    comparison: Comparison | None = None

    def html(self, *, title: str | None = None, end_to_end: EndToEnd | None = None,
             baseline: Profile | None = None) -> str:
        from profiler_core.report.html import render_html

        return render_html(self.profile, findings=self.findings, comparison=self.comparison, baseline=baseline,
                           title=title, end_to_end=end_to_end)

    def markdown(self, *, top_k: int = 10, end_to_end: EndToEnd | None = None) -> str:
        from profiler_core.report.markdown import render_markdown

        return render_markdown(self.profile, findings=self.findings, comparison=self.comparison, top_k=top_k,
                               end_to_end=end_to_end)

    def perfetto(self, *, run_dir: Path | None = None) -> str:
        """The Chrome trace; with the profile's capture directory, its host threads and launch flows too."""
        from profiler_core.report.host_timeline import read_host_timeline
        from profiler_core.report.perfetto import export_perfetto

        host, why = None, None
        if run_dir is not None:
            try:
                host = read_host_timeline(run_dir, self.profile.capture.timeline_source)
            except ProfilerError as err:  # the GPU side stands on its own; say why the host is missing
                why = str(err)
        trace = export_perfetto(self.profile, host=host)
        if why is not None:
            trace["otherData"]["host_missing"] = why
        return json.dumps(trace)

    def summary(self, *, top_k: int = 10) -> dict[str, Any]:
        from profiler_core.analysis.findings import FindingsReport
        from profiler_core.report.summary import compact_summary

        findings = self.findings if self.findings is not None else FindingsReport()
        return compact_summary(self.profile, top_k=top_k, findings=findings)


def report(profile: Profile, *, baseline: Profile | None = None, findings: bool = True,
           base_label: str = "baseline", opt_label: str = "optimized") -> Report:
    """Diagnose ``profile`` (unless ``findings`` is False) and compare it with ``baseline`` when given."""
    from profiler_core.analysis.compare import compare

    found = diagnose_profile(profile) if findings else None
    comparison = compare(baseline, profile, base_label=base_label, opt_label=opt_label) if baseline else None
    return Report(profile=profile, findings=found, comparison=comparison)


# ------------------------------------------------------------------ a shipped run (the offline demo)


@dataclass(frozen=True)
class ShippedAnalysis:
    """One shipped example analysed: attribute -> diagnose -> compare, plus what its optimize run recorded."""

    name: str
    baseline: Profile
    findings: FindingsReport
    comparison: Comparison | None
    report_html: Path
    kept_passes: list[str] | None = None  # None: the example records no optimize run or plan
    wall_ms: dict[str, float] = field(default_factory=dict)  # "baseline" / "optimized" -> median ms


def analyse_shipped_run(example_dir: Path, out: Path) -> ShippedAnalysis:
    """Attribute an example's ``baseline/`` (and ``optimized/``), diagnose, compare, write profiles and a report."""
    from profiler_core.atomic_write import write_text_atomic
    from profiler_core.attribution import attribute_run
    from profiler_core.passes.plan import read_plan
    from profiler_core.profile_io import write_profile
    from profiler_core.report.end_to_end import read_end_to_end
    from profiler_core.rundir import (
        COMPARISON_NAME,
        FINDINGS_NAME,
        OPTIMIZE_NAME,
        PLAN_NAME,
        REPORT_NAME,
        WALLTIME_NAME,
    )

    baseline = attribute_run(example_dir / "baseline")
    write_profile(out / "baseline.profile.json", baseline)
    findings = diagnose_profile(baseline)
    write_text_atomic(out / FINDINGS_NAME, findings.model_dump_json(indent=1))
    optimized = comparison = None
    if (example_dir / "optimized").is_dir():
        optimized = attribute_run(example_dir / "optimized")
        write_profile(out / "optimized.profile.json", optimized)
        comparison = compare_profiles(baseline, optimized, base_findings=findings, force=True)
        write_text_atomic(out / COMPARISON_NAME, comparison.model_dump_json(indent=1))
    page = Report(optimized or baseline, findings=findings, comparison=comparison).html(
        title=f"{example_dir.name} on an H200", baseline=baseline if optimized else None,
        end_to_end=read_end_to_end(example_dir, example_dir / "optimized"))
    report_html = write_text_atomic(out / REPORT_NAME, page)
    kept: list[str] | None = None
    wall: dict[str, Any] = {}
    summary, plan = example_dir / OPTIMIZE_NAME, example_dir / "optimized" / PLAN_NAME
    if summary.exists():
        data = json.loads(summary.read_text())
        kept, wall = list(data.get("kept_passes") or []), data.get("wall_time") or {}
    elif plan.exists():  # an optimized capture made with 'oprof apply-pass' and 'oprof capture'
        kept = list(read_plan(plan).applied)
    if not wall and (example_dir / WALLTIME_NAME).exists():
        wall = json.loads((example_dir / WALLTIME_NAME).read_text())
    wall_ms = {k: float(v["median_ms"]) for k, v in wall.items()
               if k in ("baseline", "optimized") and isinstance(v, dict) and "median_ms" in v}
    return ShippedAnalysis(name=example_dir.name, baseline=baseline, findings=findings, comparison=comparison,
                           report_html=report_html, kept_passes=kept, wall_ms=wall_ms)


# ------------------------------------------------------------------ capture, optimize


@dataclass(frozen=True)
class Captured:
    """A finished capture: its run directory and manifest (a multi-rank run's: the ranks manifest)."""

    run_dir: Path
    manifest: RunManifest | RanksManifest


def capture(workload: Path, config: CaptureConfig, *, progress: ProgressFn | None = None,
            cancel: threading.Event | None = None) -> Captured:
    """Capture ``workload`` (every phase, checked); ``config.ranks``: that many processes under torchrun."""
    if config.ranks is not None:
        from profiler_core.distributed.capture import capture_ranks
        from profiler_core.rundir import read_ranks_manifest

        run_dir = capture_ranks(workload, config, config.ranks, progress=progress, cancel=cancel)
        return Captured(run_dir=run_dir, manifest=read_ranks_manifest(run_dir))
    from profiler_core.capture.pipeline import capture as capture_one

    result = capture_one(workload, config, progress=progress, cancel=cancel)
    return Captured(run_dir=result.run_dir, manifest=result.manifest)


def optimize(workload: Path, config: OptimizeConfig | None = None, *, progress: ProgressFn | None = None,
             cancel: threading.Event | None = None) -> OptimizeResult:
    """The closed loop: capture, diagnose, try the licensed passes one at a time, keep what helps."""
    from profiler_core.optimize import optimize as run_loop

    return run_loop(workload, config, progress=progress, cancel=cancel)


# ------------------------------------------------------------------ passes


def list_passes() -> list[PassSpec]:
    """Every registered graph pass (built-in and plugins)."""
    from profiler_core.passes import list_passes as registered

    return list(registered())


def findings_for_passes(findings_path: Path, names: Sequence[str]) -> list[dict[str, Any]]:
    """The findings of a findings.json whose transformation is one of the passes ``names`` (any alias).

    Applying every transformation a findings file licenses is what ``--from-findings`` does;
    this keeps only the findings of the passes asked for, so their evidence travels with them.
    """
    from profiler_core.passes import get_pass
    from profiler_core.passes.findings import passes_named_by, read_findings

    chosen = {get_pass(n).name for n in names}
    kept = []
    for name, finding in passes_named_by(read_findings(findings_path)):
        try:
            canonical = get_pass(name).name
        except PassError:
            continue  # a structural fix (no pass of that name): never among the chosen ones
        if canonical in chosen:
            kept.append(dict(finding))
    return kept


def apply_passes(workload: Path, passes: Sequence[str], *, device: str = "cuda",
                 findings: Path | Sequence[Mapping[str, Any]] | None = None, out_dir: Path | None = None,
                 compile_mode: str | None = None, compiler: str = "inductor",
                 raise_on_failure: bool = True, policy: ValidationPolicy | None = None,
                 limits: ChildLimits | None = None) -> OptimizationPlan:
    """Apply ``passes`` to ``workload``, validate its outputs against the original, write the plan.

    ``findings``: a findings.json (every transformation it licenses is applied too), or the
    findings handed to the passes as evidence. A plan that fails validation raises unless
    ``raise_on_failure`` is False (then its status says so). ``policy``: how outputs are judged
    (default ``DEFAULT_POLICY``: against a float64 run of the original step, per kind of output).
    With ``limits`` the workload runs in a child process under them
    (profiler_core.workload_process): a workload that exits, hangs or exhausts memory raises
    WorkloadProcessError instead of ending this process.
    """
    if limits is not None:
        from profiler_core.passes.plan import OptimizationPlan as Plan
        from profiler_core.workload_process import run_in_child

        kwargs = {"workload_path": str(workload), "pass_names": list(passes), "device": device,
                  "findings": str(findings) if isinstance(findings, Path | str) else
                  (None if findings is None else [dict(f) for f in findings]),
                  "out_dir": None if out_dir is None else str(out_dir), "compile_mode": compile_mode,
                  "compiler": compiler, "raise_on_failure": raise_on_failure,
                  "policy": None if policy is None else asdict(policy)}
        return run_in_child("profiler_core.passes.planner:apply_pass_plan_in_child", kwargs, result_type=Plan,
                            workload=workload, limits=limits, label="apply-pass")
    from profiler_core.passes import apply_pass_plan

    return apply_pass_plan(workload, list(passes), device=device, findings=findings, out_dir=out_dir,
                           compile_mode=compile_mode, compiler=compiler, raise_on_failure=raise_on_failure,
                           policy=policy)
