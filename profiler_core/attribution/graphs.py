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

Two more rules read a call's run of kernels: an index fill (``arange`` into a sort's index
tensor) comes before the sort kernels of its call, and cuBLAS's split-K reduction never starts
a call. Where several splits still fit, the calls are read by what each launched where it stood
alone in the same capture (a gap with one extern call, or as many calls as kernels):

    calls:   extern mm (rotary angles)    extern mm (k_proj)
    replay:  cutlass_simt_sgemm           xmma_gemm_128x64  xmma_gemm_128x64
    elsewhere, one mm alone launched xmma_gemm_128x64 twice: the split that repeats it is taken

and the kernels so placed say so. Otherwise (a kernel of no known family, or splits that fit
equally) the gap is left unattributed, with the reason.

A graph recorded around a whole training step holds several compiled graphs back to back, with
the eager work between and after them (autograd's gradient fills, the optimizer's update):

    replay:  [forward call()] Memset nvjet  [loss call()] fill  [backward call()] ... multi_tensor_apply
                              -> aten::mm (the forward's last call)      eager: no call names it

Its Triton kernels are read as the compiled graphs' anchors in order (one way only), each graph's
kernels are read against its own ``call()``, and between two graphs the extern calls at either
edge take the kernels their families fit; the eager kernels are left to other evidence.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from profiler_core.attribution.evidence import Claim, Resolver
from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.records import CpuOp, InductorCall, KinetoTrace, TimelineKernel
from profiler_core.schema import Tier

DETAIL = "CUDA graph replay: position in the captured graph's launch order (Inductor's call())"
DETAIL_LEARNED = (DETAIL + "; of the splits of its gap that fit, the one whose calls each launched what the same "
                  "call launched where it stood alone in this capture")
_MAX_SPLITS = 20_000  # in-order splits of one gap read one by one; beyond that only a unique fit is taken
Learned = dict[str, set[tuple[str, ...]]]  # call name -> the kernel runs it launched where it stood alone


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
_TOPK = ("topk", "kthvalue", "radixselect")
# which calls a kernel family can serve: cuDNN runs a 1x1 convolution as a plain GEMM kernel; topk
# sorts the k values it gathered; a sort fills its index tensor (arange) before sorting
_SERVES = {"attention": ("attention",), "conv": ("conv",), "gemm": ("gemm", "conv"), "topk": ("topk",),
           "sort": ("sort", "topk"), "index": ("sort",)}
_GEMM_CALLS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "scaled_mm"})
_SORT_CALLS = frozenset({"sort", "argsort", "msort"})


def kernel_family(name: str) -> str | None:
    """What a library kernel does, from its name: attention, conv, gemm, neutral (a memset or
    memcpy, which serves the call it precedes), or None when the name says nothing."""
    low = name.lower()
    if any(w in low for w in _NEUTRAL):
        return "neutral"
    for family, words in (("attention", _ATTENTION), ("conv", _CONV), ("gemm", _GEMM), ("topk", _TOPK)):
        if any(w in low for w in words):
            return family
    if "sort" in low:
        return "sort"
    if "with_index" in low and "arange" in low:
        return "index"
    return None


def call_family(name: str) -> str | None:
    """What an extern call does, from its name (``aten::mm``, ``extern_kernels.convolution``,
    ``torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default``)."""
    low = name.lower()
    if "attention" in low:
        return "attention"
    if "convolution" in low:
        return "conv"
    parts = [part.lstrip("_") for part in re.split(r"[.:]+", low)]
    if any(part in _GEMM_CALLS for part in parts):
        return "gemm"
    if "topk" in parts:
        return "topk"
    if any(part in _SORT_CALLS for part in parts):
        return "sort"
    return None


def _run_fits(kinds: Sequence[str | None], names: Sequence[str], family: str | None) -> bool:
    """Can one call of ``family`` have launched this run of (non-neutral) kernels, in this order?"""
    if family is None or any(k is None or family not in _SERVES[k] for k in kinds):
        return False
    if "splitkreduce" in names[0].lower():
        return False  # the reduction follows its GEMM
    first_other = next((i for i, k in enumerate(kinds) if k != "index"), len(kinds))
    return "index" not in kinds[first_other:]  # the index fill precedes the sort


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
    return _with_neutral(kinds, chosen)


