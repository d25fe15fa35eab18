"""Profiles built from the real H200 captures in tests/data, for analysis and report tests.

A deliberately small join (Kineto External id -> launching cpu_op; the i-th launch of a kernel
name -> the i-th ncu row of that name; Inductor's "Original ATen" comments -> fused_with), so
diagnose/compare/report are tested on real kernels and real counters before, and independently
of, the attribution engine. Every kernel gets the CUPTI-correlation tier.

    base = pair_profile("base")    # FP32, separate Q/K/V, manual attention (44 kernels)
    opt = pair_profile("opt")      # BF16, fused QKV, SDPA, casts in the graph (18 kernels)
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

from profiler_core.attribution.aggregate import aggregate_samples
from profiler_core.attribution.operator_class import aten_name, classify_operator
from profiler_core.metrics.catalog import field_for_ncu_name
from profiler_core.schema import (
    Attribution,
    CaptureMeta,
    ClockSample,
    Confidence,
    CounterSource,
    Coverage,
    Evidence,
    ExecutionContext,
    Kernel,
    Operator,
    Profile,
    SourceInfo,
    Tier,
    TierCoverage,
)

DATA = Path(__file__).parent.parent / "data"
PAIR = DATA / "h200_pair"
JOINABLE = DATA / "h200_joinable"
_ATEN_RE = re.compile(r"Original ATen: \[(?P<ops>[^\]]*)\]")
_DEF_RE = re.compile(r"(?P<name>triton_\w+) = async_compile\.triton\('")


def fusion_map(text: str) -> dict[str, list[str]]:
    """Triton kernel name -> the ATen ops its "Original ATen" comment names."""
    out: dict[str, list[str]] = {}
    last: list[str] = []
    for line in text.splitlines():
        if (m := _ATEN_RE.search(line)) is not None:
            last = [aten_name(op.strip()) for op in m.group("ops").split(",") if op.strip()]
        elif (m := _DEF_RE.search(line)) is not None:
            out[m.group("name")] = last
    return out


def ncu_rows(path: Path) -> dict[str, list[dict[str, float | None]]]:
    """Kernel name -> its ncu rows (catalog field -> value, base units) in launch order."""
    out: dict[str, list[dict[str, float | None]]] = defaultdict(list)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if not row.get("ID"):
                continue  # the units row
            counters: dict[str, float | None] = {}
            for column, value in row.items():
                field = field_for_ncu_name(column or "")
                if field is not None:
                    text = (value or "").replace(",", "").strip()
                    counters[field] = float(text) if text and text != "n/a" else None
            out[row["Kernel Name"]].append(counters)
    return out


def build_profile(kineto: Path, ncu_csv: Path, fusion_text: str, *, workload: str,
                  clocks: dict | None = None) -> Profile:
    """Join one Kineto trace, its ncu CSV and Inductor's comments into a Profile."""
    events = json.loads(kineto.read_text())["traceEvents"]
    cpu_ops = {e["args"]["External id"]: e for e in events
               if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    launches = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    t0 = launches[0]["ts"]
    rows, seen, fused = ncu_rows(ncu_csv), defaultdict(int), fusion_map(fusion_text)
    kernels: list[Kernel] = []
    op_kernels: dict[int, list[Kernel]] = defaultdict(list)
    for i, e in enumerate(launches):
        start = round((e["ts"] - t0) * 1000)
        dur = round(e["dur"] * 1000)
        ext = e["args"]["External id"]
        op_name = cpu_ops[ext]["name"]
        nth = seen[e["name"]]
        seen[e["name"]] += 1
        measured = rows.get(e["name"], [])
        counters = measured[nth] if nth < len(measured) else {}
        kernel = Kernel(
            id=i, name=e["name"], stream=e["args"]["stream"], device=e["args"]["device"],
            start_ns=start, end_ns=start + dur, duration_ns=dur,
            grid=tuple(e["args"]["grid"]), block=tuple(e["args"]["block"]),
            registers_per_thread=e["args"].get("registers per thread"),
            counters=counters,
            counter_source=CounterSource.MEASURED if counters else CounterSource.MISSING,
            attribution=Attribution(operator_key=None, tier=Tier.CUPTI_CORRELATION,
                                    confidence=Confidence.HIGH,
                                    evidence=[Evidence(tier=Tier.CUPTI_CORRELATION, operator=op_name,
                                                       op_id=ext)]),
            fused_with=fused.get(e["name"], []),
        )
        kernels.append(kernel)
        op_kernels[ext].append(kernel)
    operators, calls = [], defaultdict(int)
    for ext, ks in sorted(op_kernels.items(), key=lambda item: item[1][0].start_ns):
        op = cpu_ops[ext]
        name = op["name"]
        key = f"{name}#{calls[name]}"
        fused_with = fused.get(name, [])
        operators.append(Operator(
            key=key, name=name, call_index=calls[name], op_id=ext,
            input_shapes=op["args"].get("Input Dims"),
            op_class=classify_operator(name, fused_with),
            execution_context=ExecutionContext.COMPILED_GRAPH, is_fused=bool(fused_with),
            fused_with=fused_with, kernel_ids=[k.id for k in ks], kernel_count=len(ks),
            duration_ns=sum(k.duration_ns for k in ks),
            metrics=aggregate_samples((k.counters, k.duration_ns) for k in ks),
            confidence=Confidence.HIGH,
        ))
        calls[name] += 1
        for k in ks:
            k.attribution.operator_key = key
    total = sum(k.duration_ns for k in kernels)
    everything = TierCoverage(kernel_count=len(kernels), duration_ns=total)
    clock = ClockSample(phase="kineto", **{k: v for k, v in (clocks or {}).items() if k != "gpu_name"})
    return Profile(
        capture=CaptureMeta(
            workload=workload, gpu_name="NVIDIA H200", chip="gh100", sm_count=132,
            warmup_iterations=2, measured_iterations=2, compile_mode="default",
            clock_policy="observe", clocks=[clock] if clocks else [], counter_mode="full",
            timeline_source="kineto",
            sources=[SourceInfo(kind="kineto", path=kineto.name), SourceInfo(kind="ncu", path=ncu_csv.name),
                     SourceInfo(kind="inductor", detail="output code comments")],
        ),
        operators=operators,
        kernels=kernels,
        coverage=Coverage(
            kernel_count=len(kernels), duration_ns=total,
            by_tier={Tier.CUPTI_CORRELATION.value: everything},
            by_confidence={Confidence.HIGH.value: everything},
            counters_measured=TierCoverage(
                kernel_count=sum(1 for k in kernels if k.counters),
                duration_ns=sum(k.duration_ns for k in kernels if k.counters)),
            attributed_time_pct=100.0,
        ),
    )


@cache
def pair_profile(variant: str) -> Profile:
    """The baseline ("base") or optimized ("opt") half of the H200 pair."""
    return build_profile(
        PAIR / f"{variant}_kineto.json", PAIR / f"{variant}_ncu_raw.csv",
        (PAIR / f"{variant}_fusion_comments.txt").read_text(),
        workload=f"pair_attention.py {variant}",
        clocks=json.loads((PAIR / f"{variant}_clocks.json").read_text()),
    )


@cache
def joinable_profile() -> Profile:
    """The h200_joinable capture (same model as the pair's baseline, another run)."""
    return build_profile(JOINABLE / "kineto.json", JOINABLE / "ncu_full_raw.csv",
                         (JOINABLE / "output_code.log").read_text(), workload="tiny_attention.py")
