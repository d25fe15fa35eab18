"""The markdown report: a pull-request comment with the verdict, tables, warnings first, names escaped."""

from __future__ import annotations

from profiler_core.analysis import compare, diagnose
from profiler_core.report import render_markdown
from profiler_core.report.markdown import md
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile


def test_comparison_comment() -> None:
    text = render_markdown(comparison=compare(pair_profile("base"), pair_profile("opt")))
    assert text.startswith("# oprof report")
    assert ("**FASTER** on profiled kernel time: 158.5 \u2192 48.8 us (3.25x); no end-to-end wall time measured."
            in text)
    assert "| gemm | 132.4 | 27.9 | -78.9% |" in text
    assert "| tensor_core_idle | tensor_core_active_pct 0.01 -> 10.1 | \u2191 | \u2191 | yes |" in text
    assert not any(entity in text for entity in ("&gt;", "&lt;", "&amp;"))  # markdown, not HTML
    assert "## Profile" not in text  # comparison only
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|") and line.count("|") - line.count("\\|") >= 3


def test_profile_with_findings() -> None:
    base = pair_profile("base")
    text = render_markdown(base, findings=diagnose(base))
    assert "### Coverage by tier" in text and "| cupti_correlation | 158.5 | 100.0% |" in text
    assert "## Findings" in text and "| 3 | Tensor Cores idle on FP32 GEMMs | bf16_promotion |" in text
    assert "   - GEMM precision read from kernel names: fp32 x16" in text


def test_warning_alert_comes_first() -> None:
    base, opt = ProfileBuilder(measured=2), ProfileBuilder(measured=3)
    base.op("aten::mm", k("sgemm_nn", 10))
    opt.op("aten::mm", k("sgemm_nn", 10))
    text = render_markdown(opt.build(), baseline=base.build())
    alert = text.index("> [!WARNING]")
    assert alert < text.index("on profiled kernel time")
    assert "NOT COMPARABLE: measured_iterations differs (2 vs 3)" in text


def test_cells_escape_pipes_and_templates() -> None:
    assert md("void k<float, 4>|x") == "void k\\<float, 4>\\|x"
    assert md("a -> b & c") == "a -> b & c"
