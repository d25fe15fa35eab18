"""The object engine: the attribution engine as it was before it ran on columns, kept as the reference.

One Claim per kernel per tier and one pydantic model per kernel; the columnar engine
(profiler_core/attribution/engine.py) must give byte-identical profile.json on every shipped
capture (test_columnar_golden.py).

    timeline (nsys, else Kineto) in launch order
      + Kineto aligned by invocation order     -> tier 1 (CUPTI correlation)
      + ncu rows joined by invocation order    -> counters, tier 2 (ncu's own NVTX stack)
      + nsys NVTX enclosure at launch time      -> tier 3
      + Inductor fusion map                     -> tier 4 (promotes, fills fused_with)
      -> operators (clean name, call index), per-counter aggregation, coverage, dedup
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from profiler_core.attribution.aggregate import aggregate_groups, specs_with_flops
from profiler_core.attribution.counter_join import CounterJoin, join_counters
from profiler_core.attribution.evidence import EXTERN_CLASSES, Claim, extern_classes_of, make_resolver
from profiler_core.attribution.graphs import graph_replay_claims, with_graph_copies
from profiler_core.attribution.library import kernel_library
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.attribution.step_phase import kernel_phases
from profiler_core.attribution.timeline import align_timelines, launch_order
from profiler_core.errors import AttributionError
from profiler_core.gc_pause import gc_paused
from profiler_core.metrics.catalog import CATALOG, FLOP_CATALOG, CounterSpec, field_for_ncu_name
from profiler_core.metrics.chips import chip_from_name
from profiler_core.records import InductorArtifacts, KinetoTrace, NcuReport, NsysTimeline, TimelineKernel
from profiler_core.schema import (
    Attribution,
    CaptureMeta,
    Confidence,
    CounterAvailability,
    CounterSource,
    Coverage,
    Evidence,
    ExecutionContext,
    Kernel,
    Operator,
    OperatorClass,
    Profile,
    SourceInfo,
    Tier,
    TierCoverage,
    UnattributedKernel,
    construct_trusted,
)
from tests.attribution.object_dedup import mark_repeated_layers
from tests.attribution.object_evidence import correlation_claims, fusion_claims, ncu_nvtx_claims, nsys_enclosure_claims

TIER_ORDER = (Tier.CUPTI_CORRELATION, Tier.NCU_NVTX, Tier.NSYS_NVTX, Tier.INDUCTOR_FUSION, Tier.CUDA_GRAPH)
_TIER_RANK = {t: i for i, t in enumerate(TIER_ORDER)}
TIER_CONFIDENCE = {
    Tier.CUPTI_CORRELATION: Confidence.HIGH,
    # ncu recorded the stack for the very launch whose counters it measured: per-launch
    # evidence, joined by the grid/block-validated invocation order (docs/attribution.md).
    Tier.NCU_NVTX: Confidence.HIGH,
    Tier.NSYS_NVTX: Confidence.MEDIUM,
    Tier.INDUCTOR_FUSION: Confidence.MEDIUM,
    Tier.CUDA_GRAPH: Confidence.MEDIUM,
    Tier.UNATTRIBUTED: Confidence.NONE,
}
_CONF_RANK = {Confidence.HIGH: 3, Confidence.MEDIUM: 2, Confidence.LOW: 1, Confidence.NONE: 0}
_OPAQUE_OPS = frozenset({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::_cudnn_rnn"})
# The counter join's mode -> the profile's counter_mode; any other join mode measured nothing usable.
_COUNTER_MODE_OF_JOIN: dict[str, Literal["full", "per-config"]] = {
    "full": "full", "prefix": "full", "per-config": "per-config"}


@gc_paused()  # millions of acyclic records: the cyclic collector only costs time here
def attribute(
    *,
    kineto: KinetoTrace | None = None,
    nsys: NsysTimeline | None = None,
    ncu: NcuReport | None = None,
    inductor: InductorArtifacts | None = None,
    capture: CaptureMeta | None = None,
    allow_partial: bool = False,
) -> Profile:
    """Join loaded artifacts into a :class:`Profile` (module docstring: the stages)."""
    if kineto is None and nsys is None:
        raise AttributionError("no timeline to attribute: give a Kineto trace (--kineto) or an nsys export (--nsys)")
    warnings: list[str] = []
    use_nsys = nsys is not None and bool(nsys.kernels)
    timeline = launch_order(nsys.kernels if use_nsys else kineto.kernels)  # type: ignore[union-attr]
    if not timeline:
        raise AttributionError("the timeline holds no GPU kernels; nothing to attribute")
    if use_nsys:
        warnings.extend(nsys.warnings)  # type: ignore[union-attr]
    gpu_idx = [j for j, k in enumerate(timeline) if k.kind == "kernel"]
    gpu_kernels = [timeline[j] for j in gpu_idx]
    fusions = inductor.fusions if inductor else {}

    # Tier 1 needs each timeline kernel's Kineto twin.
    kineto_index: list[int | None] = [None] * len(timeline)
    kineto_kernels: list[TimelineKernel] = []
    graph_corr: frozenset[int] = frozenset()
    if kineto is not None:
        graph_corr = frozenset(r.correlation_id for r in kineto.runtime_calls
                               if r.correlation_id is not None and "GraphLaunch" in r.name)
        if use_nsys:
            kineto_kernels = [k for k in launch_order(kineto.kernels) if k.kind == "kernel"]
            aligned, w = align_timelines(gpu_kernels, kineto_kernels, other_label="the Kineto trace",
                                         allow_partial=allow_partial)
            warnings.extend(w)
            for pos, j in enumerate(gpu_idx):
                kineto_index[j] = aligned[pos]
        else:
            kineto_kernels = timeline
            kineto_index = list(range(len(timeline)))

    # Training steps: forward, backward or optimizer, from the host ranges around each launch.
    phase_of = (kernel_phases(kineto, [kineto_kernels[ki].correlation_id if ki is not None else None
                                   for ki in kineto_index])
                if kineto is not None else [None] * len(timeline))

    # Counters: ncu rows joined to GPU kernels by invocation order.
    join = join_counters(gpu_kernels, ncu.rows if ncu else [], allow_partial=allow_partial)
    warnings.extend(join.warnings)
    row_of: list[int | None] = [None] * len(timeline)
    source_of = [CounterSource.MISSING] * len(timeline)
    inherited_of: list[int | None] = [None] * len(timeline)
    for pos, j in enumerate(gpu_idx):
        row_of[j] = join.row_index[pos]
        source_of[j] = join.source[pos]
        rep = join.inherited_from[pos]
        inherited_of[j] = gpu_idx[rep] if rep is not None else None

    # The CUDA graph replay (graph id, else the replay call's correlation) that launched each kernel.
    replay_of = with_graph_copies([tk.graph_id if tk.graph_id is not None else (
        kineto_kernels[ki].correlation_id if ki is not None and kineto_kernels[ki].correlation_id in graph_corr
        else None) for tk, ki in zip(timeline, kineto_index, strict=True)], timeline)
    in_graph_of = [r is not None for r in replay_of]

    graph_calls = [c for seq in inductor.call_sequences for c in seq] if inductor is not None else []
    resolve = make_resolver(fusions, extern_classes_of(graph_calls))
    claims: list[list[Claim | None]] = []
    if kineto is not None:
        claims.append(correlation_claims(timeline, kineto_index, kineto_kernels, kineto.cpu_ops, resolve, graph_corr))
    if ncu is not None:
        claims.append(ncu_nvtx_claims(ncu.rows, row_of, [s is CounterSource.MEASURED for s in source_of], resolve))
    if use_nsys:
        claims.append(nsys_enclosure_claims(timeline, nsys.runtime_calls, nsys.nvtx_ranges, resolve))  # type: ignore[union-attr]
    if fusions:
        claims.append(fusion_claims(timeline, fusions, resolve))
    if inductor is not None and inductor.call_sequences:
        claims.append(graph_replay_claims(timeline, replay_of, inductor.call_sequences, resolve))

    rows = ncu.rows if ncu is not None else []
    # the 20, plus the FLOP counters when ncu returned any (older captures keep exactly the 20)
    specs = specs_with_flops(f for name in (ncu.metrics_returned if ncu else ()) if (f := field_for_ncu_name(name)))
    fields = tuple(spec.field for spec in specs)
    row_counters = [_row_counters(r.metrics, fields) for r in rows]
    empty_counters: dict[str, float | None] = dict.fromkeys(fields)
    library_of = functools.lru_cache(maxsize=None)(kernel_library)

    # 1. per kernel: what each tier said, and the winner
    said_of: list[list[Claim]] = []
    for j in range(len(timeline)):
        said = [claim for c in claims if (claim := c[j]) is not None]
        said.sort(key=lambda c: _TIER_RANK[c.tier])
        said_of.append(said)
    # 2. operator invocations (winner's instance) and their keys, in launch order
    groups: dict[tuple, list[int]] = {}
    for j, said in enumerate(said_of):
        if said:
            groups.setdefault(said[0].instance, []).append(j)
    groups = _copies_with_their_kernel(timeline, said_of, groups)
    rep_of = {id(m): next((j for j in m if timeline[j].kind == "kernel"), m[0]) for m in groups.values()}
    calls: dict[str, int] = defaultdict(int)
    key_of: list[str | None] = [None] * len(timeline)
    group_keys: list[str] = []
    for members in groups.values():
        name = said_of[rep_of[id(members)]][0].operator
        key = f"{name}#{calls[name]}"
        calls[name] += 1
        group_keys.append(key)
        for j in members:
            key_of[j] = key
    # 3. kernel records. Built with model_construct: every value comes from typed records, and
    #    validating a million nested models would cost more than the whole join.
    kernels: list[Kernel] = []
    for j, tk in enumerate(timeline):
        said = said_of[j]
        if not said:
            attribution = construct_trusted(Attribution, {
                "operator_key": None, "tier": Tier.UNATTRIBUTED, "confidence": Confidence.NONE, "evidence": [],
                "tiers_agree": None, "reason": _unattributed_reason(tk, in_graph_of[j], kineto is not None,
                                                                    ncu is not None, use_nsys)})
        else:
            agree = len({c.operator for c in said}) == 1 if len(said) >= 2 else None
            attribution = construct_trusted(Attribution, {
                "operator_key": key_of[j], "tier": said[0].tier, "confidence": TIER_CONFIDENCE[said[0].tier],
                "evidence": [_evidence(c) for c in said], "tiers_agree": agree,
                "reason": None if agree is not False else "tiers disagree: " + "; ".join(
                    f"{c.tier.value} says {c.operator}" for c in said)})
        ri = row_of[j]
        counters = (row_counters[ri] if ri is not None else dict(empty_counters)) if ncu is not None else {}
        kernels.append(construct_trusted(Kernel, {
            "id": j, "name": tk.name, "short_name": tk.short_name, "kind": tk.kind, "stream": tk.stream,
            "device": tk.device, "start_ns": tk.start_ns, "end_ns": tk.end_ns, "duration_ns": tk.duration_ns,
            "grid": tk.grid, "block": tk.block, "registers_per_thread": tk.registers_per_thread,
            "static_smem_bytes": tk.static_smem_bytes, "dynamic_smem_bytes": tk.dynamic_smem_bytes,
            "counters": counters, "counter_source": source_of[j],
            "ncu_id": rows[ri].ncu_id if ri is not None else None, "inherited_from": inherited_of[j],
            "attribution": attribution,
            "fused_with": sorted({op for c in said for op in c.fused_with}) if said else [],
            "graph_id": tk.graph_id, "library": library_of(tk.name), "module_path": None,
        }))
    graph_kernels = sum(in_graph_of)
    # 4. counters per operator, vectorised over all operators
    matrix = np.full((len(timeline), len(fields)), np.nan)
    if rows:
        row_matrix = np.array([[np.nan if (v := rc[f]) is None else v for f in fields] for rc in row_counters])
        measured = np.array([ri is not None for ri in row_of])
        matrix[measured] = row_matrix[[ri for ri in row_of if ri is not None]]
    durations = np.array([k.duration_ns for k in kernels], dtype=float)
    aggregated = aggregate_groups(matrix, durations, list(groups.values()), specs)
    operators = [
        _operator(key, said_of[rep_of[id(members)]][0], [kernels[j] for j in members], members, metrics, reasons,
                  any(in_graph_of[j] for j in members), operator_phase([phase_of[j] for j in members]))
        for key, members, (metrics, reasons) in zip(group_keys, groups.values(), aggregated, strict=True)
    ]
    if graph_kernels:
        named = sum(1 for said in said_of if any(c.tier is Tier.CUDA_GRAPH for c in said))
        warnings.append(
            f"{graph_kernels} kernels were launched by CUDA graph replays, which record no per-kernel launch; "
            f"{named} of them were placed by the captured graph's launch order (Inductor's call()), the rest "
            "only by Inductor's fusion map where it names them"
        )

    mark_repeated_layers(operators, kernels, measured_iterations=capture.measured_iterations if capture else None)
    meta = _capture_meta(capture, kineto, nsys, ncu, inductor, join, use_nsys)
    profile = Profile.model_construct(
        schema_version=1, capture=meta, operators=operators, kernels=kernels,
        unattributed=[construct_trusted(UnattributedKernel, {
                          "kernel_id": k.id, "name": k.name, "duration_ns": k.duration_ns,
                          "reason": k.attribution.reason or "no evidence"})
                      for k in kernels if k.attribution.tier is Tier.UNATTRIBUTED],
        coverage=_coverage(kernels),
        counters=_availability(ncu, meta.chip, specs),
        warnings=warnings,
    )
    return profile


def _copies_with_their_kernel(timeline: Sequence[TimelineKernel], said_of: list[list[Claim]],
                              groups: dict[tuple, list[int]]) -> dict[tuple, list[int]]:
    """A memset/memcpy whose winning claim names the same call (operator and op id) as the kernel
    launched next on its stream belongs to that kernel's invocation."""
    group_of = {j: inst for inst, members in groups.items() for j in members}
    by_stream: dict[int, list[int]] = defaultdict(list)
    for j in sorted(range(len(timeline)), key=lambda j: (timeline[j].stream, timeline[j].start_ns)):
        by_stream[timeline[j].stream].append(j)
    moved: dict[int, tuple] = {}
    for seq in by_stream.values():
        for at, j in enumerate(seq):
            if timeline[j].kind == "kernel" or j not in group_of:
                continue
            nxt = next((x for x in seq[at + 1:] if timeline[x].kind == "kernel"), None)
            if nxt is None or nxt not in group_of or group_of[nxt] == group_of[j]:
                continue
            mine, theirs = said_of[j][0], said_of[nxt][0]
            if mine.op_id is not None and mine.op_id == theirs.op_id and mine.operator == theirs.operator:
                moved[j] = group_of[nxt]
    if not moved:
        return groups
    out: dict[tuple, list[int]] = {}
    for j in sorted(group_of):
        out.setdefault(moved.get(j, group_of[j]), []).append(j)
    return out


