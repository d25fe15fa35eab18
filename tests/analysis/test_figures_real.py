"""The figures diagnose, report and compare print, recomputed from the profile and the raw records."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from profiler_core.analysis import diagnose
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.attribution import attribute_run
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.report.digest import time_by_class
from profiler_core.schema import OperatorClass, Profile
from tests.analysis.roofline_bounds import TARGET_ROOF, headroom_ns, precision_bound_ns
from tests.attribution.reference_join import reference_join

CAPTURES = Path(__file__).resolve().parents[2] / "examples" / "captures" / "h200"
NAMES = ["gpt2/baseline", "gpt2/optimized", "lstm_encoder/baseline", "lstm_encoder_unrolled/baseline",
         "sdpa_attention/baseline", "sdpa_attention/optimized"]
# A GEMM kernel by its library's naming: cuBLAS (sm80_xmma_gemm, nvjet, ampere_sgemm), CUTLASS
_GEMM_KERNEL = re.compile(r"gemm|nvjet|xmma|cutlass(?!F)|triton_tem", re.I)
_NOT_GEMM = re.compile(r"fmha|flash|splitKreduce|RNN|elemWise", re.I)


@pytest.fixture(scope="module")
def profiles() -> dict[str, Profile]:
    return {n: attribute_run(CAPTURES / n) for n in NAMES}


def _is_gemm_kernel(name: str) -> bool:
    return bool(_GEMM_KERNEL.search(name)) and not _NOT_GEMM.search(name)


@pytest.mark.parametrize("name", NAMES)
def test_class_shares_follow_the_raw_records(profiles: dict, name: str) -> None:
    prof = profiles[name]
    shares = {s.label: s.share_pct for s in time_by_class(ProfileView(prof))}
    assert sum(shares.values()) == pytest.approx(100.0)
    # the class of each kernel's operator as the raw records name it
    run = CAPTURES / name
    code = next((p for p in (run / "inductor" / "output_code.log", run / "inductor" / "output_code.log.gz")
                 if p.exists()), None)
    ref = reference_join(run / "kineto.json.gz", code)
    by: dict[str, int] = defaultdict(int)
    kernels = sorted(prof.kernels, key=lambda k: k.start_ns)
    for k, r in zip(kernels, ref, strict=True):
        cls = classify_operator(r.operator) if r.operator else OperatorClass.OTHER
        by[(cls if cls is not OperatorClass.OTHER else classify_operator(k.name)).value] += k.duration_ns
    total = sum(k.duration_ns for k in prof.kernels)
    for label in ("gemm", "convolution", "attention", "rnn"):
        assert shares.get(label, 0.0) == pytest.approx(100.0 * by.get(label, 0) / total, abs=0.05), label


def test_no_pointwise_kernel_counts_as_gemm_time(profiles: dict) -> None:
    # the unrolled LSTM's cell kernels are elementwise work, not 15% of its GEMM time
    prof = profiles["lstm_encoder_unrolled/baseline"]
    view = ProfileView(prof)
    gemm = {k.id for k in prof.kernels if view.kernel_class(k) is OperatorClass.GEMM}
    assert not any(prof.kernels[i].name.startswith("triton_poi") for i in gemm)
    assert view.gemm_kernel_ns() == sum(k.duration_ns for k in prof.kernels if _is_gemm_kernel(k.name))


@pytest.mark.parametrize("name", ["gpt2/baseline", "lstm_encoder/baseline", "lstm_encoder_unrolled/baseline"])
def test_share_of_gemm_time_has_a_gemm_kernel_denominator(profiles: dict, name: str) -> None:
    prof = profiles[name]
    finding = diagnose(prof).by_rule("tensor_core_idle")[0]
    printed = next(float(m.group(1)) for f in finding.evidence.facts
                   if (m := re.search(r"hold ([\d.]+)% of all GEMM-kernel time", f)))
    ops = {op.key: op for op in prof.operators}
    mine = {i for key in finding.operators for i in ops[key].kernel_ids}
    gemm = [k for k in prof.kernels if _is_gemm_kernel(k.name)]
    expected = 100.0 * sum(k.duration_ns for k in gemm if k.id in mine) / sum(k.duration_ns for k in gemm)
    assert printed == pytest.approx(expected, abs=0.05)


def _qkv_groups_in_output_code(path: Path) -> list[int]:
    """Sizes of the runs of library GEMMs in Inductor's call() that read one buffer (Q, K, V read x)."""
    reads = [m.group(1) for line in path.read_text().splitlines()
             if (m := re.search(r"extern_kernels\.mm\(reinterpret_tensor\((buf\d+),", line))]
    sizes, i = [], 0
    while i < len(reads):
        j = i
        while j + 1 < len(reads) and reads[j + 1] == reads[i]:
            j += 1
        if j > i:
            sizes.append(j - i + 1)
        i = j + 1
    return sizes


