"""Align the operators of two profiles, even when a pass renamed or fused them.

Three passes, each on what the previous left over:

1. **Names.** A sequence match on operator names and roles (launch order). Operators matched
   here are paired 1:1: ``key`` when the call index agrees too, ``sequence`` when an insertion
   or a removal shifted it. A library call goes by its call's name (``call_name``): a graph
   replay names ``aten::convolution`` what the other capture saw as ``aten::cudnn_convolution``.
2. **Roles.** Inside each stretch the names could not match, a second sequence match on
   roles: the operator class, with the GEMMs and softmax of a hand-written attention counted
   as ``attention`` (so bmm-softmax-bmm lines up with the SDPA call that replaced it). Pairs
   found here are ``class_position``.
3. **Absorption.** An operator still alone joins a group on the other side when its
   ``fused_with`` names an operator of that group, or else the nearest group of its role in
   the same stretch (earlier first): the Q, K and V GEMMs all join the one QKV GEMM. Such
   groups are ``fused``. What is left is only in one profile.

    base: aten::mm  aten::mm  triton_poi_fused_addmm_..  aten::bmm  softmax  aten::mm  aten::bmm
    opt:  aten::addmm                                    aten::_cudnn_attention_forward
    ->    [mm, mm, poi, mm] ~ [addmm] (fused)            [bmm, softmax, bmm] ~ [_cudnn_attention] (fused)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from enum import StrEnum
from functools import cached_property

import numpy as np

from profiler_core.analysis.patterns import manual_attention_groups
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.attribution.columns import Positional
from profiler_core.attribution.operator_class import aten_name
from profiler_core.schema import Operator, OperatorClass

# Role matching is quadratic in the worst case: stretches larger than this (ops x ops) are cut first.
_SMALL_STRETCH = 64 * 64
_CHUNK_OPS = 64


class AlignMethod(StrEnum):
    KEY = "key"  # same name and call index
    SEQUENCE = "sequence"  # same name, call index shifted by an insertion or removal
    CLASS_POSITION = "class_position"  # renamed: same role at the same place in the sequence
    FUSED = "fused"  # several operators on one side correspond to one (or more) on the other
    ONLY_BASE = "only_base"
    ONLY_OPT = "only_opt"


@dataclass(frozen=True, slots=True)
class AlignedGroup:
    """Operators of the baseline that correspond to operators of the optimized profile."""

    base_keys: tuple[str, ...]
    opt_keys: tuple[str, ...]
    method: AlignMethod


@dataclass
class _Group:
    base: list[int] = field(default_factory=list)
    opt: list[int] = field(default_factory=list)
    method: AlignMethod = AlignMethod.CLASS_POSITION


# One call, named by the op that launched its kernels: eager and compiled captures see the library op
# (aten::cudnn_convolution) where a CUDA-graph replay names the extern call (aten::convolution).
_CALL_NAMES = {
    **dict.fromkeys(("aten::cudnn_convolution", "aten::_convolution", "aten::miopen_convolution",
                     "aten::mkldnn_convolution", "aten::cudnn_convolution_relu",
                     "aten::cudnn_convolution_add_relu"), "aten::convolution"),
    **dict.fromkeys(("aten::cudnn_convolution_transpose", "aten::miopen_convolution_transpose"),
                    "aten::convolution_transpose"),
}


def call_name(name: str) -> str:
    """The name one call goes by in every capture of a workload (see ``_CALL_NAMES``)."""
    return _CALL_NAMES.get(name, name)


def operator_roles(view: ProfileView, ops: Sequence[Operator], attention_window: int) -> list[str]:
    """Each operator's role: its class, with hand-written attention parts as ``attention``."""
    if ops is view.ops_in_order:  # the view's own launch order: every work class read at once
        every = [c.value for c in OperatorClass]
        roles = [every[c] for c in view.work_class_codes[view.op_order].tolist()]
    else:
        roles = [view.work_class(op).value for op in ops]
    for group in manual_attention_groups(view, ops, attention_window):
        for i in group:
            roles[i] = OperatorClass.ATTENTION.value
    return roles


