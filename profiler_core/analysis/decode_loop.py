"""A generate() decode loop, read from a profile: prefill, then one forward per new token.

An autoregressive ``generate()`` runs the model once over the prompt (prefill: attention with
a query as long as the prompt), then once per new token (decode: a query of one token against
the KV cache). Attention operators carry the evidence in their input shapes: the query's
sequence length and the key's, which grows by one per token on a dynamic cache and stays at
the cache's full length on a static one. A decode step compiled by ``generate()`` (a static
cache) records no shapes: after an eager prefill, its attention calls are the decode forwards,
their key length unknown::

    sdpa q=[8,8,64,64] k=[8,8,64,64]  x4 layers      prefill (64-token prompt)
    sdpa q=[8,8,1,64]  k=[8,8,65,64]  x4 layers      decode token 1
    sdpa q=[8,8,1,64]  k=[8,8,66,64]  x4 layers      decode token 2  ...

A recurrent network repeats its GEMMs per time step too, but has no attention with a growing
key: that is what tells the two apart. Forwards are cut by the layer count the prefill shows
(else by a change of shapes); a measured iteration starts as many kernels before its prefill's
first attention as the first iteration launched before its own. Time per output
token is the mean interval between the starts of successive decode forwards, sampling and the
host's work between them included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from profiler_core.analysis.patterns import manual_attention_groups
from profiler_core.analysis.profile_view import CLASS_CODES, ProfileView, pct
from profiler_core.attribution.operator_class import is_softmax
from profiler_core.schema import Operator, OperatorClass

UNKNOWN = 0  # a query or key length the capture did not record (an operator of a compiled graph)


@dataclass(frozen=True)
class AttentionCall:
    """One attention operator call (``ops[at]``, its model built when read): its query and key
    sequence lengths and its first kernel's start."""

    ops: Sequence[Operator]
    at: int
    batch: int
    q_len: int
    kv_len: int
    start_ns: int

    @property
    def op(self) -> Operator:
        return self.ops[self.at]


