"""CUDA-graph replays: name their kernels from the captured graph's launch order.

A replay has no per-kernel launch record: every kernel carries the correlation id of one
``cudaGraphLaunch``. The graph repeats exactly what Inductor's generated ``call()`` (or
cudagraph partition) launched when it was captured, in order. Triton kernels are anchors
(their names match); the library kernels between two anchors belong to the extern calls
between the same two anchors:

    call():  triton_a  extern addmm  triton_b  extern bmm  extern bmm  triton_c
    replay:  triton_a  nvjet_gemm    triton_b  gemm_1      gemm_2      triton_c
             anchor    -> aten::addmm anchor    -> aten::bmm  -> aten::bmm anchor

One extern call in a gap takes all the gap's kernels (a split-K GEMM launches two); as many
kernels as calls pair one to one; any other gap is left unattributed, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from profiler_core.attribution.evidence import Claim, _Resolver
from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.records import InductorCall, TimelineKernel
from profiler_core.schema import Tier

DETAIL = "CUDA graph replay: position in the captured graph's launch order (Inductor's call())"


def _gaps(items: Sequence[str], is_anchor: Sequence[bool]) -> tuple[list[str], list[list[int]]]:
    """Anchor names in order, and the indices between consecutive anchors (len = anchors + 1)."""
    anchors: list[str] = []
    gaps: list[list[int]] = [[]]
    for i, (name, anchor) in enumerate(zip(items, is_anchor, strict=True)):
        if anchor:
            anchors.append(name)
            gaps.append([])
        else:
            gaps[-1].append(i)
    return anchors, gaps


def _match(segment: Sequence[TimelineKernel], calls: Sequence[InductorCall]) -> list[int | None] | None:
    """For each kernel of the segment, the index of its call in ``calls`` (None: unexplained)."""
    k_anchors, k_gaps = _gaps([k.name for k in segment], [is_generated_kernel_name(k.name) for k in segment])
    c_anchors, c_gaps = _gaps([c.name for c in calls], [c.kind == "triton" for c in calls])
    if k_anchors != c_anchors:
        return None
    out: list[int | None] = [None] * len(segment)
    anchor_k = [i for i, k in enumerate(segment) if is_generated_kernel_name(k.name)]
    anchor_c = [i for i, c in enumerate(calls) if c.kind == "triton"]
    for ki, ci in zip(anchor_k, anchor_c, strict=True):
        out[ki] = ci
    for kg, cg in zip(k_gaps, c_gaps, strict=True):
        if len(cg) == 1:
            for ki in kg:
                out[ki] = cg[0]
        elif len(cg) == len(kg):
            for ki, ci in zip(kg, cg, strict=True):
                out[ki] = ci
    return out


def graph_replay_claims(
    timeline: Sequence[TimelineKernel], replay_of: Sequence[int | None],
    sequences: Sequence[Sequence[InductorCall]], resolve: _Resolver,
) -> list[Claim | None]:
    """Claims for the kernels of each replay (``replay_of[j]``: its graph launch, or None)."""
    out: list[Claim | None] = [None] * len(timeline)
    if not sequences:
        return out
    segments: dict[int, list[int]] = {}
    for j, replay in enumerate(replay_of):
        if replay is not None:
            segments.setdefault(replay, []).append(j)
    for n, members in enumerate(segments.values()):
        segment = [timeline[j] for j in members]
        for calls in sequences:
            matched = _match(segment, calls)
            if matched is None:
                continue
            for j, ci in zip(members, matched, strict=True):
                if ci is None:
                    continue
                call = calls[ci]
                if call.kind == "triton":
                    prim, fused, _how = resolve(call.name)
                    out[j] = Claim(Tier.CUDA_GRAPH, prim, ("graph", n, ci), None, None, fused, True, DETAIL)
                else:
                    out[j] = Claim(Tier.CUDA_GRAPH, call.name, ("graph", n, ci), None, None, (), True, DETAIL)
            break
    return out