def test_parallel_projection_groups_match_the_compiled_graph(profiles: dict) -> None:
    prof = profiles["gpt2/baseline"]
    sizes = _qkv_groups_in_output_code(CAPTURES / "gpt2" / "baseline" / "inductor" / "output_code.log")
    iterations = prof.capture.measured_iterations
    assert sizes == [3] * 12  # the graph of one iteration: 12 layers, Q/K/V each
    finding = diagnose(prof).by_rule("parallel_projections")[0]
    assert len(finding.operators) == 3 * 12 * iterations == 72
    assert finding.symptom.startswith(f"72 projection GEMMs in {12 * iterations} group(s) of 3")
    # the first six groups listed one by one, each naming its three operators in launch order
    listed = [fact.split(": one input")[0].split(" + ") for fact in finding.evidence.facts[1:]]
    assert listed == [finding.operators[3 * g:3 * g + 3] for g in range(6)]
    ops = {op.key: op for op in prof.operators}
    kernel_ns = sum(prof.kernels[i].duration_ns for key in finding.operators for i in ops[key].kernel_ids)
    assert finding.gain_bound_pct == pytest.approx(100.0 * kernel_ns / sum(k.duration_ns for k in prof.kernels),
                                                   abs=1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_gain_bounds_are_the_affected_share_of_kernel_time(profiles: dict, name: str) -> None:
    prof = profiles[name]
    total = sum(k.duration_ns for k in prof.kernels)
    ops = {op.key: op for op in prof.operators}
    for f in diagnose(prof).findings:
        assert f.max_speedup is None or f.max_speedup == pytest.approx(100 / (100 - f.gain_bound_pct), rel=1e-3)
        if f.gain_basis != "kernel_time" or f.rule_id in ("launch_bound", "counters_missing", "high_unattributed",
                                                          "host_bound"):
            continue
        ids = {i for key in f.operators for i in ops[key].kernel_ids}
        affected = sum(prof.kernels[i].duration_ns for i in ids)
        if f.rule_id == "far_below_roofline":
            affected = headroom_ns(prof, f.operators)
        elif f.transformation in TARGET_ROOF:
            affected = min(affected, precision_bound_ns(prof, f.operators, *TARGET_ROOF[f.transformation]))
        assert f.gain_bound_pct == pytest.approx(100.0 * affected / total, abs=1e-3), f.rule_id


@pytest.mark.parametrize("name", NAMES)
def test_findings_read_by_kernel_position_are_what_the_models_give(profiles: dict, name: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # every rule that reads a finding's kernels by position (their classes, names, times) against the
    # same rules reading them off the models one by one
    prof = profiles[name]
    by_position = diagnose(prof)

    def models_only(view: ProfileView, ops):  # type: ignore[no-untyped-def]
        return view.kernels_of_ops(ops), None

    monkeypatch.setattr(ProfileView, "kernels_of_ops_at", models_only)
    by_models = diagnose(prof)
    assert by_position == by_models and by_position.findings
    if name.startswith("lstm_encoder"):
        assert by_position.by_rule("recurrent_region")


@pytest.mark.parametrize("name", NAMES)
def test_attention_calls_and_work_classes_read_at_once_are_what_one_by_one_gives(profiles: dict, name: str) -> None:
    from profiler_core.analysis.decode_loop import attention_calls
    from profiler_core.analysis.rules import RuleContext
    from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS

    view = ProfileView(profiles[name])
    at_once = attention_calls(view, view.ops_in_order)  # the view's own list: read off its arrays
    assert at_once == attention_calls(view, list(view.ops_in_order))  # another list: one by one
    if name.startswith("sdpa_attention"):
        assert at_once
    ctx = RuleContext(view=view, thresholds=DEFAULT_THRESHOLDS)
    assert ctx.work_classes == [ProfileView(profiles[name]).work_class(op) for op in ctx.ops]
