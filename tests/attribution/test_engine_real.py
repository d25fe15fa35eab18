"""The attribution engine on real H200 captures: every tier, every counter-run shape, the golden profile."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from profiler_core.attribution import attribute, attribute_files
from profiler_core.errors import DeterminismError
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.schema import Confidence, CounterSource, ExecutionContext, OperatorClass, Tier
from tests.attribution.golden import diff_profiles


@pytest.fixture(scope="module")
def art(joinable: Path) -> dict:
    return {
        "kineto": read_kineto(joinable / "kineto.json"),
        "nsys": read_nsys(joinable / "nsys.sqlite"),
        "ncu": read_ncu(joinable / "ncu_full_raw.csv"),
        "ncu_pc": read_ncu(joinable / "ncu_per_config_raw.csv"),
        "inductor": read_inductor(joinable / "torch_trace.tgz"),
    }


@pytest.fixture(scope="module")
def full(art: dict):
    return attribute(kineto=art["kineto"], nsys=art["nsys"], ncu=art["ncu"], inductor=art["inductor"])


def test_golden_profile(full, joinable: Path) -> None:
    expected = json.loads((joinable / "expected" / "profile.json").read_text())
    problems = diff_profiles(full.model_dump(mode="json"), expected)
    assert not problems, "\n".join(problems[:20])


def test_every_kernel_high_and_all_tiers_agree(full) -> None:
    assert len(full.kernels) == 44
    assert {k.attribution.confidence for k in full.kernels} == {Confidence.HIGH}
    assert full.coverage.attributed_time_pct == pytest.approx(100.0)
    assert full.coverage.tier_overlaps == 44 and full.coverage.tier_disagreements == 0
    # Kineto, ncu's NVTX, nsys enclosure and Inductor all spoke for every kernel
    assert all({e.tier for e in k.attribution.evidence} == {Tier.CUPTI_CORRELATION, Tier.NCU_NVTX, Tier.NSYS_NVTX,
                                                             Tier.INDUCTOR_FUSION} or k.library for k in full.kernels)


def test_operator_names_are_clean_aten_names(full) -> None:
    names = {op.name for op in full.operators}
    assert all(n.startswith("aten::") for n in names), names
    assert not any("triton" in n or "op_id" in n or "sizes" in n for n in names)
    softmax = [op for op in full.operators if op.name == "aten::_softmax"]
    assert len(softmax) == 2 and "aten::amax" in softmax[0].fused_with
    assert [op.call_index for op in full.operators if op.name == "aten::mm"] == list(range(12))


def test_library_gemms_attributed_to_launching_op(full) -> None:
    gemm_kernels = [k for k in full.kernels if k.library == "cublas"]
    assert gemm_kernels, "the capture has cuBLAS kernels"
    by_key = {op.key: op for op in full.operators}
    for k in gemm_kernels:
        op = by_key[k.attribution.operator_key]
        assert op.name in ("aten::mm", "aten::bmm") and op.op_class is OperatorClass.GEMM
        assert op.library == "cublas" and op.execution_context is ExecutionContext.COMPILED_GRAPH


def test_counters_are_measured_in_base_units(full, art: dict) -> None:
    assert full.coverage.counters_measured.kernel_count == 44
    k = full.kernels[0]
    row = art["ncu"].rows[0]
    assert k.counters["dram_bytes_read"] == row.metrics["dram__bytes_read.sum"]
    assert k.counters["gpu_time_duration_ns"] == row.metrics["gpu__time_duration.sum"]
    assert all(c.available for c in full.counters) and len(full.counters) == 20


def test_duration_weighted_aggregation(full) -> None:
    op = next(o for o in full.operators if o.kernel_count == 2 and o.name == "aten::mm")
    ks = [full.kernels[i] for i in op.kernel_ids]
    expected = sum(k.duration_ns * k.counters["achieved_occupancy_pct"] for k in ks) / sum(k.duration_ns for k in ks)
    assert op.metrics["achieved_occupancy_pct"] == pytest.approx(expected)
    assert op.metrics["dram_bytes_read"] == sum(k.counters["dram_bytes_read"] for k in ks)
    assert op.metrics["registers_per_thread"] == max(k.counters["registers_per_thread"] for k in ks)


def test_measured_iterations_become_duplicate_layers(full) -> None:
    roles = [op.layer_role for op in full.operators]
    assert roles.count("representative") == roles.count("duplicate") == 17
    dup = full.operators[17]
    assert dup.inherited_from == full.operators[0].key


def test_per_config_run_inherits_and_counts_apart(art: dict) -> None:
    prof = attribute(kineto=art["kineto"], nsys=art["nsys"], ncu=art["ncu_pc"], inductor=art["inductor"])
    assert prof.coverage.counters_measured.kernel_count == 14
    assert prof.coverage.counters_inherited.kernel_count == 30
    for k in prof.kernels:
        if k.counter_source is CounterSource.INHERITED:
            rep = prof.kernels[k.inherited_from]
            assert (rep.name, rep.grid, rep.block) == (k.name, k.grid, k.block)
            assert rep.counter_source is CounterSource.MEASURED and k.counters == rep.counters
            # an inherited launch never borrows its representative's NVTX evidence
            assert Tier.NCU_NVTX not in {e.tier for e in k.attribution.evidence}
    assert prof.capture.counter_mode == "per-config"


def test_kineto_only_timeline(art: dict) -> None:
    prof = attribute(kineto=art["kineto"], ncu=art["ncu"])
    assert prof.capture.timeline_source == "kineto"
    assert prof.coverage.attributed_time_pct == pytest.approx(100.0)
    # without Inductor artifacts the fused ops are read from the kernel names, and the evidence says so
    ln = next(k for k in prof.kernels if k.name.startswith("triton_per_fused_native_layer_norm"))
    assert "kernel's name" in ln.attribution.evidence[0].detail


def test_nvtx_tiers_alone(art: dict) -> None:
    prof = attribute(nsys=art["nsys"], ncu=art["ncu"], inductor=art["inductor"])
    assert {k.attribution.tier for k in prof.kernels} == {Tier.NCU_NVTX}
    assert prof.coverage.tier_disagreements == 0
    only_nsys = attribute(nsys=art["nsys"])
    assert {k.attribution.confidence for k in only_nsys.kernels} == {Confidence.MEDIUM}
    assert [op.name for op in only_nsys.operators][:3] == ["aten::native_layer_norm", "aten::mm", "aten::mm"]


def test_changed_launch_configuration_is_caught(art: dict) -> None:
    rows = list(art["ncu"].rows)
    rows[5] = replace(rows[5], grid=(999, 1, 1))
    bad = replace(art["ncu"], rows=rows)
    with pytest.raises(DeterminismError, match=r"grid \(999, 1, 1\)"):
        attribute(kineto=art["kineto"], nsys=art["nsys"], ncu=bad)
    partial = attribute(kineto=art["kineto"], nsys=art["nsys"], ncu=bad, allow_partial=True)
    holes = [k for k in partial.kernels if k.counter_source is CounterSource.MISSING]
    assert len(holes) == 1 and holes[0].counters["dram_bytes_read"] is None


def test_missing_launch_is_caught(art: dict) -> None:
    bad = replace(art["ncu"], rows=art["ncu"].rows[:-3] + art["ncu"].rows[-2:])
    with pytest.raises(DeterminismError, match="launch counts differ"):
        attribute(kineto=art["kineto"], nsys=art["nsys"], ncu=bad)


def test_eager_capture_attributed_through_nsys_nvtx(tiny: Path) -> None:
    # a whole-program nsys run: only the measured region (2 iterations) ran under emit_nvtx
    prof = attribute_files(nsys=tiny / "nsys_eager_mlp_ln.sqlite")
    first = next(k.id for k in prof.kernels if k.attribution.tier is Tier.NSYS_NVTX)
    region, before = prof.kernels[first:], prof.kernels[:first]
    assert len(region) == 16 and all(k.attribution.tier is Tier.NSYS_NVTX for k in region)
    assert all("no PyTorch operator was open" in k.attribution.reason or k.kind != "kernel" for k in before)
    assert {prof.kernels[i].name.split("<")[0] for i in prof.operators[0].kernel_ids} >= {"void sgemm_largek_lds64"}
    names = {op.name for op in prof.operators}
    assert {"aten::addmm", "aten::native_layer_norm"} & names
    assert {op.execution_context for op in prof.operators} <= {ExecutionContext.EAGER, ExecutionContext.OPAQUE_LIBRARY}


def test_compiled_kineto_trace_alone(tiny: Path) -> None:
    prof = attribute_files(kineto=tiny / "kineto_compiled_mlp.json")
    assert prof.coverage.attributed_time_pct == pytest.approx(100.0)
    assert not any(op.name.startswith("triton_") for op in prof.operators)
