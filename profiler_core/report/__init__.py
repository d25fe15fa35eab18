"""Reports of a profile, its findings and a comparison: terminal, markdown, HTML, Perfetto, summary.

    render_html(profile, findings=diagnose(profile), baseline=baseline)   # self-contained page
    render_markdown(comparison=compare(baseline, profile))                # pull-request comment
    export_perfetto(profile)                                              # Chrome trace dict
    compact_summary(profile, top_k=10)                                    # a few KB for an MCP client

Each is loaded from its module when first asked for: the terminal report a command prints does not
import the HTML page's templates with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler_core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from profiler_core.report.html import render_html
    from profiler_core.report.markdown import render_markdown
    from profiler_core.report.perfetto import export_perfetto
    from profiler_core.report.summary import SUMMARY_MAX_BYTES, compact_summary

_MODULE_OF = {
    "render_html": "html",
    "render_markdown": "markdown",
    "export_perfetto": "perfetto",
    "SUMMARY_MAX_BYTES": "summary",
    "compact_summary": "summary",
}

__all__ = ["SUMMARY_MAX_BYTES", "compact_summary", "export_perfetto", "render_html", "render_markdown"]

__getattr__ = lazy_exports(__name__, _MODULE_OF)
