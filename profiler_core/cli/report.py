"""``oprof report PROFILE.json``: terminal report, plus HTML / markdown / Perfetto / summary outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from profiler_core.analysis.compare import compare
from profiler_core.analysis.diagnose import diagnose
from profiler_core.cli import command, emit_json, out_console
from profiler_core.cli.outputs import PROFILE_HELP, load_profile, write_output
from profiler_core.report.digest import headline
from profiler_core.report.html import render_html
from profiler_core.report.markdown import render_markdown
from profiler_core.report.perfetto import export_perfetto
from profiler_core.report.summary import compact_summary
from profiler_core.report.terminal import comparison_renderables, findings_renderables, profile_renderables


@command("report")
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
    top_k = top_k_alias or top
    prof = load_profile(profile)
    base = load_profile(baseline) if baseline is not None else None
    findings = diagnose(prof)
    comparison = compare(base, prof, base_label=str(baseline), opt_label=str(profile)) if base else None
    written: dict[str, str] = {}
    if html is not None:
        written["html"] = str(write_output(html, render_html(prof, findings=findings, comparison=comparison)))
    if markdown is not None:
        written["markdown"] = str(write_output(markdown, render_markdown(
            prof, findings=findings, comparison=comparison, top_k=top_k)))
    if perfetto is not None:
        written["perfetto"] = str(write_output(perfetto, json.dumps(export_perfetto(prof))))
    if as_json:
        doc: dict[str, Any] = {"profile": headline(prof), "findings": findings.model_dump(mode="json"),
                               "comparison": comparison.model_dump(mode="json") if comparison else None,
                               "files": written}
        if summary:
            doc["summary"] = compact_summary(prof, top_k=top_k, findings=findings)
        emit_json(doc)
        return
    if summary:
        emit_json(compact_summary(prof, top_k=top_k, findings=findings))
        return
    items = [*(comparison_renderables(comparison) if comparison else []),
             *profile_renderables(prof, top_k=top_k), *findings_renderables(findings)]
    for item in items:
        out_console.print(item)
    for kind, path in written.items():
        out_console.print(f"{kind} written to {path}", markup=False)