def align_operators(base: ProfileView, opt: ProfileView, *, attention_window: int = 8) -> Alignment:
    """Groups of corresponding operators, in baseline launch order; one-sided groups included."""
    a_ops, b_ops = base.ops_in_order, opt.ops_in_order
    a_roles = operator_roles(base, a_ops, attention_window)
    b_roles = operator_roles(opt, b_ops, attention_window)
    groups: list[_Group | _Run] = []
    # Name and role together: Inductor may file a bias epilogue under "aten::addmm" in one profile
    # while "aten::addmm" is a real GEMM in the other; those must not pair by name.
    # names and keys off the views' columns (no operator model is built for them)
    a_keys, b_keys = base.op_column("key", a_ops), opt.op_column("key", b_ops)
    calls: dict[str, str] = {}  # call_name of each distinct name, worked out once

    def called(name: str) -> str:
        found = calls.get(name)
        if found is None:
            found = calls[name] = call_name(name)
        return found

    # each (call name, role) as a number: equal numbers, equal pairs (what the sequence match compares)
    codes: dict[tuple[str, str], int] = {}
    a_codes = [codes.setdefault((called(n), r), len(codes))
               for n, r in zip(base.op_column("name", a_ops), a_roles, strict=True)]
    b_codes = [codes.setdefault((called(n), r), len(codes))
               for n, r in zip(opt.op_column("name", b_ops), b_roles, strict=True)]
    for tag, i1, i2, j1, j2 in _opcodes(a_codes, b_codes):
        if tag == "equal":  # paired 1:1 in order: kept as one run, not a group per pair
            groups.append(_Run(i1, i2, j1, j2))
            continue
        for piece in _segments(list(range(i1, i2)), list(range(j1, j2)), a_roles, b_roles):
            if isinstance(piece, _Group):
                groups.append(piece)  # an anchor
            else:
                neighbours = _split_last(groups, a_keys, b_keys)  # a fused operator may join it
                groups.extend(_align_stretch(a_ops, b_ops, a_roles, b_roles, piece[0], piece[1],
                                             neighbours=neighbours))
    groups = _split_after_one_sided(groups, a_keys, b_keys)
    _absorb_into_next(groups, a_ops, b_ops)
    groups = [g for g in groups if isinstance(g, _Run) or g.base or g.opt]  # absorbing can empty a group
    return _alignment(sorted(groups, key=_order_key(groups, len(b_ops))), a_keys, b_keys)


@dataclass(frozen=True, slots=True)
class _Run:
    """Operators paired 1:1 in order by the name match: baseline ``i1..i2`` with optimized ``j1..j2``."""

    i1: int
    i2: int
    j1: int
    j2: int


def _pair(run: _Run, at: int, a_keys: Sequence[str], b_keys: Sequence[str]) -> _Group:
    """Pair ``at`` of ``run`` (0 its first) as a group of its own."""
    i, j = run.i1 + at, run.j1 + at
    return _Group([i], [j], AlignMethod.KEY if a_keys[i] == b_keys[j] else AlignMethod.SEQUENCE)


def _split_last(groups: list[_Group | _Run], a_keys: Sequence[str], b_keys: Sequence[str]) -> list[_Group]:
    """The last group (as a list of it, or none), a run's last pair split off it as a group of its own."""
    if not groups:
        return []
    last = groups[-1]
    if isinstance(last, _Run):
        pair = _pair(last, last.i2 - last.i1 - 1, a_keys, b_keys)
        groups[-1:] = [_Run(last.i1, last.i2 - 1, last.j1, last.j2 - 1), pair] if last.i2 - last.i1 > 1 else [pair]
        return [pair]
    return [last]


def _split_after_one_sided(groups: list[_Group | _Run], a_keys: Sequence[str], b_keys: Sequence[str],
                           ) -> list[_Group | _Run]:
    """The groups with a run's first pair split off it where a one-sided group precedes the run (that
    pair may absorb it: :func:`_absorb_into_next`)."""
    out: list[_Group | _Run] = []
    for g in groups:
        if isinstance(g, _Run) and out and isinstance(out[-1], _Group) and not (out[-1].base and out[-1].opt):
            out.append(_pair(g, 0, a_keys, b_keys))
            if g.i2 - g.i1 > 1:
                out.append(_Run(g.i1 + 1, g.i2, g.j1 + 1, g.j2))
        else:
            out.append(g)
    return out