@dataclass(frozen=True)
class DecodeLoop:
    """What a profile says about its decode loop, per measured iteration where it is a rate."""

    iterations: int
    layers: int  # attention calls per forward
    batch: int
    prompt_len: int | None
    decode_forwards: int  # per iteration
    kv_growing: bool  # True on a dynamic cache; False when every decode step sees one key length
    kv_lengths: tuple[int, int]  # first and last key length of the decode forwards (UNKNOWN: compiled, unrecorded)
    prefill_ns: int  # per iteration: step start to the first decode forward
    decode_ns: int  # per iteration: first decode forward to the step's last kernel end
    step_ns: int  # per iteration: first kernel start to last kernel end
    kernels_per_token: float
    busy_pct: float  # share of the step the GPU runs any kernel
    decode_busy_pct: float  # the same over the decode part alone
    ops: tuple[Operator, ...]  # the attention operators the loop was read from

    @property
    def new_tokens(self) -> int:
        """Tokens generated per sequence per iteration: one from the prefill, one per decode forward."""
        return self.decode_forwards + 1

    @property
    def time_per_output_token_ns(self) -> float:
        """Mean decode-forward interval (the serving figure TPOT)."""
        return self.decode_ns / self.decode_forwards if self.decode_forwards else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second over the batch, whole step (prefill included)."""
        return self.batch * self.new_tokens * 1e9 / self.step_ns if self.step_ns else 0.0


def _shape_pair(op: Operator) -> tuple[list, list] | None:
    shapes = [s for s in (op.input_shapes or []) if isinstance(s, list) and len(s) >= 3
              and all(isinstance(d, int) for d in s)]
    return (shapes[0], shapes[1]) if len(shapes) >= 2 and len(shapes[0]) == len(shapes[1]) else None


def _seq_dim(pairs: Sequence[tuple[list, list]]) -> int:
    """The sequence dim: -2 ([B, H, L, D]) or 1 ([B, L, H, D]), whichever varies across the calls."""
    if not pairs or len(pairs[0][0]) < 4:
        return -2

    def spread(dim: int) -> int:
        return len({q[dim] for q, _ in pairs}) + len({k[dim] for _, k in pairs})

    return 1 if spread(1) > spread(-2) else -2


def attention_calls(view: ProfileView, ops: Sequence[Operator], *, window: int = 8) -> list[AttentionCall]:
    """The attention operators with readable query/key shapes, in launch order: fused attention
    (SDPA, flash) by its query and key, and attention written by hand (score GEMM -> softmax ->
    value GEMM, transformers' ``eager`` implementation) by its softmax's [batch, heads, query, key]."""
    if ops is view.ops_in_order:  # the view's own operators in launch order: their classes read at once
        chosen = np.flatnonzero(_fused_attention_in_order(view)).tolist()
    else:
        chosen = [i for i, op in enumerate(ops)
                  if view.work_class(op) is OperatorClass.ATTENTION and view.kernels_of(op)]
    picked = [(i, ops[i], _shape_pair(ops[i])) for i in chosen]
    by_name: dict[str, list[tuple[list, list]]] = {}
    for _, op, pair in picked:
        if pair is not None:
            by_name.setdefault(op.name, []).append(pair)
    dims = {name: _seq_dim(pairs) for name, pairs in by_name.items()}
    calls = []
    for i, op, pair in picked:
        start = view.first_start_ns(view.kernels_of(op))
        if pair is not None:
            q, k = pair
            calls.append(AttentionCall(ops, i, q[0], q[dims[op.name]], k[dims[op.name]], start))
        elif view.op_class(op) is OperatorClass.ATTENTION:
            # no readable shapes (a compiled graph's call): counted only when the operator is itself
            # attention, not a fused kernel group that holds one
            calls.append(AttentionCall(ops, i, 0, UNKNOWN, UNKNOWN, start))
    return calls + _manual_attention_calls(view, ops, window)


def _fused_attention_in_order(view: ProfileView) -> np.ndarray:
    """Whether each of the view's operators in launch order works as attention and has kernels."""
    order = view.op_order
    return (view.work_class_codes[order] == CLASS_CODES[OperatorClass.ATTENTION]) & (view.op_kernel_counts[order] > 0)


def _manual_attention_calls(view: ProfileView, ops: Sequence[Operator], window: int) -> list[AttentionCall]:
    groups = manual_attention_groups(view, ops, window)
    if not groups:
        return []
    # the softmaxes' shapes, and each operator's first kernel start, off the view's columns where the
    # operators are its own in launch order (keys distinct: an operator's kernels are its row's)
    softmax = view.op_flags(ops, ("name", "fused_with"), is_softmax)
    shapes_of = view.op_column("input_shapes", ops)
    columns = ops is view.ops_in_order and not view.keys_repeat
    if columns:
        order = view.op_order
        counts, first_start = view.op_kernel_counts[order], view.op_first_starts[order]
    calls = []
    for group in groups:
        s = next(i for i in group if softmax[i])
        score = _score_shape(shapes_of[s])
        if score is None:
            continue
        if columns:
            first = group[0] if counts[group[0]] else s
            if not counts[first]:
                continue
            start = int(first_start[first])
        else:
            kernels = view.kernels_of(ops[group[0]]) or view.kernels_of(ops[s])
            if not kernels:
                continue
            start = view.first_start_ns(kernels)
        batch, _, q_len, kv_len = score
        calls.append(AttentionCall(ops, group[0], batch, q_len, kv_len, start))
    return calls


def _score_shape(listed: list | None) -> list | None:
    """A hand-written attention's [batch, heads, query, key], read off its softmax's input shapes
    (the first); None when they do not give it."""
    shapes = [x for x in (listed or []) if isinstance(x, list) and x]
    if not shapes or len(shapes[0]) != 4 or not all(isinstance(d, int) for d in shapes[0]):
        return None
    return shapes[0]


def _no_decode_step(view: ProfileView, ops: Sequence[Operator]) -> bool:
    """Whether no attention call of ``ops`` (the view's launch order) can be a decode step's: no
    fused attention operator ran, and no softmax's score is one query long (or unrecorded), each
    read once per distinct value. False where that is not read off the view."""
    if ops is not view.ops_in_order or _fused_attention_in_order(view).any():
        return False

    def one_query(shapes: list | None) -> bool:
        score = _score_shape(shapes)
        return score is not None and score[2] in (1, UNKNOWN)

    return not (view.op_flags(ops, ("name", "fused_with"), is_softmax)
                & view.op_flags(ops, "input_shapes", one_query)).any()


def _forwards(calls: list[AttentionCall]) -> tuple[list[list[AttentionCall]], int]:
    """Calls cut into forwards, and the layer count used to cut them."""
    prefill = [c for c in calls if c.q_len > 1]
    layers = 0
    if prefill:
        first = calls.index(prefill[0])
        while first + layers < len(calls) and calls[first + layers].q_len == prefill[0].q_len \
                and calls[first + layers].kv_len == prefill[0].kv_len:
            layers += 1
    forwards: list[list[AttentionCall]] = []
    for call in calls:
        cur = forwards[-1] if forwards else None
        same = cur is not None and (cur[0].q_len, cur[0].kv_len) == (call.q_len, call.kv_len)
        if same and cur is not None and (not layers or len(cur) < layers):
            cur.append(call)
        else:
            forwards.append([call])
    return forwards, layers or max((len(f) for f in forwards), default=0)


def detect_decode_loop(view: ProfileView, ops: Sequence[Operator], *, min_forwards: int = 3,
                       window: int = 8) -> DecodeLoop | None:
    """The decode loop in the profile, or None when its attention shows none (or fewer than
    ``min_forwards`` one-token decode forwards per measured iteration). ``window``: how far a
    hand-written attention's GEMMs may sit from its softmax, in operators."""
    if _no_decode_step(view, ops):
        return None  # every call a prefill's or a full forward's: no decode forward to count
    calls = sorted(attention_calls(view, ops, window=window), key=lambda c: c.start_ns)
    prompt = next((c for c in calls if c.q_len > 1), None)
    if prompt is None:  # no recorded prompt: a compiled call's unrecorded shapes tell nothing
        calls = [c for c in calls if c.q_len != UNKNOWN]
    else:  # after an eager prefill, a compiled graph's attention is the compiled decode step
        calls = [c for c in calls if c.q_len != UNKNOWN or c.start_ns > prompt.start_ns]
    if not calls:
        return None
    forwards, layers = _forwards(calls)
    decode = [f for f in forwards if f[0].q_len in (1, UNKNOWN)]
    prefill = [f for f in forwards if f[0].q_len > 1]
    iterations = max(len(prefill), view.profile.capture.measured_iterations or 1, 1) if prefill else max(
        view.profile.capture.measured_iterations or 1, 1)
    per_iter = len(decode) // iterations
    if per_iter < max(min_forwards, 1):
        return None
    kv = [f[0].kv_len for f in decode if f[0].kv_len != UNKNOWN] or [UNKNOWN]
    growing = sum(1 for a, b in zip(kv, kv[1:], strict=False) if b == a + 1) >= per_iter - 1
    if not growing and not prefill:
        return None  # one-token queries against a fixed key and no prompt: not a generate() loop
    every = np.arange(len(view.kernels))
    busy, span = view.busy_and_span_at(every)
    decode_start = [f[0].start_ns for f in decode]
    prefill_ns, decode_ns, decode_busy, decode_kernels = _split(view, prefill, decode_start)
    decode_ops = {c.op.key for f in decode for c in f}
    return DecodeLoop(
        iterations=iterations, layers=layers, batch=calls[0].batch,
        prompt_len=prefill[0][0].q_len if prefill else None, decode_forwards=per_iter, kv_growing=growing,
        kv_lengths=(min(kv), max(kv)), prefill_ns=prefill_ns // iterations, decode_ns=decode_ns // iterations,
        step_ns=span // iterations, kernels_per_token=decode_kernels / max(len(decode), 1),
        busy_pct=pct(busy, span), decode_busy_pct=pct(decode_busy, decode_ns),
        ops=tuple(c.op for c in calls if c.op.key in decode_ops or c.q_len > 1),
    )


def _split(view: ProfileView, prefill: list[list[AttentionCall]],
           decode_start: list[int]) -> tuple[int, int, int, int]:
    """Summed over iterations: prefill time (iteration start to its first decode forward), decode time
    (first decode forward to the iteration's last kernel end), decode busy time; and the number of
    decode kernels. The view's kernels are read off its columns, in start order (ties as listed)."""
    cols = view.kernel_columns
    order = np.argsort(cols.start, kind="stable")
    starts, ends = cols.start[order], cols.end[order]
    # Each iteration launches as many kernels before its prefill's first attention as the first did.
    lead = int(np.searchsorted(starts, prefill[0][0].start_ns)) if prefill else 0
    iter_starts = [int(starts[0])] + [int(starts[max(int(np.searchsorted(starts, f[0].start_ns)) - lead, 0)])
                                      for f in prefill[1:]]
    prefill_ns = decode_ns = decode_busy = decode_kernels = 0
    bounds = [*iter_starts[1:], int(ends[-1]) + 1]
    for start, end in zip(iter_starts, bounds, strict=True):
        first_decode = next((s for s in decode_start if start <= s < end), end)
        prefill_ns += first_decode - start
        lo, hi = np.searchsorted(starts, [first_decode, end]).tolist()  # starts in [first_decode, end)
        if hi > lo:
            decode_ns += int(ends[lo:hi].max()) - first_decode
            decode_busy += view.busy_and_span_at(order[lo:hi])[0]
        decode_kernels += max(hi - lo, 0)
    return prefill_ns, decode_ns, decode_busy, decode_kernels