def _learned_split(kinds: Sequence[str | None], names: Sequence[str], families: Sequence[str | None],
                   call_names: Sequence[str], learned: Learned) -> tuple[list[int], bool] | None:
    """The call of each non-neutral kernel under the one split of a gap that fits (False), else
    under the one whose calls best repeat what they launched alone (True); None when neither is
    unique. Reads every in-order split, so only gaps with few of them come here."""
    real = [i for i, k in enumerate(kinds) if k != "neutral"]
    m, n = len(real), len(families)
    fits: list[list[int]] = []
    scored: list[tuple[int, list[int]]] = []
    for cuts in itertools.combinations(range(1, m), n - 1):
        bounds = (0, *cuts, m)
        runs = [real[a:b] for a, b in itertools.pairwise(bounds)]
        fit = score = 0
        ok = True
        for c, run in enumerate(runs):
            family_fit = _run_fits([kinds[i] for i in run], [names[i] for i in run], families[c])
            alone = tuple(names[i] for i in run) in learned.get(call_names[c], ())
            fit += family_fit
            score += alone
            ok = ok and (family_fit or alone)
        chosen = [c for c, run in enumerate(runs) for _ in run]
        if fit == n:
            fits.append(chosen)
        if ok:
            scored.append((score, chosen))
    if len(fits) == 1:
        return fits[0], False
    best = max((sc for sc, _ in scored), default=0)
    top = [chosen for sc, chosen in scored if sc == best]
    if best == 0 or len(top) != 1:
        return None
    return top[0], True


def _with_neutral(kinds: Sequence[str | None], real_calls: Sequence[int]) -> list[int]:
    """Per kernel of a gap, its call: each real kernel's, and a neutral one the next real kernel's."""
    out = [0] * len(kinds)
    real = [i for i, k in enumerate(kinds) if k != "neutral"]
    for i, c in zip(real, real_calls, strict=True):
        out[i] = c
    following = real_calls[-1]
    for i in reversed(range(len(kinds))):
        if kinds[i] == "neutral":
            out[i] = following
        else:
            following = out[i]
    return out


def _split_gap(segment: Sequence[TimelineKernel], kg: Sequence[int], calls: Sequence[InductorCall],
               cg: Sequence[int], learned: Learned | None) -> tuple[list[int], bool] | None:
    kinds = [kernel_family(segment[ki].name) for ki in kg]
    families = [call_family(calls[ci].name) for ci in cg]
    names = [segment[ki].name for ki in kg]
    real = [i for i, k in enumerate(kinds) if k != "neutral"]
    if len(real) < len(cg):
        return None
    if math.comb(len(real) - 1, len(cg) - 1) > _MAX_SPLITS:
        split = _split_by_family(kinds, families)
        return (split, False) if split is not None else None
    found = _learned_split(kinds, names, families, [calls[ci].name for ci in cg], learned or {})
    if found is None:
        return None
    real_calls, by_learning = found
    return _with_neutral(kinds, real_calls), by_learning


def _anchored(segment: Sequence[TimelineKernel], calls: Sequence[InductorCall]
              ) -> list[tuple[list[int], list[int]]] | None:
    """The segment's kernels and the calls paired anchor to anchor: (anchor) pairs then each gap's
    (kernel indices, call indices); None when the Triton anchors differ."""
    k_anchors, k_gaps = _gaps([k.name for k in segment], [is_generated_kernel_name(k.name) for k in segment])
    c_anchors, c_gaps = _gaps([c.name for c in calls], [c.kind == "triton" for c in calls])
    if k_anchors != c_anchors:
        return None
    anchor_k = [i for i, k in enumerate(segment) if is_generated_kernel_name(k.name)]
    anchor_c = [i for i, c in enumerate(calls) if c.kind == "triton"]
    return [([ki], [ci]) for ki, ci in zip(anchor_k, anchor_c, strict=True)] + list(zip(k_gaps, c_gaps, strict=True))


def _alone(segment: Sequence[TimelineKernel], calls: Sequence[InductorCall],
           pairs: Sequence[tuple[list[int], list[int]]], learned: Learned) -> None:
    """Record what each extern call launched where its gap leaves no doubt."""
    for kg, cg in pairs:
        if len(cg) == 1 and kg and calls[cg[0]].kind != "triton":
            run = tuple(segment[ki].name for ki in kg if kernel_family(segment[ki].name) != "neutral")
            if run:
                learned.setdefault(calls[cg[0]].name, set()).add(run)
        elif cg and len(cg) == len(kg):
            for ki, ci in zip(kg, cg, strict=True):
                if kernel_family(segment[ki].name) != "neutral":
                    learned.setdefault(calls[ci].name, set()).add((segment[ki].name,))