def _evidence(c: Claim) -> Evidence:
    return construct_trusted(Evidence, {"tier": c.tier, "operator": c.operator, "op_id": c.op_id, "detail": c.detail})


def _unattributed_reason(tk: TimelineKernel, in_graph: bool, have_kineto: bool, have_ncu: bool,
                         have_nsys: bool) -> str:
    if in_graph:
        return ("launched by a CUDA graph replay: the graph was captured outside the measured region, so "
                "no per-kernel launch record exists and Inductor's map does not name this kernel")
    if not (have_kineto or have_ncu or have_nsys):
        return "no evidence source covers this kernel"
    if tk.kind != "kernel":
        return f"{tk.kind} issued outside any PyTorch operator"
    return "no PyTorch operator was open when it was launched (outside any operator, or an opaque library path)"


def _row_counters(metrics: Mapping[str, float | None], fields: Sequence[str]) -> dict[str, float | None]:
    """One ncu row's counters by profile field; one dict per row, shared by the launches inheriting it."""
    out: dict[str, float | None] = dict.fromkeys(fields)
    for name, value in metrics.items():
        fld = field_for_ncu_name(name)
        if fld is not None and fld in out:
            out[fld] = value
    return out


def _operator(key: str, claim: Claim, ks: list[Kernel], members: list[int], metrics: dict[str, float | None],
              reasons: dict[str, str], in_graph: bool, phase: str | None = None) -> Operator:
    name = claim.operator
    fused = sorted({op for k in ks for op in k.fused_with})
    libraries = sorted({k.library for k in ks if k.library})
    if in_graph:
        context = ExecutionContext.CUDA_GRAPH_REPLAY
    elif name in _OPAQUE_OPS or {"cudnn", "nccl"} & set(libraries):
        context = ExecutionContext.OPAQUE_LIBRARY
    elif claim.compiled is True:
        context = ExecutionContext.COMPILED_GRAPH
    elif claim.compiled is False:
        context = ExecutionContext.EAGER
    else:
        context = ExecutionContext.UNKNOWN
    op_class = _classify(name, next((k.name for k in ks if k.kind == "kernel"), ks[0].name))
    if op_class in EXTERN_CLASSES and all(k.name.startswith(_GENERATED_PREFIXES) for k in ks):
        # a generated pointwise/reduction kernel filed under a library op (a GEMM or convolution
        # that cuBLAS/cuDNN ran) holds the layout copy of its operand: classed by what it computes
        op_class = OperatorClass.CAST_COPY if ks[0].name.startswith("triton_poi") else OperatorClass.REDUCTION
    return construct_trusted(Operator, {
        "key": key, "name": name, "call_index": int(key.rsplit("#", 1)[1]), "op_id": claim.op_id,
        "input_shapes": _listify(claim.input_shapes), "op_class": op_class, "execution_context": context,
        "is_fused": bool(fused), "fused_with": fused, "source_nodes": [], "kernel_ids": members,
        "kernel_count": len(members), "duration_ns": sum(k.duration_ns for k in ks), "metrics": metrics,
        "metric_null_reasons": reasons,
        "confidence": min({k.attribution.confidence for k in ks}, key=_CONF_RANK.__getitem__),
        "library": ", ".join(libraries) or None, "layer_role": None, "inherited_from": None,
        "module_path": None, "phase": phase,
    })


