"""Per-operator roofline: where each operator stands against the chip's compute and memory roofs.

For one operator with timeline time ``t``, FLOPs ``W`` (split by roof: fp32, bf16_tensor ...)
and DRAM traffic ``Q`` (read + written bytes, ncu)::

    arithmetic intensity  I = W / Q                 achieved  W / t,  Q / t
    compute time floor    t_c = sum_r W_r / peak_r  memory time floor  t_m = Q / bandwidth
    roofline time         t_roof = max(t_c, t_m)    bound: compute if t_c >= t_m, else memory
    fraction of roofline  t_roof / t                headroom  t - t_roof (what reaching the roof saves)

FLOPs are the useful work: for a GEMM, convolution or attention call whose shapes are recorded,
the count its shapes give (metrics/flop_model.py: 2MNK for a GEMM), whatever the counters add
(FP32 attention emulated in 3xTF32 runs each product three times) or miss; elsewhere the
measured count (ncu's FLOP counters). Both are kept, and a disagreement beyond ``DISAGREEMENT``
is flagged with both figures. The roofs a modelled count runs on are the counters' split scaled
to the model where the capture has counters, else read off the kernel name (gemm_precision) and
the tensor-pipe activity, and the note says so. Roofs are the
published dense peaks (metrics/peaks.py), or the figures measured on the chip where asked for
(``measured_roofs=True``): those are what a kernel can attain, so gain bounds use them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from itertools import filterfalse
from typing import Literal, NamedTuple

import numpy as np

from profiler_core.attribution.columns import Positional, row_codes, stable_order
from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.attribution.operator_class import gemm_precision
from profiler_core.attribution.operator_parquet import OperatorColumns, OperatorModels
from profiler_core.metrics.flop_counters import MEASURED_FLOP_FIELDS, MeasuredFlops, measured_flops
from profiler_core.metrics.flop_model import modelled_flops
from profiler_core.metrics.peaks import ChipPeaks, peaks_for_gpu
from profiler_core.schema import Kernel, Operator, Profile

DISAGREEMENT = 0.25  # |measured / modelled - 1| above this is flagged
FAR_BELOW = 0.10  # fraction of roofline under which an operator is "far below both roofs"
# the counters an operator's row reads: its FLOP counters, DRAM bytes and tensor-pipe activity
_READ_FIELDS = (*MEASURED_FLOP_FIELDS, "dram_bytes_read", "dram_bytes_written", "tensor_core_active_pct")
FlopSource = Literal["measured", "modelled"]
Bound = Literal["compute", "memory"]
_PRECISION_ROOF = {"fp32": "fp32", "tf32": "tf32_tensor", "bf16": "bf16_tensor", "fp16/bf16": "fp16_tensor",
                   "fp16": "fp16_tensor", "fp8": "fp8_tensor"}


@dataclass(frozen=True, slots=True)  # slots: a large profile holds a row per operator (a dict each: 0.8 KB)
class OperatorRoofline:
    """One operator's roofline position (times in ns, rates per second)."""

    key: str
    name: str
    op_class: str
    duration_ns: int
    module_path: str | None
    flops: float | None  # the figure used
    flop_source: FlopSource | None
    flops_measured: float | None
    flops_modelled: float | None
    flop_formula: str | None
    flops_by_roof: dict[str, float]
    dram_bytes: float | None
    roof: str | None  # the roof carrying most of the work
    arithmetic_intensity: float | None  # FLOP per DRAM byte
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    bound: Bound | None
    roofline_time_ns: float | None
    fraction_of_roofline: float | None
    headroom_ns: float | None
    disagreement: float | None = None  # measured / modelled - 1, when flagged
    notes: tuple[str, ...] = ()

    @property
    def far_below_roofs(self) -> bool:
        return self.fraction_of_roofline is not None and self.fraction_of_roofline < FAR_BELOW


@dataclass(frozen=True)
class ClassRoofline:
    """An operator class summed: its FLOPs, bytes, time and roofline position."""

    op_class: str
    operators: int
    duration_ns: int
    flops: float | None
    dram_bytes: float | None
    arithmetic_intensity: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    roofline_time_ns: float | None
    headroom_ns: float | None


class RowFigures(NamedTuple):
    """What a sum over rows reads of one row."""

    duration_ns: int
    flops: float | None
    dram_bytes: float | None
    roofline_time_ns: float | None


@dataclass(frozen=True)
class PlotPoints:
    """Rows of a roofline as a chart places them, one list per figure, row order kept."""

    op_class: list[str]
    intensity: list[float | None]  # arithmetic_intensity
    achieved: list[float | None]  # achieved_flops_per_s
    duration_ns: list[int]

    def __len__(self) -> int:
        return len(self.duration_ns)


