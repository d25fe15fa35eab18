"""A real H200 capture of a Mixtral-style MoE: per-config counters that ncu split, host syncs by the router."""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from profiler_core.analysis import diagnose
from profiler_core.attribution import attribute_run
from profiler_core.schema import CounterSource

MOE = Path(__file__).parent.parent / "data" / "h200_mixtral_moe"
HISTOGRAM = "kernelHistogram1D"


@pytest.fixture(scope="module")
def profile() -> object:
    return attribute_run(MOE)


def _raw_counts() -> tuple[Counter, Counter]:
    """Launches per kernel name in the Kineto trace and rows per name in the ncu export, read raw."""
    trace = json.loads(gzip.decompress((MOE / "kineto.json.gz").read_bytes()))
    launches = Counter(e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel")
    with (MOE / "counters.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    measured = Counter(r["Kernel Name"] for r in rows if r.get("ID", "").isdigit())
    return launches, measured


def test_a_configuration_ncu_measured_twice_still_joins_per_config(profile: object) -> None:
    launches, measured = _raw_counts()
    histogram_rows = sum(n for name, n in measured.items() if HISTOGRAM in name)
    histogram_launches = sum(n for name, n in launches.items() if HISTOGRAM in name)
    assert histogram_rows == 2 and histogram_launches > histogram_rows  # ncu sampled it twice, not once
    kernels = [k for k in profile.kernels if k.kind == "kernel"]  # type: ignore[attr-defined]
    assert len(kernels) == sum(launches.values())  # memcpy and memset records are kept beside them
    hist = [k for k in profile.kernels if HISTOGRAM in k.name]  # type: ignore[attr-defined]
    assert len(hist) == histogram_launches
    sources = Counter(k.counter_source for k in hist)
    assert sources[CounterSource.MEASURED] == 2 and sources[CounterSource.INHERITED] == histogram_launches - 2
    assert profile.capture.counter_mode == "per-config"  # type: ignore[attr-defined]
    assert profile.coverage.attributed_time_pct >= 99.0  # type: ignore[attr-defined]


def test_the_routers_host_syncs_keep_cuda_graphs_off(profile: object) -> None:
    report = diagnose(profile)  # type: ignore[arg-type]
    syncs = [f for f in report.findings if f.rule_id == "host_syncs"]
    assert len(syncs) == 1 and "bincount" in syncs[0].evidence.facts[0]
    assert not [f for f in report.findings if f.transformation == "cuda_graphs"]


def test_the_register_figures_are_the_kernels_own(profile: object) -> None:
    # the FP32 GEMMs use up to 255 registers per thread by the raw Kineto kernel records; the findings
    # printed "up to 0" where the aggregate over their operators' kernels had no value
    with gzip.open(MOE / "kineto.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    raw = max(e["args"]["registers per thread"] for e in events
              if e.get("cat") == "kernel" and "gemm" in e.get("name", "") and "registers per thread" in e["args"])
    report = diagnose(profile)  # type: ignore[arg-type]
    for rule_id in ("tensor_core_idle", "register_spills"):
        finding = next(f for f in report.findings if f.rule_id == rule_id)
        assert f"registers per thread up to {raw}" in finding.evidence.facts, rule_id


def _raw_expert_gemms() -> int:
    """aten::mm calls in the raw Kineto trace whose weight shape recurs with varying rows (one per expert)."""
    trace = json.loads(gzip.decompress((MOE / "kineto.json.gz").read_bytes()))
    rows: dict[str, list[int]] = {}
    for e in trace["traceEvents"]:
        dims = e.get("args", {}).get("Input Dims") if e.get("cat") == "cpu_op" and e["name"] == "aten::mm" else None
        if dims and len(dims) > 1:
            rows.setdefault(str(dims[1]), []).append(dims[0][0])
    return sum(len(r) for r in rows.values() if len(set(r)) >= 3)


def test_the_expert_loop_licenses_moe_grouped_experts(profile: object) -> None:
    report = diagnose(profile)  # type: ignore[arg-type]
    (syncs,) = [f for f in report.findings if f.rule_id == "host_syncs"]
    assert syncs.transformation == "moe_grouped_experts"
    iterations = profile.capture.measured_iterations  # type: ignore[attr-defined]
    loop = next(fact for fact in syncs.evidence.facts if "one per expert" in fact)
    # 4 layers x 2 projections (gate_up, down) per step, each a run of per-expert GEMMs
    assert loop.startswith(f"{_raw_expert_gemms() // iterations} GEMMs per step run one per expert in 8 runs")
    assert syncs.gain_bound_pct > 50  # the expert GEMMs, not only the copies, are what the pass changes


MOE_EAGER = Path(__file__).parent.parent / "data" / "h200_mixtral_moe_eager"


def _raw_copy_modules() -> Counter:
    """Device-to-host copies per module, from the raw Kineto records and modules.json alone.

    A copy's correlation names its ``cpu_op``; the innermost ``nn.Module: Cls_N`` Python frame
    open around that call on its thread is its module, mapped to a path by modules.json.
    """
    trace = json.loads(gzip.decompress((MOE_EAGER / "kineto.json.gz").read_bytes()))["traceEvents"]
    names = {f"{cls}_{i}": path for cls, i, path in json.loads((MOE_EAGER / "modules.json").read_text())["modules"]}
    calls = {e["args"]["External id"]: e for e in trace if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    frames = [e for e in trace if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    out: Counter = Counter()
    for e in trace:
        if e.get("cat") != "gpu_memcpy" or "DtoH" not in e["name"]:
            continue
        call = calls[e["args"]["External id"]]
        open_ = [f for f in frames if f["tid"] == call["tid"] and f["ts"] <= call["ts"] <= f["ts"] + f["dur"]]
        inner = max(open_, key=lambda f: f["ts"]) if open_ else None
        out[names[inner["name"].removeprefix("nn.Module: ")] if inner else None] += 1
    return out


def test_host_syncs_by_module_on_an_eager_capture_with_an_nsys_timeline() -> None:
    """Each device-to-host copy is filed under the module the raw records put it in (real H200 capture)."""
    from profiler_core.analysis.host_syncs import ROOT_MODULE, find_host_syncs
    from profiler_core.analysis.profile_view import ProfileView

    profile = attribute_run(MOE_EAGER)
    view = ProfileView(profile)
    syncs = find_host_syncs(view, list(profile.operators))
    got = Counter(k.module_path for k in syncs.copies)
    reference = _raw_copy_modules()
    assert None not in got and None not in reference
    assert got == reference
    # 2 steps: 8 copies a step in the model's own forward, 2 under each layer's experts
    assert reference[""] == 16 and sum(reference.values()) == 32
    assert syncs.by_module[ROOT_MODULE] == 24  # and the 4 bincounts a step, which copy nothing
    assert syncs.by_module["model.layers.3.mlp.experts"] == 4
    facts = diagnose(profile).findings  # type: ignore[arg-type]
    host = next(f for f in facts if f.rule_id == "host_syncs")
    assert "12 per step under the model's own code" in host.evidence.facts
    assert "2 per step under model.layers.0.mlp.experts" in host.evidence.facts


def test_the_experts_custom_op_keeps_its_gemms(profile: object) -> None:
    """The per-expert GEMMs run inside one extern call of transformers' custom op; each is an ATen
    operator of its own, and all sit under the call's module (before: only the first, 43.6% of
    kernel time with a module path)."""
    from profiler_core.analysis.host_syncs import per_expert_gemm_runs
    from profiler_core.analysis.profile_view import ProfileView

    kernels = profile.kernels  # type: ignore[attr-defined]
    total = sum(k.duration_ns for k in kernels)
    assert sum(k.duration_ns for k in kernels if k.module_path is not None) >= 0.95 * total
    view = ProfileView(profile)  # type: ignore[arg-type]
    runs = per_expert_gemm_runs(view, list(profile.operators))  # type: ignore[attr-defined]
    assert len(runs) == 16  # 4 layers x (gate_up, down) x 2 measured iterations
    first_of_layer = [run for i, run in enumerate(runs) if i % 2 == 0]
    assert [{op.module_path for op in run} for run in first_of_layer] == [
        {f"layers.{n}.mlp.experts"} for n in range(4)] * 2
    assert all(op.module_path is not None for run in runs for op in run)
