"""Build profile.json: every kernel's operator, evidence and counters, on columns.

    timeline (nsys, else Kineto) in launch order
      + Kineto aligned by invocation order     -> tier 1 (CUPTI correlation)
      + ncu rows joined by invocation order    -> counters, tier 2 (ncu's own NVTX stack)
      + nsys NVTX enclosure at launch time      -> tier 3
      + Inductor fusion map                     -> tier 4 (promotes, fills fused_with)
      -> operators (clean name, call index), per-counter aggregation, coverage, dedup

Every stage works on arrays over the kernels (joins.py, tier_columns.py, enclosure.py);
what depends on a name or an NVTX stack is worked out once per unique value. The result is
a KernelTable and an OperatorTable: a capture of up to ``columnar_threshold()`` kernels gets
them as today's models (byte-identical profile.json), a larger one keeps them as columns
and is written as profile.json plus a Parquet kernel table (profiler_core/columnar_profile.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from profiler_core.attribution.columns import NONE, Interner, column, encode_attr, known, taken
from profiler_core.attribution.enclosure import nsys_enclosure_columns
from profiler_core.attribution.evidence import extern_classes_of, make_resolver
from profiler_core.attribution.graphs import (
    RecordedLaunch,
    graph_replay_claims,
    recorded_claims,
    recorded_launches,
    with_graph_copies,
)
from profiler_core.attribution.joins import MEASURED, MISSING, align, join_counter_columns, launch_order
from profiler_core.attribution.kernel_build import counter_values, coverage, kernel_table
from profiler_core.attribution.operator_build import build_operators
from profiler_core.attribution.profile_meta import availability, capture_meta
from profiler_core.attribution.step_phase import kernel_phases, range_phase
from profiler_core.attribution.tier_columns import (
    ClaimColumns,
    Vocab,
    correlation_columns,
    fusion_columns,
    ncu_nvtx_columns,
)
from profiler_core.errors import AttributionError
from profiler_core.gc_pause import gc_paused
from profiler_core.records import InductorArtifacts, KinetoTrace, NcuReport, NsysTimeline, RuntimeCall
from profiler_core.schema import CaptureMeta, Profile, Tier, UnattributedKernel, construct_trusted

COLUMNAR_ENV = "OPROF_COLUMNAR_KERNELS"
COLUMNAR_DEFAULT = 20_000  # above this a profile's kernels go to Parquet (nobody reads that JSON by eye)


def columnar_threshold() -> int:
    """Kernel count above which a profile keeps its kernels as columns (``$OPROF_COLUMNAR_KERNELS``)."""
    raw = os.environ.get(COLUMNAR_ENV)
    if raw is None or not raw.strip():
        return COLUMNAR_DEFAULT
    try:
        return max(0, int(raw))
    except ValueError as err:
        raise AttributionError(f"{COLUMNAR_ENV}={raw!r} is not a kernel count; set it to an integer "
                               f"(default {COLUMNAR_DEFAULT})") from err


@gc_paused()  # millions of acyclic records: the cyclic collector only costs time here
def attribute(
    *,
    kineto: KinetoTrace | None = None,
    nsys: NsysTimeline | None = None,
    ncu: NcuReport | None = None,
    inductor: InductorArtifacts | None = None,
    capture: CaptureMeta | None = None,
    allow_partial: bool = False,
    columnar_above: int | None = None,
    graph_capture: KinetoTrace | None = None,
) -> Profile:
    """Join loaded artifacts into a :class:`Profile` (module docstring: the stages).

    ``graph_capture``: the trace of a CUDA graph's recording (``graph_capture.json.gz``): its replays'
    kernels that Inductor's ``call()`` does not place take the launch at their position in it.

    ``columnar_above``: kernel count above which kernels and operators stay columns (default
    :func:`columnar_threshold`); at or below it they are the models of today's profile.json.
    """
    if kineto is None and nsys is None:
        raise AttributionError("no timeline to attribute: give a Kineto trace (--kineto) or an nsys export (--nsys)")
    warnings: list[str] = []
    use_nsys = nsys is not None and bool(nsys.kernels)
    source = nsys.kernels if use_nsys else kineto.kernels  # type: ignore[union-attr]
    if not source:
        raise AttributionError("the timeline holds no GPU kernels; nothing to attribute")
    timeline = taken(source, launch_order(source))  # columns stay columns (a reader's TableRecords)
    n = len(timeline)
    if use_nsys:
        warnings.extend(nsys.warnings)  # type: ignore[union-attr]
    vocab = Vocab()
    strings = vocab.strings
    knames = Interner()
    kname = encode_attr(knames, timeline, "name")
    kind_codes = Interner()
    kind_code = encode_attr(kind_codes, timeline, "kind")
    is_gpu = np.array([v == "kernel" for v in kind_codes.values] + [False])[kind_code]
    gpu_idx = np.flatnonzero(is_gpu)
    gpu_kernels = taken(timeline, gpu_idx)
    fusions = inductor.fusions if inductor else {}

    # Tier 1 needs each timeline kernel's Kineto twin.
    kineto_index = np.full(n, NONE, dtype=np.int64)
    kineto_kernels = timeline
    graph_corr: frozenset[int] = frozenset()
    if kineto is not None:
        graph_corr = _graph_launches(kineto.runtime_calls)
        if use_nsys:  # (a reader's TableRecords stay columns: no record is built)
            ordered = taken(kineto.kernels, launch_order(kineto.kernels))
            kinds = Interner()
            kind_of = encode_attr(kinds, ordered, "kind")
            is_kernel = np.array([v == "kernel" for v in kinds.values] + [False], dtype=bool)[kind_of]
            kineto_kernels = taken(ordered, np.flatnonzero(is_kernel))
            aligned, w = align(gpu_kernels, kineto_kernels, other_label="the Kineto trace", allow_partial=allow_partial)
            warnings.extend(w)
            kineto_index[gpu_idx] = aligned
        else:
            kineto_index = np.arange(n, dtype=np.int64)
    kin_corr = (column(kineto_kernels, "correlation_id")[np.maximum(kineto_index, 0)]
                if kineto is not None and len(kineto_kernels) else np.full(n, NONE))

    # Training steps: forward, backward or optimizer, from the host ranges around each launch.
    phase_of: list | None = None
    if kineto is not None and _has_phase_ranges(kineto):
        phase_of = kernel_phases(kineto, [None if ki == NONE or c == NONE else c for ki, c in
                                          zip(kineto_index.tolist(), kin_corr.tolist(), strict=True)])

    # Counters: ncu rows joined to GPU kernels by invocation order.
    rows = ncu.rows if ncu is not None else []
    join = join_counter_columns(gpu_kernels, rows, allow_partial=allow_partial)
    warnings.extend(join.warnings)
    row_of = np.full(n, NONE, dtype=np.int64)
    row_of[gpu_idx] = join.row
    counter_source = np.full(n, MISSING, dtype=np.int8)
    counter_source[gpu_idx] = join.source
    inherited_of = np.full(n, NONE, dtype=np.int64)
    inherited_of[gpu_idx] = np.where(join.inherited_from != NONE, gpu_idx[np.maximum(join.inherited_from, 0)], NONE)

    # The CUDA graph replay (graph id, else the replay call's correlation) that launched each kernel.
    graph_known = known(timeline, "graph_id")
    graph_id = column(timeline, "graph_id", 0)
    by_replay = (kineto_index != NONE) & np.isin(kin_corr, np.fromiter(graph_corr, dtype=np.int64))
    in_graph = graph_known | by_replay
    replay_of: list[int | None] = []
    if in_graph.any():  # per-kernel records only for a capture with graph replays
        replay_of = with_graph_copies(
            [int(g) if known else (int(c) if rep else None) for g, known, c, rep in
             zip(graph_id.tolist(), graph_known.tolist(), kin_corr.tolist(), by_replay.tolist(), strict=True)],
            timeline)
        in_graph = np.fromiter((r is not None for r in replay_of), dtype=bool, count=n)

    graph_calls = [c for seq in inductor.call_sequences for c in seq] if inductor is not None else []
    resolve = make_resolver(fusions, extern_classes_of(graph_calls))
    tiers: list[ClaimColumns] = []
    if kineto is not None:
        tiers.append(correlation_columns(n, kineto_index, kineto_kernels, kineto.cpu_ops, resolve, graph_corr, vocab))
    if ncu is not None:
        tiers.append(ncu_nvtx_columns(n, rows, row_of, counter_source == MEASURED, resolve, vocab))
    if use_nsys:
        tiers.append(nsys_enclosure_columns(column(timeline, "correlation_id"), nsys.runtime_calls,  # type: ignore[union-attr]
                                            nsys.nvtx_ranges, resolve, vocab))  # type: ignore[union-attr]
    if fusions:
        tiers.append(fusion_columns(kname, knames.values, fusions, resolve, vocab))
    recorded: dict[int, RecordedLaunch] = {}
    sequences = inductor.call_sequences if inductor is not None else ()
    if in_graph.any() and (sequences or graph_capture is not None):
        graph_claims = graph_replay_claims(timeline, replay_of, sequences, resolve)
        if graph_capture is not None:
            recordings = recorded_launches(graph_capture)
            behind, placed = recorded_claims(timeline, replay_of, recordings, graph_claims, resolve)
            recorded = {j: behind[j] for j in placed}
            if behind:  # the replays' phases: where each launch ran in the recorded step
                phase_of = recorded_phases(graph_capture, behind, phase_of, n)
            else:
                sizes = sorted({len(r) for r in recordings})
                warnings.append(
                    f"{graph_capture.path.name}: its {len(recordings)} recording(s) (of {sizes} launches) repeat "
                    "no graph replay of the timeline launch for launch; its records were not used (capture the "
                    "run again so the recording and the replays come from one process)")
        tiers.append(ClaimColumns.from_claims(Tier.CUDA_GRAPH, graph_claims, vocab))

    table = kernel_table(timeline, knames, kname, kind_codes, kind_code, tiers, vocab, counter_values(rows, ncu),
                         row_of, counter_source, inherited_of, graph_id, graph_known, in_graph,
                         (kineto is not None, ncu is not None, use_nsys))
    operators = build_operators(table, tiers, vocab, in_graph, phase_of,
                                measured_iterations=capture.measured_iterations if capture else None)
    graph_kernels = int(in_graph.sum())
    if graph_kernels:
        named = int(sum(t.has[in_graph].sum() for t in tiers if t.tier is Tier.CUDA_GRAPH))
        warnings.append(
            f"{graph_kernels} kernels were launched by CUDA graph replays, which record no per-kernel launch; "
            f"{named} of them were placed by the captured graph's launch order (Inductor's call()"
            + (f"; {len(recorded)} by the launch at their position in the graph's traced recording" if recorded
               else "") + "), the rest only by Inductor's fusion map where it names them"
        )
    meta = capture_meta(capture, kineto, nsys, ncu, inductor, join.mode, use_nsys)
    unattributed = np.flatnonzero(table.operator == NONE).tolist()
    s = strings.values
    large = n > (columnar_threshold() if columnar_above is None else columnar_above)
    profile = Profile.model_construct(
        schema_version=1, capture=meta,
        operators=operators if large else operators.models(),
        kernels=table if large else table.models(),
        unattributed=[construct_trusted(UnattributedKernel, {
            "kernel_id": j, "name": s[table.name[j]], "duration_ns": int(table.end_ns[j] - table.start_ns[j]),
            "reason": s[table.reason[j]] or "no evidence"}) for j in unattributed],
        coverage=coverage(table),
        counters=availability(ncu, meta.chip, operators.specs),
        warnings=warnings,
    )
    optimizer_paths = {j: launch.optimizer for j, launch in recorded.items() if launch.optimizer is not None}
    if optimizer_paths:  # the optimizer's update the recording traced: module stage keeps these paths
        if isinstance(profile.kernels, list):
            for j, path in optimizer_paths.items():
                profile.kernels[j].module_path = path
        else:
            paths = [profile.kernels.strings.values[c] for c in profile.kernels.module_path.tolist()]
            for j, path in optimizer_paths.items():
                paths[j] = path
            profile.kernels.module_path = profile.kernels.strings.encode(paths)
    return profile


def _graph_launches(calls: Sequence[RuntimeCall]) -> frozenset[int]:
    """The correlation ids of the CUDA graph launches among ``calls`` (read off their columns where kept)."""
    names = Interner()
    code = encode_attr(names, calls, "name")
    launch = np.array(["GraphLaunch" in name for name in names.values] + [False])[code]
    corr = column(calls, "correlation_id")[launch]
    return frozenset(corr[corr != NONE].tolist())


def _has_phase_ranges(kineto: KinetoTrace) -> bool:
    """Whether any host range of the trace marks a training phase (backward, the optimizer's step)."""
    names = Interner()
    encode_attr(names, kineto.cpu_ops, "name")
    return any(range_phase(name) for name in names.values)


def recorded_phases(trace: KinetoTrace, behind: dict[int, RecordedLaunch], phase_of: list | None, n: int) -> list:
    """``phase_of`` with each replayed kernel's phase read where its launch ran in the recording's trace
    (autograd's backward, the optimizer's step, else forward)."""
    order = sorted(behind)
    out = list(phase_of) if phase_of is not None else [None] * n
    for j, phase in zip(order, kernel_phases(trace, [behind[j].correlation_id for j in order]), strict=True):
        out[j] = phase
    return out