_GENERATED_PREFIXES = ("triton_poi", "triton_per", "triton_red")


@functools.lru_cache(maxsize=65536)
def _classify(name: str, first_kernel: str) -> OperatorClass:
    op_class = classify_operator(name)
    return classify_operator(first_kernel) if op_class is OperatorClass.OTHER else op_class


@functools.lru_cache(maxsize=65536)
def _listify_cached(value: tuple) -> str:
    return json.dumps(value)


def _listify(value: object) -> list | None:
    """Input shapes as JSON lists (tuples from the parsers; identical shapes parse once)."""
    if not isinstance(value, tuple | list):
        return None
    return json.loads(_listify_cached(tuple(value)))


def _coverage(kernels: Sequence[Kernel]) -> Coverage:
    # plain tallies first: assigning to pydantic models a million times is slow
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    overlaps = disagreements = total = 0
    for k in kernels:
        a, d = k.attribution, k.duration_ns
        total += d
        for key in (("tier", a.tier.value), ("confidence", a.confidence.value), ("counters", k.counter_source.value)):
            t = tally[key]
            t[0] += 1
            t[1] += d
        if a.tiers_agree is not None:
            overlaps += 1
            disagreements += not a.tiers_agree

    def bucket(kind: str) -> dict[str, TierCoverage]:
        return {name: TierCoverage(kernel_count=c, duration_ns=d) for (k, name), (c, d) in tally.items() if k == kind}

    by_conf = bucket("confidence")
    counters = bucket("counters")
    good = sum(by_conf[c].duration_ns for c in ("high", "medium") if c in by_conf)
    return Coverage(
        kernel_count=len(kernels), duration_ns=total, by_tier=bucket("tier"), by_confidence=by_conf,
        counters_measured=counters.get("measured", TierCoverage()),
        counters_inherited=counters.get("inherited", TierCoverage()),
        counters_missing=counters.get("missing", TierCoverage()),
        attributed_time_pct=100.0 * good / total if total else 0.0,
        tier_overlaps=overlaps, tier_disagreements=disagreements,
    )


