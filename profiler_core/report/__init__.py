"""Reports of a profile, its findings and a comparison: terminal, markdown, HTML, Perfetto, summary.

    render_html(profile, findings=diagnose(profile), baseline=baseline)   # self-contained page
    render_markdown(comparison=compare(baseline, profile))                # pull-request comment
    export_perfetto(profile)                                              # Chrome trace dict
    compact_summary(profile, top_k=10)                                    # a few KB for an MCP client
"""

from profiler_core.report.html import render_html
from profiler_core.report.markdown import render_markdown
from profiler_core.report.perfetto import export_perfetto
from profiler_core.report.summary import SUMMARY_MAX_BYTES, compact_summary

__all__ = ["SUMMARY_MAX_BYTES", "compact_summary", "export_perfetto", "render_html", "render_markdown"]