class Alignment(Positional[AlignedGroup]):
    """Aligned groups as columns: each group's baseline and optimized operators (their positions in
    each view's launch order, group after group, cut by the sizes) and its method. A group's
    :class:`AlignedGroup` (with its keys) is built when read; two profiles of a million operators
    align into as many groups."""

    def __init__(self, base: np.ndarray, base_sizes: np.ndarray, opt: np.ndarray, opt_sizes: np.ndarray,
                 methods: np.ndarray, a_keys: Sequence[str], b_keys: Sequence[str]) -> None:
        self.base, self.base_sizes, self.opt, self.opt_sizes = base, base_sizes, opt, opt_sizes
        self.methods = methods  # position in ``_METHODS``
        self._a_keys, self._b_keys = a_keys, b_keys
        self._base_at = np.concatenate(([0], np.cumsum(base_sizes)))
        self._opt_at = np.concatenate(([0], np.cumsum(opt_sizes)))

    def __len__(self) -> int:
        return len(self.methods)

    def _at(self, g: int) -> AlignedGroup:
        b0, b1, o0, o1 = (int(x) for x in (self._base_at[g], self._base_at[g + 1], self._opt_at[g],
                                            self._opt_at[g + 1]))
        a_keys, b_keys = self._a_keys, self._b_keys
        return AlignedGroup(tuple(a_keys[i] for i in self.base[b0:b1].tolist()),
                            tuple(b_keys[j] for j in self.opt[o0:o1].tolist()), _METHODS[int(self.methods[g])])

    def __repr__(self) -> str:
        return f"Alignment({len(self)} groups)"

    @cached_property
    def _group_of_entry(self) -> np.ndarray:
        """The group of each entry of ``base``."""
        return np.repeat(np.arange(len(self)), self.base_sizes)

    @cached_property
    def _entry_of(self) -> np.ndarray:
        """Each baseline operator's entry in ``base``, by launch position (-1: none)."""
        out = np.full(len(self._a_keys), -1, dtype=np.int64)
        out[self.base] = np.arange(len(self.base))
        return out

    def opt_of_base(self, at: np.ndarray) -> np.ndarray:
        """The optimized operators grouped with each baseline operator at launch positions ``at``, one
        after the other (each group's by key, as :meth:`opt_keys_of_base` sorts them): launch positions."""
        entries = self._entry_of[at]
        groups = self._group_of_entry[entries[entries >= 0]]
        sizes = self.opt_sizes[groups]
        # the opt entries of each group, group after group
        firsts = np.repeat(self._opt_at[groups] - (np.cumsum(sizes) - sizes), sizes)
        out = self.opt[firsts + np.arange(len(firsts))]
        keys = self._b_keys
        ends = np.cumsum(sizes)
        for lo, hi in zip((ends - sizes)[sizes > 1].tolist(), ends[sizes > 1].tolist(), strict=True):
            out[lo:hi] = sorted(out[lo:hi].tolist(), key=keys.__getitem__)
        return out

    def opt_keys_of_base(self, keys: Collection[str]) -> dict[str, set[str]]:
        """The optimized keys grouped with each baseline operator of ``keys`` (the keys aligned)."""
        at = np.array([i for i, k in enumerate(self._a_keys) if k in keys], dtype=np.int64)
        hits = np.flatnonzero(np.isin(self.base, at))
        groups = self._group_of_entry[hits]
        a_keys, b_keys, opt_at = self._a_keys, self._b_keys, self._opt_at
        out: dict[str, set[str]] = {}
        for i, g in zip(self.base[hits].tolist(), groups.tolist(), strict=True):
            out.setdefault(a_keys[i], set()).update(b_keys[j] for j in self.opt[opt_at[g]:opt_at[g + 1]].tolist())
        return out


_METHODS = list(AlignMethod)
_METHOD_CODE = {m: c for c, m in enumerate(_METHODS)}