def _match(segment: Sequence[TimelineKernel], calls: Sequence[InductorCall],
           learned: Learned | None = None, placed_by_learning: set[int] | None = None) -> list[int | None] | None:
    """For each kernel of the segment, the index of its call in ``calls`` (None: unexplained).
    ``placed_by_learning`` collects the kernels placed by what their calls launched alone."""
    pairs = _anchored(segment, calls)
    if pairs is None:
        return None
    out: list[int | None] = [None] * len(segment)
    for kg, cg in pairs:
        if len(cg) == 1:
            for ki in kg:
                out[ki] = cg[0]
        elif len(cg) == len(kg):
            for ki, ci in zip(kg, cg, strict=True):
                out[ki] = ci
        elif cg and len(kg) > len(cg):
            found = _split_gap(segment, kg, calls, cg, learned)
            if found is None:
                continue
            split, by_learning = found
            for ki, pick in zip(kg, split, strict=True):
                out[ki] = cg[pick]
                if by_learning and placed_by_learning is not None:
                    placed_by_learning.add(ki)
    return out


def with_graph_copies(replay_of: Sequence[int | None], timeline: Sequence[TimelineKernel]) -> list[int | None]:
    """``replay_of`` with a graph's memset and memcpy nodes joined to their replay: nsys records them
    with a graph node id and the replay's correlation id but in no Kineto-aligned form, so each takes
    the replay of a kernel that shares its correlation id (its own ``cudaGraphLaunch``)."""
    by_corr: dict[int, int] = {}
    for tk, replay in zip(timeline, replay_of, strict=True):
        if replay is not None and tk.correlation_id is not None:
            by_corr.setdefault(tk.correlation_id, replay)
    return [replay if replay is not None or tk.graph_node_id is None or tk.correlation_id is None
            else by_corr.get(tk.correlation_id) for tk, replay in zip(timeline, replay_of, strict=True)]


def _anchor_cover(anchors: Sequence[str], sequences: Sequence[Sequence[InductorCall]]) -> list[int] | None:
    """The one way to read a replay's Triton kernels as several compiled graphs' ``call()`` run back
    to back (indices into ``sequences``, in order), or None when there is none or more than one."""
    seq_anchors = [[c.name for c in calls if c.kind == "triton"] for calls in sequences]
    n = len(anchors)

    @cache
    def ways(a: int) -> int:  # covers of anchors[a:] (2 stands for "two or more")
        if a == n:
            return 1
        total = 0
        for sa in seq_anchors:
            if sa and anchors[a:a + len(sa)] == sa:
                total += ways(a + len(sa))
                if total > 1:
                    return total
        return total

    if n == 0 or ways(0) != 1:
        return None
    out: list[int] = []
    a = 0
    while a < n:
        s = next(s for s, sa in enumerate(seq_anchors) if sa and anchors[a:a + len(sa)] == sa and ways(a + len(sa)))
        out.append(s)
        a += len(seq_anchors[s])
    return out


def _fitting_run(kinds: Sequence[str | None], families: Sequence[str | None]) -> int:
    """How many of ``kinds`` (a region's kernels, read from its edge) the calls of ``families`` can have
    launched: the longest run whose real kernels each serve one of them, ending on a real kernel."""
    served = {f for f in families if f is not None}
    taken = 0
    for i, kind in enumerate(kinds):
        if kind == "neutral":
            continue
        if kind is None or not served & set(_SERVES[kind]):
            break
        taken = i + 1
    return taken