@dataclass(frozen=True)
class Roofline:
    """The roofline of one profile.

    ``operators``: one row per operator with time; :func:`roofline` gives a :class:`RooflineRows`,
    which builds a row when it is first read, and the selections below read its columns instead of
    the rows (any other sequence of rows is read row by row, with the same answers).
    """

    chip: ChipPeaks | None
    measured_roofs: bool
    operators: Sequence[OperatorRoofline] = field(default_factory=list)
    classes: list[ClassRoofline] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def bandwidth(self) -> float | None:
        return self.chip.bandwidth(measured=self.measured_roofs) if self.chip else None

    def peak(self, roof: str) -> float | None:
        return self.chip.flops_per_s(roof, measured=self.measured_roofs) if self.chip else None

    def by_key(self) -> Mapping[str, OperatorRoofline]:
        """Each key's row (the last row of a repeated key), built when it is looked up."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return _RowsByKey(rows)
        return {r.key: r for r in rows}

    def far_below(self) -> list[int]:
        """Positions of the rows under ``FAR_BELOW`` of their roofline that moved DRAM bytes
        (``r.far_below_roofs and r.dram_bytes``), in row order."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return np.flatnonzero(rows.far_below_mask()).tolist()
        return [j for j, r in enumerate(rows) if r.far_below_roofs and r.dram_bytes]

    def figures_of(self, keys: Iterable[str]) -> list[RowFigures | None]:
        """The :class:`RowFigures` of each key's row (the last of a repeated key), None for a key
        without one; no row is built."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            index = rows.key_index
            return [None if (j := index.get(k)) is None else rows.figures(j) for k in keys]
        by_key = self.by_key()
        return [None if (r := by_key.get(k)) is None else RowFigures(r.duration_ns, r.flops, r.dram_bytes,
                                                                      r.roofline_time_ns) for k in keys]

    def plot_points(self) -> PlotPoints:
        """The rows a roofline chart can place (``flops and dram_bytes and duration_ns > 0``), as columns."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return rows.plot_points()
        placed = [r for r in rows if r.flops and r.dram_bytes and r.duration_ns > 0]
        return PlotPoints(op_class=[r.op_class for r in placed], intensity=[r.arithmetic_intensity for r in placed],
                          achieved=[r.achieved_flops_per_s for r in placed],
                          duration_ns=[r.duration_ns for r in placed])

    def time_above_floor(self, keys: Iterable[str], peak: float, bandwidth: float, byte_scale: float,
                         ) -> tuple[list[float], int]:
        """What each key's row could gain at most under a roof of ``peak`` FLOP/s and ``bandwidth``
        B/s with its bytes scaled by ``byte_scale``: its time less ``max(flops / peak, bytes *
        byte_scale / bandwidth)`` (not below 0), or its whole time where its FLOPs or bytes are
        unknown (keys without a row are left out); and how many rows had a floor."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return rows.time_above_floor(keys, peak, bandwidth, byte_scale)
        terms: list[float] = []
        floors = 0
        for figures in self.figures_of(keys):
            if figures is None:
                continue
            duration_ns, flops, dram_bytes, _ = figures
            if not flops or dram_bytes is None:
                terms.append(float(duration_ns))
                continue
            floor_ns = max(flops / peak, dram_bytes * byte_scale / bandwidth) * 1e9
            terms.append(max(0.0, duration_ns - floor_ns))
            floors += 1
        return terms, floors

    def keys_at(self, positions: Sequence[int]) -> list[str]:
        """The operator keys of the rows at ``positions``."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return [rows.key(j) for j in positions]
        return [rows[j].key for j in positions]

    def headroom_at(self, positions: Sequence[int]) -> list[float | None]:
        """``headroom_ns`` of the rows at ``positions``."""
        rows = self.operators
        if isinstance(rows, RooflineRows):
            return rows.headroom_at(positions)
        return [rows[j].headroom_ns for j in positions]

    def most_headroom(self, k: int, positions: Sequence[int] | None = None, *,
                      with_headroom: bool = False) -> list[OperatorRoofline]:
        """The ``k`` rows (of ``positions``, default all) with the most headroom, ties in row order:
        ``sorted(rows, key=-(headroom or 0))[:k]``. ``with_headroom``: rows of no (or zero) headroom left out."""
        rows = self.operators
        at = range(len(rows)) if positions is None else positions
        if isinstance(rows, RooflineRows):
            return [rows[j] for j in rows.most_headroom(k, at, with_headroom=with_headroom)]
        heads = self.headroom_at(at)
        order = sorted((j for j, h in enumerate(heads) if h or not with_headroom), key=lambda j: -(heads[j] or 0))
        return [rows[at[j]] for j in order[:k]]


