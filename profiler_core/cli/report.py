"""``oprof report PROFILE.json``: terminal report, plus HTML / markdown / Perfetto / summary outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from profiler_core import api
from profiler_core.cli import command, emit_json, out_console
from profiler_core.cli.outputs import PROFILE_HELP, write_output
from profiler_core.report.digest import headline
from profiler_core.report.end_to_end import verdict_fields
from profiler_core.report.terminal import comparison_renderables, findings_renderables, profile_renderables


@command("report", acyclic=True)
def report_command(
    profile: Annotated[Path, typer.Argument(help=PROFILE_HELP)],
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="Compare against this profile (or run directory).")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Write a self-contained HTML report here.")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Write a markdown report here.")] = None,
    perfetto: Annotated[Path | None, typer.Option(
        "--perfetto", help="Write the attributed timeline as a Chrome trace (ui.perfetto.dev) here.")] = None,
    summary: Annotated[bool, typer.Option(
        "--summary", help="Print the compact summary (a few KB of JSON) on stdout.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print findings (and comparison) as JSON.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, help="Operators to list.")] = 10,
    top_k_alias: Annotated[int | None, typer.Option("--top-k", min=1, hidden=True)] = None,  # the old spelling
) -> None:
    """Report a profile: where the time went, why, and (with --baseline) what changed."""
    from profiler_core.analysis.profile_view import shared_views

    with shared_views():  # one view per profile for every stage below
        _report(profile, baseline, html, markdown, perfetto, summary, as_json, top_k_alias or top)


def _report(profile: Path, baseline: Path | None, html: Path | None, markdown: Path | None,
            perfetto: Path | None, summary: bool, as_json: bool, top_k: int) -> None:
    prof = api.load_profile(profile)
    base = api.load_profile(baseline) if baseline is not None else None
    rep = api.report(prof, baseline=base, base_label=str(baseline), opt_label=str(profile))
    findings, comparison = rep.findings, rep.comparison
    e2e = api.end_to_end(baseline, profile) if baseline is not None else None
    written: dict[str, str] = {}
    if html is not None:
        written["html"] = str(write_output(html, rep.html(end_to_end=e2e)))
    if markdown is not None:
        written["markdown"] = str(write_output(markdown, rep.markdown(top_k=top_k, end_to_end=e2e)))
    if perfetto is not None:
        written["perfetto"] = str(write_output(perfetto, rep.perfetto(run_dir=_capture_dir(profile))))
    if as_json:
        doc: dict[str, Any] = {"profile": headline(prof),
                               "findings": findings.model_dump(mode="json") if findings else None,
                               "comparison": comparison.model_dump(mode="json") if comparison else None,
                               "end_to_end": verdict_fields(comparison, e2e) if comparison else None,
                               "files": written}
        if summary:
            doc["summary"] = rep.summary(top_k=top_k)
        emit_json(doc)
        return
    if summary:
        emit_json(rep.summary(top_k=top_k))
        return
    items = [*(comparison_renderables(comparison, end_to_end=e2e) if comparison else []),
             *profile_renderables(prof, top_k=top_k), *(findings_renderables(findings) if findings else [])]
    for item in items:
        out_console.print(item)
    for kind, path in written.items():
        out_console.print(f"{kind} written to {path}", markup=False)


def _capture_dir(profile: Path) -> Path | None:
    """The capture directory a profile was attributed from, when it is one (its timeline's host side)."""
    from profiler_core.rundir.layout import MANIFEST_NAME

    run = profile if profile.is_dir() else profile.parent
    return run if (run / MANIFEST_NAME).is_file() else None