def _availability(ncu: NcuReport | None, chip: str | None,
                  specs: Sequence[CounterSpec] = CATALOG) -> list[CounterAvailability]:
    out = []
    if len(specs) > len(CATALOG):  # FLOP counters were asked for: say which of them came back
        specs = CATALOG + FLOP_CATALOG
    for spec in specs:
        name = spec.ncu_name_for(chip)
        if ncu is None:
            out.append(CounterAvailability(field=spec.field, ncu_name=name, available=False,
                                           reason="no counter run was given"))
            continue
        returned = name in ncu.metrics_returned or any(n in ncu.metrics_returned for n in spec.ncu_names)
        out.append(CounterAvailability(
            field=spec.field, ncu_name=name, available=returned,
            reason=None if returned else f"ncu returned no '{name}' (not offered on {chip or 'this chip'}, "
            "or not requested)"))
    return out


def _capture_meta(capture: CaptureMeta | None, kineto: KinetoTrace | None, nsys: NsysTimeline | None,
                  ncu: NcuReport | None, inductor: InductorArtifacts | None, join: CounterJoin,
                  use_nsys: bool) -> CaptureMeta:
    meta = capture.model_copy(deep=True) if capture else CaptureMeta()
    if kineto is not None:
        props = (kineto.metadata.get("deviceProperties") or [{}])[0] if kineto.metadata else {}
        meta.gpu_name = meta.gpu_name or props.get("name")
        meta.sm_count = meta.sm_count or props.get("numSms")
        meta.versions.cuda = meta.versions.cuda or _s(kineto.metadata.get("cuda_runtime_version"))
        meta.versions.driver = meta.versions.driver or _s(kineto.metadata.get("cuda_driver_version"))
    if nsys is not None and nsys.gpus:
        gpu = nsys.gpus[0]
        meta.gpu_name = meta.gpu_name or gpu.get("name")
        meta.sm_count = meta.sm_count or gpu.get("smCount")
    if meta.chip is None and meta.gpu_name:
        meta.chip = chip_from_name(meta.gpu_name)
    meta.timeline_source = "nsys" if use_nsys else "kineto"
    if meta.counter_mode == "unknown":
        meta.counter_mode = _COUNTER_MODE_OF_JOIN.get(join.mode, "none")
    if not meta.sources:
        meta.sources = [
            SourceInfo(kind="kineto", path=_p(kineto), used=kineto is not None),
            SourceInfo(kind="nsys", path=_p(nsys), used=use_nsys),
            SourceInfo(kind="ncu", path=_p(ncu), used=ncu is not None, detail=join.mode if ncu else None),
            SourceInfo(kind="inductor", path=_p(inductor), used=inductor is not None,
                       detail=inductor.source if inductor else None),
        ]
    meta.created_at = meta.created_at or datetime.now(UTC).isoformat(timespec="seconds")
    return meta


def _p(obj: object) -> str | None:
    path = getattr(obj, "path", None)
    return path.name if path is not None else None


def _s(value: object) -> str | None:
    return None if value is None else str(value)


def operator_phase(phases: Sequence[str | None]) -> str | None:
    """One operator's phase from its kernels' phases: the first that is known."""
    return next((p for p in phases if p is not None), None)