def roofline(profile: Profile, *, measured_roofs: bool = False, chip: ChipPeaks | None = None,
             kernels: Sequence[Kernel] | None = None, operators: Sequence[Operator] | None = None,
             op_keys: list[str] | None = None, op_index: Mapping[str, int] | None = None) -> Roofline:
    """Every operator's roofline position against ``chip`` (default: the profile's GPU).

    ``kernels`` and ``operators``: the profile's, already built as models (a ProfileView holds them),
    so a large profile's tables are not turned into models again. ``op_keys``: each of ``operators``'
    key, and ``op_index``: each key's position (keys distinct), where the caller holds them already.
    """
    peaks = chip or peaks_for_gpu(profile.capture.gpu_name)
    warnings: list[str] = []
    if peaks is None:
        warnings.append(f"no roofs known for GPU {profile.capture.gpu_name!r}: FLOPs and intensity only "
                        "(metrics/peaks.py lists the chips with roofs)")
    kernels = profile.kernels if kernels is None else kernels
    n_kernels = len(kernels)
    operators = profile.operators if operators is None else operators
    # A large profile repeats a few operator calls (name, shapes, counters, kernels) many times
    # over: what does not depend on an operator's time is worked out once per distinct call.
    calls = _call_codes(profile, len(operators))
    table = profile.operators
    if calls is not None and isinstance(table, OperatorColumns):  # read from tables: time and calls off the columns
        rows = _rows_of_calls(operators, table.duration_ns, calls,
                              _kernel_names(kernels, profile.kernels), peaks, measured_roofs)
        rows.share_keys(op_keys, op_index)
        return _with_warnings(rows, peaks, measured_roofs, warnings)
    works: dict[object, int] = {}
    work_list: list[_Work] = []
    shape_keys: dict[int, tuple[object, str]] = {}
    at: list[int] = []
    of_work: list[int] = []
    for g, op in enumerate(operators):
        if op.duration_ns <= 0:
            continue
        names: tuple[str, ...] | None = None
        if calls is not None:
            key: object = calls[g]
        else:
            names = tuple(kernels[i].name for i in op.kernel_ids if i < n_kernels)
            key = (op.name, _shapes_key(op.input_shapes, shape_keys), names,
                   exact_key(map(op.metrics.get, _READ_FIELDS)))
        w = works.get(key)
        if w is None:
            if names is None:
                names = tuple(kernels[i].name for i in op.kernel_ids if i < n_kernels)
            w = works[key] = len(work_list)
            work_list.append(_work(op, names, peaks, measured_roofs))
        at.append(g)
        of_work.append(w)
    rows = RooflineRows(operators, np.array(at, dtype=np.int64), np.array(of_work, dtype=np.int64), work_list)
    rows.share_keys(op_keys, op_index)
    return _with_warnings(rows, peaks, measured_roofs, warnings)


def _kernel_names(kernels: Sequence[Kernel], table: Sequence[Kernel]) -> Callable[[Iterable[int]], tuple[str, ...]]:
    """The names of the kernels of ids ``ids`` that ``kernels`` lists (by position, as the loop over
    operators reads them): off the table's name column where ``kernels`` are its models."""
    n_kernels = len(kernels)
    if isinstance(table, KernelTable) and len(table) == n_kernels:  # kernel i is the table's row i
        texts, codes = table.strings.values, table.name

        def of_table(ids: Iterable[int]) -> tuple[str, ...]:
            at = np.array([i for i in ids if i < n_kernels], dtype=np.int64)
            return tuple(texts[c] for c in codes[at].tolist())

        return of_table
    return lambda ids: tuple(kernels[i].name for i in ids if i < n_kernels)


def _rows_of_calls(operators: Sequence[Operator], durations: np.ndarray, calls: np.ndarray,
                   kernel_names: Callable[[Iterable[int]], tuple[str, ...]], peaks: ChipPeaks | None,
                   measured_roofs: bool) -> RooflineRows:
    """The rows of the operators with time, each call's time-free part worked out on the first
    operator making it (as the loop over operators does), from each operator's time and call number."""
    at = np.flatnonzero(durations > 0)
    codes = calls[at]
    n_calls = int(codes.max()) + 1 if len(codes) else 0
    first = np.full(n_calls, len(at), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(at)))  # each call's first row
    made = first < len(at)
    of_work = (np.cumsum(made) - 1)[codes]  # the calls made, numbered in call order
    works = []
    for g in at[first[made]].tolist():
        op = operators[g]
        works.append(_work(op, kernel_names(op.kernel_ids), peaks, measured_roofs))
    return RooflineRows(operators, at, of_work, works, durations=durations[at])