def _blocks(segment: Sequence[TimelineKernel], sequences: Sequence[Sequence[InductorCall]]
            ) -> list[tuple[int, int, Sequence[InductorCall]]] | None:
    """A replay that holds several compiled graphs and eager work between them, recorded as one CUDA
    graph (a whole training step: forward, loss, backward, then the optimizer's eager kernels): each
    graph's (first kernel, end, calls). Its Triton kernels must read as the graphs' anchors back to
    back in exactly one way; between two graphs, the extern calls after the first's last anchor take
    the kernels their families fit from that side, those before the next's first anchor from the
    other, and what neither fits is eager work the graph recorded, left to other evidence. Where
    both sides' calls fit every kernel between them, none of those kernels is placed."""
    names = [k.name for k in segment]
    anchor_at = [i for i, name in enumerate(names) if is_generated_kernel_name(name)]
    cover = _anchor_cover([names[i] for i in anchor_at], sequences)
    if cover is None or len(cover) < 2:
        return None
    kinds = [kernel_family(name) for name in names]
    first: list[int] = []  # each graph's first and last anchor kernel
    last: list[int] = []
    a = 0
    for s in cover:
        count = sum(c.kind == "triton" for c in sequences[s])
        first.append(anchor_at[a])
        last.append(anchor_at[a + count - 1])
        a += count
    lead = [[call_family(c.name) for c in itertools.takewhile(lambda c: c.kind != "triton", sequences[s])]
            for s in cover]
    trail = [[call_family(c.name) for c in
              reversed(list(itertools.takewhile(lambda c: c.kind != "triton", reversed(sequences[s]))))]
             for s in cover]
    starts = list(first)
    ends = [i + 1 for i in last]
    for b in range(len(cover) + 1):  # the region before graph b (b == len: after the last one)
        lo = ends[b - 1] if b else 0
        hi = first[b] if b < len(cover) else len(segment)
        region = kinds[lo:hi]
        after = _fitting_run(region, trail[b - 1]) if b and trail[b - 1] else 0
        before = _fitting_run(region[::-1], lead[b]) if b < len(cover) and lead[b] else 0
        if after + before > len(region):
            after = before = 0  # both sides' calls fit every kernel between them: whose is whose is not read
        if b:
            ends[b - 1] = lo + after
        if b < len(cover):
            starts[b] = hi - before
    return [(lo, hi, sequences[s]) for lo, hi, s in zip(starts, ends, cover, strict=True)]


def _replays(replay_of: Sequence[int | None]) -> dict[int, list[int]]:
    """The timeline indices of each replay's kernels, by its graph launch, in order."""
    segments: dict[int, list[int]] = {}
    for j, replay in enumerate(replay_of):
        if replay is not None:
            segments.setdefault(replay, []).append(j)
    return segments


def graph_replay_claims(
    timeline: Sequence[TimelineKernel], replay_of: Sequence[int | None],
    sequences: Sequence[Sequence[InductorCall]], resolve: Resolver,
) -> list[Claim | None]:
    """Claims for the kernels of each replay (``replay_of[j]``: its graph launch, or None)."""
    out: list[Claim | None] = [None] * len(timeline)
    if not sequences:
        return out
    segments = _replays(replay_of)
    # (instance prefix, timeline indices, kernels, calls): a replay of one graph, or one graph of a
    # replay that recorded several
    found: list[tuple[tuple, list[int], list[TimelineKernel], Sequence[InductorCall]]] = []
    learned: Learned = {}
    for n, members in enumerate(segments.values()):
        segment = [timeline[j] for j in members]
        parts: list[tuple[tuple, list[int], list[TimelineKernel], Sequence[InductorCall]]] = []
        for calls in sequences:
            if _anchored(segment, calls) is not None:
                parts = [(("graph", n), members, segment, calls)]
                break
        else:
            parts = [(("graph", n, b), members[lo:hi], segment[lo:hi], calls)
                     for b, (lo, hi, calls) in enumerate(_blocks(segment, sequences) or ())]
        for part in parts:
            pairs = _anchored(part[2], part[3])
            if pairs is not None:
                _alone(part[2], part[3], pairs, learned)
                found.append(part)
    for prefix, members, segment, calls in found:
        by_learning: set[int] = set()
        matched = _match(segment, calls, learned, by_learning)
        for pos, (j, ci) in enumerate(zip(members, matched or (), strict=True)):
            if ci is None:
                continue
            call = calls[ci]
            detail = DETAIL_LEARNED if pos in by_learning else DETAIL
            if call.kind == "triton":
                prim, fused, _how = resolve(call.name)
                out[j] = Claim(Tier.CUDA_GRAPH, prim, (*prefix, ci), None, None, fused, True, detail)
            else:
                out[j] = Claim(Tier.CUDA_GRAPH, call.name, (*prefix, ci), None, None, (), True, detail)
    return out


DETAIL_RECORDED = ("CUDA graph replay: the launch at the same position of the graph's recording, traced while it "
                   "was recorded (graph_capture.json.gz)")
_LAUNCHES = ("LaunchKernel", "cuLaunch", "MemsetAsync", "MemcpyAsync")  # runtime calls a recording turns into nodes


