"""Analysis on the attribution engine's own profile of the h200_joinable capture (golden profile.json).

The engine files Inductor's pointwise bias-add kernels under ``aten::addmm`` (the GEMM ran in
cuBLAS as ``aten::mm``) and names the softmax kernel ``aten::_softmax``; diagnose and compare must
read those the same way as the Kineto-named profile of the same capture.
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from profiler_core.analysis import ProfileView, compare, diagnose
from profiler_core.profile_io import read_profile
from profiler_core.report import SUMMARY_MAX_BYTES, compact_summary, export_perfetto, render_markdown
from profiler_core.schema import OperatorClass, Profile
from tests.analysis.real_profiles import JOINABLE, joinable_profile, pair_profile


@cache
def engine_profile() -> Profile:
    return read_profile(JOINABLE / "expected" / "profile.json")


def test_bias_epilogues_are_filed_under_their_own_work() -> None:
    # the GEMM ran in cuBLAS as aten::mm; the Triton kernel adds the bias while it copies
    view = ProfileView(engine_profile())
    assert not any(op.name == "aten::addmm" for op in view.profile.operators)
    epilogue = view.operators_by_key["aten::clone#0"]
    assert epilogue.op_class is OperatorClass.CAST_COPY and "aten::addmm" in epilogue.fused_with
    assert view.operators_by_key["aten::relu#0"].op_class is OperatorClass.ELEMENTWISE
    assert view.work_class(view.operators_by_key["aten::mm#0"]) is OperatorClass.GEMM


def test_findings_on_the_engine_profile() -> None:
    report = diagnose(engine_profile())
    assert [f.rule_id for f in report.findings] == [
        "host_bound",
        "launch_bound",
        "tensor_core_idle",
        "parallel_projections",
        "manual_attention",
        "far_below_roofline",
    ]
    (tc,) = report.by_rule("tensor_core_idle")
    assert sorted({key.split("#")[0] for key in tc.operators}) == ["aten::bmm", "aten::mm"]
    assert len(tc.operators) == 16 and tc.evidence.facts[0].endswith("fp32 x16")
    assert "bound tightened by the bf16_tensor roofline" in tc.evidence.facts[-1]
    (attention,) = report.by_rule("manual_attention")
    assert attention.operators[:3] == ["aten::bmm#0", "aten::_softmax#0", "aten::bmm#1"]


def test_same_findings_as_the_kineto_named_profile_of_the_capture() -> None:
    """Two independent joins of one capture (engine: nsys timeline; here: Kineto) agree on the diagnosis."""
    engine, kineto = diagnose(engine_profile()), diagnose(joinable_profile())
    assert [f.rule_id for f in engine.findings] == [f.rule_id for f in kineto.findings]
    for rule_id in ("tensor_core_idle", "parallel_projections"):
        assert engine.by_rule(rule_id)[0].operators == kineto.by_rule(rule_id)[0].operators
    for a, b in zip(engine.findings, kineto.findings, strict=True):
        if a.gain_basis == "kernel_time":
            assert a.gain_bound_pct == pytest.approx(b.gain_bound_pct, abs=1.5)


def test_compare_engine_profile_with_the_optimized_run() -> None:
    c = compare(engine_profile(), pair_profile("opt"))
    assert not c.comparability.comparable
    assert any(w.startswith("NOT COMPARABLE: timeline_source differs (nsys vs kineto)") for w in c.warnings)
    assert any(w.startswith("unverified: sm_clock") for w in c.warnings)
    qkv = next(r for r in c.operators if r.opt_keys == ["aten::addmm#0"])
    assert {"aten::mm#0", "aten::mm#1", "aten::clone#0", "aten::clone#1"} <= set(qkv.base_keys)
    assert len(c.shift_checks) == 3
    assert [s.as_predicted for s in c.shift_checks if s.rule_id != "manual_attention"] == [True, True]
    # cuDNN's attention also launches a memset ncu does not measure: the operator's DRAM bytes are a
    # partial sum, so null, and the attention's predicted drop in DRAM reads can be neither confirmed nor denied
    (attention,) = (s for s in c.shift_checks if s.rule_id == "manual_attention")
    assert attention.as_predicted is None and attention.observed == "n/a"
    assert "> [!WARNING]" in render_markdown(comparison=c)


def test_reports_on_the_engine_profile() -> None:
    prof = engine_profile()
    trace = json.loads(json.dumps(export_perfetto(prof)))
    kernels = [e for e in trace["traceEvents"] if e.get("cat", "").startswith("kernel")]
    assert len(kernels) == 44 and {e["args"]["tier"] for e in kernels} == {"cupti_correlation"}
    summary = compact_summary(prof)
    assert len(json.dumps(summary, separators=(",", ":"))) <= SUMMARY_MAX_BYTES
    assert summary["coverage"]["by_tier_pct"] == {"cupti_correlation": 100.0}
