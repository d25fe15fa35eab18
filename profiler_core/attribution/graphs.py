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
kernels as calls pair one to one. Any other gap is split by what each kernel does: the calls
keep their order, each takes a run of consecutive kernels, and a kernel goes only to a call of
its family (a GEMM kernel to ``mm``/``addmm``/``bmm`` or to a convolution, which cuDNN may run as
a GEMM; a cuDNN flash kernel to an attention call; an implicit-GEMM fprop to a convolution; a
memset or memcpy to the call of the next kernel it precedes). Where exactly one such split exists it is taken:

    calls:   extern mm          extern _scaled_dot_product_cudnn_attention_backward
    replay:  nvjet_..._TNN      Memset  compute_dot_do_o  ..._flash_bprop_...  convert_dq_to_16bits

Otherwise (a kernel of no known family, or two splits that fit) the gap is left unattributed,
with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

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


_ATTENTION = ("sdpa", "flash", "fmha", "attention", "attn", "cudnn::fusion")
_CONV = ("conv", "fprop", "dgrad", "wgrad", "winograd", "cudnn")
_GEMM = ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitkreduce")
_NEUTRAL = ("memset", "memcpy")
# which calls a kernel family can serve: cuDNN runs a 1x1 convolution as a plain GEMM kernel
_SERVES = {"attention": ("attention",), "conv": ("conv",), "gemm": ("gemm", "conv")}
_GEMM_CALLS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "scaled_mm"})


def kernel_family(name: str) -> str | None:
    """What a library kernel does, from its name: attention, conv, gemm, neutral (a memset or
    memcpy, which serves the call it precedes), or None when the name says nothing."""
    low = name.lower()
    if any(w in low for w in _NEUTRAL):
        return "neutral"
    for family, words in (("attention", _ATTENTION), ("conv", _CONV), ("gemm", _GEMM)):
        if any(w in low for w in words):
            return family
    return None


def call_family(name: str) -> str | None:
    """What an extern call does, from its name (``aten::mm``, ``extern_kernels.convolution``,
    ``torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default``)."""
    low = name.lower()
    if "attention" in low:
        return "attention"
    if "convolution" in low:
        return "conv"
    if any(part.lstrip("_") in _GEMM_CALLS for part in re.split(r"[.:]+", low)):
        return "gemm"
    return None


def _split_by_family(kinds: Sequence[str | None], families: Sequence[str | None]) -> list[int] | None:
    """The one in-order split of a gap's kernels over its calls that puts each kernel with a call of
    its family (neutral kernels with the next kernel's call) and gives every call a kernel; None if
    no split fits or more than one does."""
    n = len(families)
    real = [i for i, k in enumerate(kinds) if k != "neutral"]
    if not real or any(kinds[i] is None for i in real):
        return None
    m = len(real)
    options = [[c for c in range(n) if families[c] in _SERVES[kinds[i]]] for i in real]  # type: ignore[index]

    @cache
    def count(j: int, c: int) -> int:
        """In-order placements of real[j:] after real[j-1] went to call c (-1: none placed yet; 2 stands
        for "two or more")."""
        if j == m:
            return 1 if c == n - 1 else 0
        total = 0
        for nxt in options[j]:
            if nxt in (c, c + 1):
                total += count(j + 1, nxt)
                if total > 1:
                    return total
        return total

    if count(0, -1) != 1:
        return None
    chosen: list[int] = []
    for j in range(m):
        prev = chosen[-1] if chosen else -1
        chosen.append(next(c for c in options[j] if c in (prev, prev + 1) and count(j + 1, c) >= 1))
    out = [0] * len(kinds)
    for i, c in zip(real, chosen, strict=True):
        out[i] = c
    following = chosen[-1]
    for i in reversed(range(len(kinds))):
        if kinds[i] == "neutral":
            out[i] = following
        else:
            following = out[i]
    return out


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
        elif cg and len(kg) > len(cg):
            split = _split_by_family([kernel_family(segment[ki].name) for ki in kg],
                                     [call_family(calls[ci].name) for ci in cg])
            for ki, pick in zip(kg, split or (), strict=False):
                out[ki] = cg[pick]
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