@dataclass(frozen=True, slots=True)
class RecordedLaunch:
    """One launch a CUDA graph's recording traced: what it put in the graph and the call around it."""

    kind: str  # kernel | memset | memcpy
    op: CpuOp | None  # the innermost op around the launch (its Kineto External id)
    optimizer: str | None  # ``optimizer.AdamW`` when the launch ran inside the optimizer's step
    correlation_id: int | None = None  # the launch's CUPTI correlation in the recording's trace


def recorded_launches(trace: KinetoTrace) -> list[list[RecordedLaunch]]:
    """Per recording in ``trace`` (``cudaStreamBeginCapture`` to ``cudaStreamEndCapture``), the launches it
    turned into graph nodes, in launch order: every kernel, memset and memcpy launch inside it, on any
    thread (autograd's backward runs on its own), that ran nothing then (no kernel record carries its
    correlation id)."""
    from profiler_core.attribution.module_links import Enclosing, optimizer_path

    ran = {k.correlation_id for k in trace.kernels if k.correlation_id is not None}
    calls = sorted(trace.runtime_calls, key=lambda r: r.start_ns)
    ops = {op.external_id: op for op in trace.cpu_ops if op.category == "cpu_op" and op.external_id is not None}
    optim = Enclosing([op for op in trace.cpu_ops if op.category == "user_annotation" and optimizer_path(op.name)])
    out: list[list[RecordedLaunch]] = []
    begins = [r for r in calls if r.name == "cudaStreamBeginCapture"]
    ends = [r for r in calls if r.name == "cudaStreamEndCapture"]
    for begin in begins:
        end = next((r for r in ends if r.tid == begin.tid and r.start_ns > begin.start_ns), None)
        if end is None:
            continue
        launches: list[RecordedLaunch] = []
        for r in calls:
            if not begin.start_ns < r.start_ns < end.start_ns or not any(w in r.name for w in _LAUNCHES):
                continue
            if r.correlation_id in ran:
                continue
            kind = "memset" if "Memset" in r.name else "memcpy" if "Memcpy" in r.name else "kernel"
            rng = optim.innermost(r.tid, r.start_ns)
            launches.append(RecordedLaunch(kind, ops.get(r.external_id) if r.external_id is not None else None,
                                           optimizer_path(rng.name) if rng is not None else None, r.correlation_id))
        out.append(launches)
    return out


def _agrees(segment: Sequence[TimelineKernel], launches: Sequence[RecordedLaunch]) -> bool:
    """A replay is its recording when every position holds the same kind of work and every generated
    kernel was launched by the call named after it (Inductor records each Triton launch so)."""
    if len(segment) != len(launches):
        return False
    for k, launch in zip(segment, launches, strict=True):
        if k.kind != launch.kind:
            return False
        if is_generated_kernel_name(k.name) and (launch.op is None or launch.op.name != k.name):
            return False
    return True


def recorded_claims(timeline: Sequence[TimelineKernel], replay_of: Sequence[int | None],
                    recordings: Sequence[Sequence[RecordedLaunch]], claims: list[Claim | None],
                    resolve: Resolver) -> tuple[dict[int, RecordedLaunch], set[int]]:
    """Fill ``claims[j]`` (None ones only) of each replay's kernels from the recording it repeats,
    position by position; returns the launch behind every kernel of a replay that matched a
    recording, and which kernels it placed."""
    segments = _replays(replay_of)
    behind: dict[int, RecordedLaunch] = {}
    placed: set[int] = set()
    for n, members in enumerate(segments.values()):
        segment = [timeline[j] for j in members]
        launches = next((rec for rec in recordings if _agrees(segment, rec)), None)
        if launches is None:
            continue
        for j, launch in zip(members, launches, strict=True):
            behind[j] = launch
            if claims[j] is not None or launch.op is None:
                continue
            op = launch.op
            if is_generated_kernel_name(op.name):
                prim, fused, _how = resolve(op.name)
                claims[j] = Claim(Tier.CUDA_GRAPH, prim, ("recorded", n, op.external_id), None, op.input_shapes,
                                  fused, True, DETAIL_RECORDED)
            else:
                claims[j] = Claim(Tier.CUDA_GRAPH, op.name, ("recorded", n, op.external_id), None, op.input_shapes,
                                  (), None, DETAIL_RECORDED)
            placed.add(j)
    return behind, placed
