"""The HTML report: self-contained, with its SVG charts, and every profile string escaped."""

from __future__ import annotations

import re

import pytest

from profiler_core.analysis import compare, diagnose
from profiler_core.errors import ProfilerError
from profiler_core.report import render_html
from profiler_core.schema import Profile
from tests.analysis.profile_builder import ProfileBuilder, k
from tests.analysis.real_profiles import pair_profile

HOSTILE = "<script>alert('x')</script>"


def _hostile_profile() -> Profile:
    b = ProfileBuilder(workload=f"evil{HOSTILE}.py", gpu_name=f"GPU{HOSTILE}")
    b.op(
        f"aten::mm{HOSTILE}",
        k(
            f"void gemm<{HOSTILE}>",
            10,
            tensor_core_active_pct=0.0,
            achieved_occupancy_pct=5.0,
            dram_throughput_pct=10.0,
            sm_throughput_pct=10.0,
        ),
    )
    b.unattributed(k(f"kernel{HOSTILE}&co", 10), reason=f"reason{HOSTILE}")
    prof = b.build()
    prof.warnings.append(f"warning {HOSTILE}")
    return prof


def test_charts_present_and_self_contained() -> None:
    base, opt = pair_profile("base"), pair_profile("opt")
    page = render_html(opt, findings=diagnose(opt), comparison=compare(base, opt))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    titles = re.findall(r'<svg [^>]*class="chart".*?<title>([^<]*)</title>', page)
    assert titles == [
        "Kernel time per operator class: baseline vs optimized",
        "Counter shifts in the busiest classes (percent)",
        "Kernel time by operator class",
        "Coverage: kernel time by attribution tier",
        "Top 12 operators by kernel time (colored by class)",
        "Roofline on H200 SXM: operators sized by time, colored by class",
    ]
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}


def test_profile_only_report_has_the_profile_charts() -> None:
    base = pair_profile("base")
    page = render_html(base, findings=diagnose(base))
    assert page.count('class="chart"') == 4  # three profile charts and the roofline
    assert "Tensor Cores idle on FP32 GEMMs" in page and "bf16_promotion" in page
    assert "Baseline vs optimized" not in page


def test_every_profile_string_is_escaped() -> None:
    prof = _hostile_profile()
    page = render_html(prof, findings=diagnose(prof), baseline=prof)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;" in page
    assert "&amp;co" in page  # ampersands too


def test_warnings_shown_before_the_numbers() -> None:
    base = ProfileBuilder(chip="gh100")
    base.op("aten::mm", k("sgemm_nn", 10))
    opt = ProfileBuilder(chip="ga100")
    opt.op("aten::mm", k("sgemm_nn", 5))
    page = render_html(opt.build(), baseline=base.build())
    warn = page.index('class="warn"')
    assert "NOT COMPARABLE: chip differs" in page[warn:]
    assert warn < page.index('class="verdict')


def test_nothing_to_report() -> None:
    with pytest.raises(ProfilerError, match="nothing to report"):
        render_html()