def _alignment(groups: list[_Group | _Run], a_keys: Sequence[str], b_keys: Sequence[str]) -> Alignment:
    """The groups (in their final order) as an :class:`Alignment`; a group without operators on one
    side is ``only_base`` or ``only_opt``."""
    base_parts: list[np.ndarray] = []
    opt_parts: list[np.ndarray] = []
    size_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    pending: list[_Group] = []  # groups since the last run, converted together

    def flush() -> None:
        if not pending:
            return
        base_parts.append(np.fromiter((i for g in pending for i in g.base), dtype=np.int64))
        opt_parts.append(np.fromiter((j for g in pending for j in g.opt), dtype=np.int64))
        methods = [_METHOD_CODE[AlignMethod.ONLY_BASE if not g.opt else AlignMethod.ONLY_OPT if not g.base
                                else g.method] for g in pending]
        size_parts.append((np.array([len(g.base) for g in pending], dtype=np.int64),
                           np.array([len(g.opt) for g in pending], dtype=np.int64),
                           np.array(methods, dtype=np.int64)))
        pending.clear()

    key_code, seq_code = _METHOD_CODE[AlignMethod.KEY], _METHOD_CODE[AlignMethod.SEQUENCE]
    for g in groups:
        if isinstance(g, _Group):
            pending.append(g)
            continue
        flush()
        n = g.i2 - g.i1
        same = np.fromiter(map(str.__eq__, a_keys[g.i1:g.i2], b_keys[g.j1:g.j2]), dtype=bool, count=n)
        base_parts.append(np.arange(g.i1, g.i2, dtype=np.int64))
        opt_parts.append(np.arange(g.j1, g.j2, dtype=np.int64))
        ones = np.ones(n, dtype=np.int64)
        size_parts.append((ones, ones, np.where(same, key_code, seq_code)))
    flush()

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    return Alignment(joined(base_parts), joined([p[0] for p in size_parts]), joined(opt_parts),
                     joined([p[1] for p in size_parts]), joined([p[2] for p in size_parts]), a_keys, b_keys)


