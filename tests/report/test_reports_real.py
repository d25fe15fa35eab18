"""Reports of the shipped H200 captures: wall time beside kernel time, one profile per section, counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profiler_core.analysis import compare, diagnose
from profiler_core.analysis.findings import in_priority_order
from profiler_core.attribution import attribute_run
from profiler_core.report import render_html
from profiler_core.report.end_to_end import read_end_to_end
from profiler_core.report.markdown import render_markdown

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"


@pytest.fixture(scope="module")
def sdpa() -> dict:
    base, opt = attribute_run(CAPTURES / "sdpa_attention" / "baseline"), attribute_run(
        CAPTURES / "sdpa_attention" / "optimized")
    findings = diagnose(base)
    return {"base": base, "opt": opt, "findings": findings,
            "cmp": compare(base, opt, base_findings=findings),
            "e2e": read_end_to_end(CAPTURES / "sdpa_attention", CAPTURES / "sdpa_attention" / "optimized")}


def test_the_banner_follows_wall_time(sdpa: dict) -> None:
    # 8.71x less kernel time, 1.01x end to end: the step is host-bound
    e = sdpa["e2e"]
    assert e is not None and e.wall_speedup == pytest.approx(0.555215984582901 / 0.5497920215129852)
    page = render_html(sdpa["opt"], findings=sdpa["findings"], comparison=sdpa["cmp"], baseline=sdpa["base"],
                       end_to_end=e)
    verdict = re.search(r'<div class="verdict (\w+)"><b>(\w+)</b>([^<]*)', page)
    assert verdict is not None and verdict.group(1) == "unchanged" and verdict.group(2) == "UNCHANGED"
    assert "0.555 &rarr; 0.550 ms wall time per step (1.01x)" in verdict.group(3)
    assert f"({sdpa['cmp'].speedup:.2f}x)" in verdict.group(3) and "max abs err 0.000633" in verdict.group(3)
    assert "FASTER" not in page.split("<h2>Baseline: where")[0]
    text = render_markdown(sdpa["opt"], findings=sdpa["findings"], comparison=sdpa["cmp"], baseline=sdpa["base"],
                           end_to_end=e)
    assert "**UNCHANGED** end to end: 0.555 \u2192 0.550 ms wall time per step (1.01x)" in text


def test_each_profile_has_its_own_section_with_its_own_findings(sdpa: dict) -> None:
    page = render_html(sdpa["opt"], findings=sdpa["findings"], comparison=sdpa["cmp"], baseline=sdpa["base"])
    base_part, opt_part = page.split("<h2>Baseline: where the time went</h2>")[1].split(
        "<h2>Optimized: where the time went</h2>")
    assert "Findings on the baseline" in base_part and "Findings" not in opt_part
    assert f"{len(sdpa['base'].kernels)} kernels" in base_part and f"{len(sdpa['opt'].kernels)} kernels" in opt_part
    # the findings' operators are the baseline's: every key they name is a baseline operator key
    base_keys = {op.key for op in sdpa["base"].operators}
    assert all(k in base_keys for f in sdpa["findings"].findings for k in f.operators)
    # in the loop's priority order
    titles = re.findall(r'<div class="finding \w+"><b>([^<]+)</b>', base_part)
    assert titles == [f.title for f in in_priority_order(sdpa["findings"].findings)]


def test_counters_state_how_many_launches_were_measured() -> None:
    prof = attribute_run(CAPTURES / "gpt2" / "baseline")
    measured = sum(1 for k in prof.kernels if k.counter_source.value == "measured")
    inherited = sum(1 for k in prof.kernels if k.counter_source.value == "inherited")
    page = render_html(prof, findings=diagnose(prof))
    assert f"counters: {measured} of {len(prof.kernels)} launches measured, {inherited} inherited" in page
    assert measured == 18 and len(prof.kernels) == 508
    shown = len(re.findall(r'<tr><td><span class="name">', page.split("Top operators and their")[1].split(
        "</table>")[0]))
    assert f"{len(prof.operators) - shown} more operators not shown" in page


@pytest.mark.slow
def test_the_red_box_is_kept_for_what_can_change_a_conclusion() -> None:
    # the CUDA graph capture's note on launch-order placement is a note; 100% of its time is attributed
    prof = attribute_run(CAPTURES / "gpt2" / "cuda_graphs_trial")
    assert prof.warnings and prof.coverage.attributed_time_pct == pytest.approx(100.0)
    page = render_html(prof)
    assert 'class="warn"' not in page and 'class="notes"' in page
    other = attribute_run(CAPTURES / "sdpa_attention" / "baseline")
    forced = compare(attribute_run(CAPTURES / "gpt2" / "baseline"), other)
    assert 'class="warn"' in render_html(other, comparison=forced)
