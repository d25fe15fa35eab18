"""The rich terminal report: comparability warnings print first; names print verbatim."""

from __future__ import annotations

from profiler_core.analysis import compare, diagnose
from profiler_core.report.terminal import render_terminal
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile


def test_real_comparison_text() -> None:
    base, opt = pair_profile("base"), pair_profile("opt")
    text = render_terminal(base, findings=diagnose(base), comparison=compare(base, opt))
    assert text.startswith("FASTER: 158.5 us -> 48.8 us (3.25x, -69.2%)")
    assert "tensor_core_active_pct 0.01 -> 10.1" in text
    assert "bf16_promotion" in text and "Tensor Cores idle, low occupancy" in text


def test_warning_first_and_markup_not_interpreted() -> None:
    base, opt = ProfileBuilder(gpu_name="NVIDIA H200"), ProfileBuilder(gpu_name="NVIDIA A100")
    base.op("aten::mm[bold]", k("sgemm_nn", 10))
    opt.op("aten::mm[bold]", k("sgemm_nn", 10))
    text = render_terminal(comparison=compare(base.build(), opt.build()))
    assert text.startswith("WARNING: NOT COMPARABLE: gpu_name differs")
    assert "aten::mm[bold]#0" in text