def _with_warnings(rows: RooflineRows, peaks: ChipPeaks | None, measured_roofs: bool,
                   warnings: list[str]) -> Roofline:
    flagged = rows.disagreeing()
    if len(flagged):
        first = rows[int(flagged[0])]
        warnings.append(f"{len(flagged)} operators' measured FLOPs differ from the shape model by more than "
                        f"{DISAGREEMENT:.0%} (first: {first.key}, {first.disagreement:+.0%})")
    return Roofline(chip=peaks, measured_roofs=measured_roofs, operators=rows, classes=rows.classes(),
                    warnings=warnings)


class RooflineRows(Positional[OperatorRoofline]):
    """The roofline's operator rows, each built (by :func:`_operator`) when first read, then kept.

    Row ``j`` is operator ``operators[at[j]]`` against its call's time-free part ``works[of_work[j]]``.
    What the rule, the report and the class totals select (rows far below the roofs, the most
    headroom, per-class sums) is read off columns of the same figures, worked out as
    :func:`_operator` works them out, so a large profile builds only the rows it shows.
    """

    def __init__(self, operators: Sequence[Operator], at: np.ndarray, of_work: np.ndarray,
                 works: list[_Work], *, durations: np.ndarray | None = None) -> None:
        """``durations``: each row's operator's time, where it is already a column."""
        self._ops = operators
        self._at_op = at
        self._of_work = of_work
        self._works = works
        self._rows: list[OperatorRoofline | None] = [None] * len(at)
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if durations is not None:
            self._durations = durations.astype(np.int64)

    def __len__(self) -> int:
        return len(self._at_op)

    def _at(self, j: int) -> OperatorRoofline:
        row = self._rows[j]
        if row is None:
            row = self._rows[j] = _operator(self._ops[int(self._at_op[j])], self._works[int(self._of_work[j])])
        return row

    def __iter__(self) -> Iterator[OperatorRoofline]:
        return map(self._at, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal as a list of rows is, so not hashable

    def share_keys(self, op_keys: list[str] | None, op_index: Mapping[str, int] | None) -> None:
        """Take the operators' keys (by position) and, keys distinct, their key index from the caller
        (a ProfileView holds both) instead of making them again."""
        if op_keys is not None and len(op_keys) == len(self._ops):
            self.__dict__["_op_keys"] = op_keys
            if op_index is not None:
                self.__dict__["key_index"] = _RowsOfKeys(op_index, self._at_op, op_keys)

    @cached_property
    def _op_keys(self) -> list[str]:
        """Every operator's key, by position (off the table where the operators are a table's)."""
        ops = self._ops
        return ops.table.keys.to_pylist() if isinstance(ops, OperatorModels) else [op.key for op in ops]

    def key(self, j: int) -> str:
        return self._op_keys[int(self._at_op[j])]

    @cached_property
    def key_index(self) -> Mapping[str, int]:
        """Each key's position (the last of a repeated key)."""
        keys = self._op_keys
        return {keys[g]: j for j, g in enumerate(self._at_op.tolist())}


    def time_above_floor(self, keys: Iterable[str], peak: float, bandwidth: float, byte_scale: float,
                         ) -> tuple[list[float], int]:
        """:meth:`Roofline.time_above_floor` on the columns (Python's ``max`` kept: NaN loses)."""
        index = self.key_index
        at = np.array([j for k in keys if (j := index.get(k)) is not None], dtype=np.int64)
        duration = self._durations[at].astype(np.float64)
        flops, flops_known = (a[at] for a in self._work_column("flops"))
        dram, dram_known = (a[at] for a in self._work_column("dram"))
        floored = flops_known & (flops != 0.0) & dram_known  # ``flops`` truthy (NaN is) and bytes known
        by_flops, by_bytes = flops / peak, dram * byte_scale / bandwidth
        with np.errstate(invalid="ignore"):
            floor_ns = np.where(by_bytes > by_flops, by_bytes, by_flops) * 1e9
            left = duration - floor_ns
            terms = np.where(floored, np.where(left > 0.0, left, 0.0), duration)
        return terms.tolist(), int(floored.sum())

    def figures(self, j: int) -> RowFigures:
        """Row ``j``'s :class:`RowFigures`, read without building it."""
        work = self._works[int(self._of_work[j])]
        return RowFigures(int(self._durations[j]), work.flops, work.dram,
                          work.t_roof * 1e9 if work.t_roof is not None else None)

    @cached_property
    def _durations(self) -> np.ndarray:
        """Each row's operator's stored time (off the table where the operators are a table's)."""
        ops, at = self._ops, self._at_op.tolist()
        if isinstance(ops, OperatorModels):
            return ops.table.duration_ns[self._at_op]
        return np.fromiter((ops[g].duration_ns for g in at), dtype=np.int64, count=len(at))

    def _work_column(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A :class:`_Work` figure of every row: values (0.0 where None) and whether known (kept: the
        tightening reads them once per finding)."""
        hit = self._columns.get(name)
        if hit is None:
            vals = [getattr(w, name) for w in self._works]
            known = np.array([v is not None for v in vals], dtype=bool)
            values = np.array([0.0 if v is None else v for v in vals], dtype=np.float64)
            hit = self._columns[name] = (values[self._of_work], known[self._of_work])
        return hit

    @cached_property
    def _headroom(self) -> tuple[np.ndarray, np.ndarray]:
        """``headroom_ns``: ``max(0.0, duration - t_roof * 1e9)`` (0.0 for NaN and -0.0, as ``max`` keeps
        its first argument unless the second is greater)."""
        t_roof, known = self._work_column("t_roof")
        left = self._durations - t_roof * 1e9
        return np.where(left > 0.0, left, 0.0), known

    def far_below_mask(self) -> np.ndarray:
        """``far_below_roofs and dram_bytes`` of every row (NaN bytes are truthy, as in Python)."""
        t_roof, known = self._work_column("t_roof")
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = t_roof / (self._durations * 1e-9)
        dram, dram_known = self._work_column("dram")
        return known & (fraction < FAR_BELOW) & dram_known & (dram != 0.0)

    def headroom_at(self, positions: Sequence[int]) -> list[float | None]:
        head, known = self._headroom
        at = np.asarray(positions, dtype=np.int64)
        return [h if k else None for h, k in zip(head[at].tolist(), known[at].tolist(), strict=True)]

    def most_headroom(self, k: int, positions: Sequence[int], *, with_headroom: bool) -> list[int]:
        """:meth:`Roofline.most_headroom`'s positions: a stable sort on ``-(headroom or 0)``."""
        head, known = self._headroom
        at = np.asarray(positions, dtype=np.int64)
        h = np.where(known[at], head[at], 0.0)  # headroom is never NaN: None and 0.0 count as 0
        if with_headroom:
            at, h = at[h != 0.0], h[h != 0.0]
        return at[np.argsort(-h, kind="stable")[:k]].tolist()

    def plot_points(self) -> PlotPoints:
        """:meth:`Roofline.plot_points` read off the columns: a row's intensity is its call's, its
        achieved FLOP/s its call's FLOPs over its own time (as :func:`_operator` divides them)."""
        durations = self._durations
        flops, flops_known = self._work_column("flops")
        dram, dram_known = self._work_column("dram")
        # truthy as in Python: known and not zero (NaN is truthy)
        at = np.flatnonzero(flops_known & (flops != 0.0) & dram_known & (dram != 0.0) & (durations > 0))
        works, of_work = self._works, self._of_work[at].tolist()
        return PlotPoints(op_class=self._class_values(self._at_op[at]),
                          intensity=[works[w].intensity for w in of_work],
                          achieved=(flops[at] / (durations[at] * 1e-9)).tolist(),
                          duration_ns=durations[at].tolist())

    def _class_values(self, positions: np.ndarray) -> list[str]:
        """The class (its value) of the operators at ``positions``: off the table's codes, without a
        model, where the operators are a table's."""
        ops = self._ops
        if isinstance(ops, OperatorModels):
            class_codes, class_values = ops.table.codes("op_class")
            return [class_values[c].value for c in class_codes[positions].tolist()]
        return [ops[g].op_class.value for g in positions.tolist()]

    def _class_codes(self, positions: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """The class of the operators at ``positions`` as a number per operator, numbered by the
        class's first operator, and the classes (their values) by number: off the table's codes,
        without a model, where the operators are a table's."""
        ops = self._ops
        if not isinstance(ops, OperatorModels):
            numbers: dict[str, int] = {}
            code = np.fromiter((numbers.setdefault(c, len(numbers)) for c in self._class_values(positions)),
                               dtype=np.int64, count=len(positions))
            return code, list(numbers)
        class_codes, class_values = ops.table.codes("op_class")
        distinct: dict[str, int] = {}  # a value the dictionary holds twice: one number
        of_code = np.array([-1 if v is None else distinct.setdefault(v.value, len(distinct)) for v in class_values],
                           dtype=np.int64)
        code, first = row_codes(np.empty((len(positions), 0)), of_code[class_codes[positions]])
        names = list(distinct)
        return code, [names[d] for d in of_code[class_codes[positions[first]]].tolist()]

    def disagreeing(self) -> np.ndarray:
        """Positions of the rows whose measured FLOPs disagree with the shape model."""
        flagged = np.array([w.disagreement is not None for w in self._works] + [False], dtype=bool)
        return np.flatnonzero(flagged[self._of_work])

    def classes(self) -> list[ClassRoofline]:
        """Each operator class's totals over the rows, read off the columns (sums in row order, as
        ``sum`` adds), largest time first."""
        if not len(self):
            return []
        code, codes = self._class_codes(self._at_op)
        durations = self._durations
        flops = [w.flops for w in self._works]
        dram = [w.dram for w in self._works]
        t_roof, t_known = self._work_column("t_roof")
        roof_ns = t_roof * 1e9
        head, _ = self._headroom
        order = stable_order(code)
        bounds = np.searchsorted(code[order], np.arange(len(codes) + 1))
        out = []
        for c, op_class in enumerate(codes):
            members = order[bounds[c]:bounds[c + 1]]
            t_ns = int(durations[members].sum())
            of_work = self._of_work[members].tolist()
            f = _sum_or_none([flops[w] for w in of_work])  # the figures themselves, added as the rows' are
            d = _sum_or_none([dram[w] for w in of_work])
            seconds = t_ns * 1e-9
            out.append(ClassRoofline(
                op_class=op_class, operators=len(members), duration_ns=t_ns, flops=f, dram_bytes=d,
                arithmetic_intensity=f / d if f is not None and d else None,
                achieved_flops_per_s=f / seconds if f is not None and seconds else None,
                achieved_bytes_per_s=d / seconds if d is not None and seconds else None,
                roofline_time_ns=_sum_or_none(roof_ns[members][t_known[members]].tolist()),
                headroom_ns=_sum_or_none(head[members][t_known[members]].tolist())))
        out.sort(key=lambda c: -c.duration_ns)
        return out


class _RowsOfKeys(Mapping[str, int]):
    """:attr:`RooflineRows.key_index` through an index of every operator's key (keys distinct): a
    key's operator position, then that operator's row, with no second dict of every key."""

    def __init__(self, op_index: Mapping[str, int], at_op: np.ndarray, op_keys: list[str]) -> None:
        self._index, self._at, self._keys = op_index, at_op, op_keys
        self._row_of = np.full(len(op_keys), -1, dtype=np.int64)
        self._row_of[at_op] = np.arange(len(at_op))

    def get(self, key: str, default: int | None = None) -> int | None:  # type: ignore[override]
        g = self._index.get(key)
        j = -1 if g is None else int(self._row_of[g])
        return default if j < 0 else j

    def __getitem__(self, key: str) -> int:
        j = self.get(key)
        if j is None:
            raise KeyError(key)
        return j

    def __iter__(self) -> Iterator[str]:
        return (self._keys[g] for g in self._at.tolist())

    def __len__(self) -> int:
        return len(self._at)


def _sum_or_none(values: list[float | None]) -> float | None:
    """The sum of the values that are known, added one by one in order; None when none is (a class
    total over what was measured)."""
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


class _RowsByKey(Mapping[str, OperatorRoofline]):
    """Rows by operator key (the last row of a repeated key), each built when looked up."""

    def __init__(self, rows: RooflineRows) -> None:
        self._rows = rows
        self._index = rows.key_index

    def __getitem__(self, key: str) -> OperatorRoofline:
        return self._rows[self._index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index


def _call_codes(profile: Profile, n_operators: int) -> np.ndarray | None:
    """Each operator's distinct call (what its row's time-free part depends on: name, shapes,
    kernel names, the counters read) as a number, in order of first appearance, worked out on the
    columns of a profile read from tables; None for a profile of models, or ``n_operators`` not
    the table's length.

    Equal numbers mean equal calls; equal calls may get two numbers (a kernel id past the kernel
    table, a dictionary holding one text twice), which only works one call out twice.
    """
    ops, ks = profile.operators, profile.kernels
    if not isinstance(ops, OperatorColumns) or not isinstance(ks, KernelTable) or len(ops) != n_operators:
        return None
    read = [ops.metric_fields.index(f) for f in _READ_FIELDS if f in ops.metric_fields]
    counters, _ = row_codes(ops.metrics[:, read])  # 0.0 and -0.0 apart, as exact_key has them
    members = ops.members
    n_kernels = len(ks)
    kernel_names = np.where(members < n_kernels, ks.name[np.minimum(members, max(n_kernels - 1, 0))]
                            if n_kernels else -1, -1)
    offsets = ops.offsets[:len(ops) + 1]
    lengths = np.diff(offsets)
    # each operator's sequence of kernel names as a number among the sequences of its length
    sequence = np.zeros(len(ops), dtype=np.int64)
    for length in np.flatnonzero(np.bincount(lengths)).tolist():
        if length == 0:
            continue
        at = np.flatnonzero(lengths == length)
        if length <= _GATHERED_LENGTH:  # gathered as a matrix, a column per kernel
            names = kernel_names[offsets[at][:, None] + np.arange(length)]
            sequence[at], _ = row_codes(np.empty((len(at), 0)), *names.T)
        else:  # a few long sequences
            seen: dict[tuple[int, ...], int] = {}
            sequence[at] = [seen.setdefault(tuple(kernel_names[lo:hi].tolist()), len(seen))
                            for lo, hi in zip(offsets[at].tolist(), offsets[at + 1].tolist(), strict=True)]
    numbers, _ = row_codes(np.empty((len(ops), 0)), ops.name.codes, ops.shapes.codes, counters, lengths, sequence)
    return numbers


_GATHERED_LENGTH = 32  # kernels per operator up to which the kernel-name sequences are compared as a matrix


def exact_key(values: Iterable[object]) -> tuple[object, ...]:
    """A hashable key under which two runs of values are equal only where they are identical: ``1``,
    ``1.0`` and ``True`` differ, and so do ``0.0`` and ``-0.0`` (equal as numbers, not as text)."""
    vals = tuple(values)
    return vals, tuple(map(type, vals)), tuple(map(repr, filterfalse(None, vals)))


def _shapes_key(shapes: object, known: dict[int, tuple[object, str]]) -> str:
    """``shapes`` as JSON text (ints, floats and bools apart), worked out once per list: the
    operators read from a table share one list per distinct input signature."""
    hit = known.get(id(shapes))
    if hit is not None and hit[0] is shapes:
        return hit[1]
    text = json.dumps(shapes, default=repr)
    known[id(shapes)] = (shapes, text)  # the list is held, so its id is not reused meanwhile
    return text


@dataclass(frozen=True)
class _Work:
    """What an operator's roofline row holds that its time does not change: FLOPs, bytes, floors."""

    flops: float | None
    source: FlopSource | None
    flops_measured: float | None
    flops_modelled: float | None
    formula: str | None
    by_roof: dict[str, float]
    dram: float | None
    dominant: str | None
    intensity: float | None
    t_roof: float | None
    bound: Bound | None
    disagreement: float | None
    notes: tuple[str, ...]


def _work(op: Operator, kernel_names: Sequence[str], peaks: ChipPeaks | None, measured_roofs: bool) -> _Work:
    """The time-free part of ``op``'s row: a function of its name, shapes, kernel names and the
    counters in ``_READ_FIELDS``."""
    notes: list[str] = []
    measured = measured_flops(op.metrics)
    model = None
    if kernel_names and not all(is_generated_kernel_name(n) for n in kernel_names):
        # a generated kernel's recorded shapes are its own arguments, not the operator's inputs
        model = modelled_flops(op.name, op.input_shapes)
    if model is not None and model.note:
        notes.append(model.note)
    flops_measured = measured.total if measured is not None else None
    flops_modelled = model.flops if model is not None else None
    disagreement = None
    if flops_measured and flops_modelled:
        ratio = flops_measured / flops_modelled - 1
        if abs(ratio) > DISAGREEMENT:
            disagreement = ratio
            notes.append(f"the counters read {flops_measured:.3g} FLOPs against {flops_modelled:.3g} from the shapes "
                         f"({model.formula if model else ''}): {ratio:+.0%}; the roofline uses the shapes' "
                         f"count, the useful work{_why_counters_differ(ratio, measured)}")
    by_roof: dict[str, float] = {}
    flops: float | None = None
    source: FlopSource | None = None
    if flops_modelled:
        # The useful work: a GEMM, convolution or attention call whose shapes are known does what
        # its shapes say, whatever the counters add (3xTF32 runs each product three times) or miss
        flops, source = flops_modelled, "modelled"
        if measured is not None and flops_measured:
            # the roofs the kernels ran on are the counters' to say; their split is scaled to the model
            by_roof = {r: flops_modelled * v / flops_measured for r, v in measured.by_roof.items() if v}
        else:
            roof = _roof_from_kernels(kernel_names, op.metrics.get("tensor_core_active_pct"))
            by_roof = {roof: flops_modelled}
            notes.append(f"FLOPs from the shapes ({model.formula if model else ''}); roof {roof} read off the "
                         "kernel name")
    elif measured is not None and flops_measured:
        flops, source, by_roof = flops_measured, "measured", dict(measured.by_roof)
        if not measured.complete:
            notes.append("some FLOP counters were not measured: the count covers the precisions that were")
    elif measured is not None:
        flops, source = 0.0, "measured"  # counted, and no floating-point work
    read, written = op.metrics.get("dram_bytes_read"), op.metrics.get("dram_bytes_written")
    dram = read + written if read is not None and written is not None else None
    dominant = MeasuredFlops(by_roof=by_roof).dominant_roof
    intensity = flops / dram if flops is not None and dram else None
    t_c = _compute_floor_s(by_roof, peaks, measured_roofs, notes)
    t_m = dram / peaks.bandwidth(measured=measured_roofs) if peaks is not None and dram is not None else None
    floors = [t for t in (t_c, t_m) if t is not None]
    t_roof = max(floors) if floors else None
    bound: Bound | None = None
    if t_c is not None and t_m is not None:
        bound = "compute" if t_c >= t_m else "memory"
    elif t_m is not None:
        bound = "memory"
    return _Work(flops=flops, source=source, flops_measured=flops_measured, flops_modelled=flops_modelled,
                 formula=model.formula if model else None, by_roof=by_roof, dram=dram, dominant=dominant,
                 intensity=intensity, t_roof=t_roof, bound=bound, disagreement=disagreement, notes=tuple(notes))


def _operator(op: Operator, work: _Work) -> OperatorRoofline:
    """``op``'s row: ``work`` (its time-free part) against its time."""
    seconds = op.duration_ns * 1e-9
    flops, dram, t_roof = work.flops, work.dram, work.t_roof
    fraction = t_roof / seconds if t_roof is not None and seconds > 0 else None
    notes = work.notes
    if fraction is not None and fraction > 1.05:
        notes = (*notes, "above the roof: ncu's replayed DRAM traffic (cold caches) exceeds what the timed run moved")
    return _row({
        "key": op.key, "name": op.name, "op_class": op.op_class.value, "duration_ns": op.duration_ns,
        "module_path": getattr(op, "module_path", None), "flops": flops, "flop_source": work.source,
        "flops_measured": work.flops_measured, "flops_modelled": work.flops_modelled,
        "flop_formula": work.formula, "flops_by_roof": dict(work.by_roof), "dram_bytes": dram, "roof": work.dominant,
        "arithmetic_intensity": work.intensity,
        "achieved_flops_per_s": flops / seconds if flops is not None else None,
        "achieved_bytes_per_s": dram / seconds if dram is not None else None, "bound": work.bound,
        "roofline_time_ns": t_roof * 1e9 if t_roof is not None else None, "fraction_of_roofline": fraction,
        "headroom_ns": max(0.0, op.duration_ns - t_roof * 1e9) if t_roof is not None else None,
        "disagreement": work.disagreement, "notes": notes,
    })


def _row(values: dict[str, object]) -> OperatorRoofline:
    """``OperatorRoofline(**values)`` for values naming every field, without the frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field: a sixth of the roofline of 77k
    operators): each slot is filled through its descriptor."""
    row = object.__new__(OperatorRoofline)
    for name, fill in _SLOT_SETTERS:
        fill(row, values[name])
    return row


_SLOT_SETTERS = [(f.name, getattr(OperatorRoofline, f.name).__set__) for f in fields(OperatorRoofline)]


def _why_counters_differ(ratio: float, measured: MeasuredFlops | None) -> str:
    """A known reason for a counter/model disagreement, or nothing (no guess)."""
    if measured is None:
        return ""
    roof = measured.dominant_roof
    if roof in ("fp32", "tf32_tensor") and abs(ratio - 2.0) <= 0.15:
        return " (3.0x on an FP32 kernel: 3xTF32 emulation runs each product three times)"
    return ""


def _compute_floor_s(by_roof: dict[str, float], peaks: ChipPeaks | None, measured_roofs: bool,
                     notes: list[str]) -> float | None:
    if peaks is None or not by_roof:
        return None
    total = 0.0
    for roof, flops in by_roof.items():
        peak = peaks.flops_per_s(roof, measured=measured_roofs)
        if peak is None:
            notes.append(f"{peaks.name} publishes no {roof} peak: that work is left out of the compute floor")
            continue
        total += flops / peak
    return total


def _roof_from_kernels(names: Sequence[str], tensor_active_pct: float | None) -> str:
    for name in names:
        precision = gemm_precision(name)
        if precision is not None:
            return _PRECISION_ROOF[precision]
    if tensor_active_pct is not None and tensor_active_pct > 1.0:
        # an fp32 attention kernel on tensor cores (fmha_cutlassF_f32_*) runs its MMAs as TF32
        if any(re.search(r"fmha\w*_f32_", n.lower()) for n in names):
            return "tf32_tensor"
        return "fp16_tensor"
    return "fp32"