def _opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes between ``a`` and ``b``, the common head and tail paired as they stand.

    SequenceMatcher (no autojunk: a model's repeated operators are its structure) costs time
    quadratic in the repeats of each name; two captures of one model share most of their
    sequence, so only the stretch between the common head and tail goes through it.
    """
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    a_mid, b_mid = a[head:len(a) - tail], b[head:len(b) - tail]
    out: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    if a_mid or b_mid:
        middle = SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_opcodes()
        out.extend((tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in middle)
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def _order_key(groups: list[_Group | _Run], n_opt: int):
    """Sort key: baseline position; an optimized-only group follows what precedes it in its profile."""
    opt_to_base = np.full(n_opt, -1.0)  # each paired optimized operator's group's first baseline position
    for g in groups:
        if isinstance(g, _Run):
            opt_to_base[g.j1:g.j2] = np.arange(g.i1, g.i2)
        elif g.base:
            opt_to_base[g.opt] = float(min(g.base))
    # running[j]: the latest baseline position among the optimized operators up to j
    running = np.maximum.accumulate(opt_to_base).tolist() if n_opt else []

    def key(g: _Group | _Run) -> float:
        if isinstance(g, _Run):
            return float(g.i1)
        if g.base:
            return float(min(g.base))
        first = min(g.opt)
        return (running[first - 1] if first else -1.0) + 0.5

    return key


def _segments(a_idx: list[int], b_idx: list[int], a_roles: list[str], b_roles: list[str],
              ) -> Iterator[tuple[list[int], list[int]] | _Group]:
    """Split a large stretch so role matching stays cheap: at anchors, else into proportional chunks.

    An anchor role occurs equally often on both sides (e.g. one LayerNorm per layer in each
    profile); its i-th occurrences are paired and cut the stretch into layer-sized pieces.
    """
    if len(a_idx) * len(b_idx) <= _SMALL_STRETCH or not a_idx or not b_idx:
        yield a_idx, b_idx
        return
    count_a = Counter(a_roles[i] for i in a_idx)
    count_b = Counter(b_roles[j] for j in b_idx)
    anchors = [r for r, n in count_a.items() if n >= 2 and count_b.get(r) == n]
    if not anchors:
        chunks = -(-len(a_idx) // _CHUNK_OPS)
        for c in range(chunks):
            a_lo, a_hi = c * len(a_idx) // chunks, (c + 1) * len(a_idx) // chunks
            b_lo, b_hi = c * len(b_idx) // chunks, (c + 1) * len(b_idx) // chunks
            yield a_idx[a_lo:a_hi], b_idx[b_lo:b_hi]
        return
    role = max(anchors, key=lambda r: (count_a[r], r))
    cuts_a = [n for n, i in enumerate(a_idx) if a_roles[i] == role]
    cuts_b = [n for n, j in enumerate(b_idx) if b_roles[j] == role]
    prev_a = prev_b = 0
    for ca, cb in zip(cuts_a, cuts_b, strict=True):
        yield from _segments(a_idx[prev_a:ca], b_idx[prev_b:cb], a_roles, b_roles)
        yield _Group([a_idx[ca]], [b_idx[cb]], AlignMethod.CLASS_POSITION)
        prev_a, prev_b = ca + 1, cb + 1
    yield from _segments(a_idx[prev_a:], b_idx[prev_b:], a_roles, b_roles)


def _align_stretch(a_ops: Sequence[Operator], b_ops: Sequence[Operator], a_roles: list[str], b_roles: list[str],
                   a_range: list[int], b_range: list[int], neighbours: list[_Group]) -> list[_Group]:
    """Pair a stretch by role, then absorb the leftovers (see the module docstring)."""
    paired: list[_Group] = []
    a_left, b_left = list(a_range), list(b_range)
    if a_left and b_left:
        roles = SequenceMatcher(None, [a_roles[i] for i in a_left], [b_roles[j] for j in b_left],
                                autojunk=False)
        taken_a, taken_b = set(), set()
        for block in roles.get_matching_blocks():
            for k in range(block.size):
                i, j = a_left[block.a + k], b_left[block.b + k]
                paired.append(_Group([i], [j], AlignMethod.CLASS_POSITION))
                taken_a.add(i)
                taken_b.add(j)
        a_left = [i for i in a_left if i not in taken_a]
        b_left = [j for j in b_left if j not in taken_b]
    leftovers: list[_Group] = []
    candidates = neighbours + paired
    for i in a_left:
        target = _fused_target(i, a_ops[i], candidates, b_ops, side="opt") or _role_target(
            i, a_roles[i], paired, a_roles, side="base")
        if target is None:
            leftovers.append(_Group([i], [], AlignMethod.ONLY_BASE))
        else:
            target.base.append(i)
            target.method = AlignMethod.FUSED
    for j in b_left:
        target = _fused_target(j, b_ops[j], candidates, a_ops, side="base") or _role_target(
            j, b_roles[j], paired, b_roles, side="opt")
        if target is None:
            leftovers.append(_Group([], [j], AlignMethod.ONLY_OPT))
        else:
            target.opt.append(j)
            target.method = AlignMethod.FUSED
    for g in paired:
        g.base.sort()
        g.opt.sort()
    return paired + leftovers


def _fused_target(index: int, op: Operator, groups: list[_Group], other_ops: Sequence[Operator],
                  side: str) -> _Group | None:
    """The nearest group linked to ``op`` by name or fused_with, in either direction (earlier on ties)."""
    fused = {aten_name(f) for f in op.fused_with}
    best: tuple[int, int] | None = None
    chosen = None
    for g in groups:
        members = g.opt if side == "opt" else g.base
        own = g.base if side == "opt" else g.opt
        # op names a member among the ops it fused, a member names op among its own, or both carry
        # one name (an epilogue filed under "aten::addmm" beside the GEMM that absorbed it).
        linked = any(other_ops[k].name in fused or other_ops[k].name == op.name
                     or op.name in {aten_name(f) for f in other_ops[k].fused_with} for k in members)
        if not own or not linked:
            continue
        distance = min(abs(k - index) for k in own)
        rank = (distance, 0 if min(own) < index else 1)
        if best is None or rank < best:
            best, chosen = rank, g
    return chosen


def _role_target(index: int, role: str, groups: list[_Group], roles: list[str], side: str) -> _Group | None:
    """The nearest paired group of the same role, earlier in the stretch first."""
    def position(g: _Group) -> int:
        return (g.base if side == "base" else g.opt)[0]

    same = [g for g in groups if roles[position(g)] == role]
    earlier = [g for g in same if position(g) < index]
    if earlier:
        return max(earlier, key=position)
    later = [g for g in same if position(g) > index]
    return min(later, key=position) if later else None


def _absorb_into_next(groups: list[_Group | _Run], a_ops: Sequence[Operator], b_ops: Sequence[Operator]) -> None:
    """One-sided operators right before a two-sided group join it when that group fused them (a run
    following a one-sided group has its first pair split off: :func:`_split_after_one_sided`)."""
    for pos, g in enumerate(groups):
        if isinstance(g, _Run) or (g.base and g.opt):
            continue
        nxt = next((h for h in groups[pos + 1:pos + 2] if isinstance(h, _Group) and h.base and h.opt), None)
        if nxt is None:
            continue
        op = a_ops[g.base[0]] if g.base else b_ops[g.opt[0]]
        other = b_ops if g.base else a_ops
        members = nxt.opt if g.base else nxt.base
        if {aten_name(f) for f in op.fused_with} & {other[k].name for k in members}:
            (nxt.base if g.base else nxt.opt).extend(g.base or g.opt)
            nxt.method = AlignMethod.FUSED
            g.base, g.opt = [], []
