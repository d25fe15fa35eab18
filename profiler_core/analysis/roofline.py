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
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from itertools import filterfalse
from typing import Literal

import numpy as np

from profiler_core.attribution.columns import row_codes
from profiler_core.attribution.kernel_table import KernelTable
from profiler_core.attribution.names import is_generated_kernel_name
from profiler_core.attribution.operator_class import gemm_precision
from profiler_core.attribution.operator_parquet import OperatorColumns
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


@dataclass(frozen=True)
class Roofline:
    """The roofline of one profile."""

    chip: ChipPeaks | None
    measured_roofs: bool
    operators: list[OperatorRoofline] = field(default_factory=list)
    classes: list[ClassRoofline] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def bandwidth(self) -> float | None:
        return self.chip.bandwidth(measured=self.measured_roofs) if self.chip else None

    def peak(self, roof: str) -> float | None:
        return self.chip.flops_per_s(roof, measured=self.measured_roofs) if self.chip else None

    def by_key(self) -> dict[str, OperatorRoofline]:
        return {r.key: r for r in self.operators}


def roofline(profile: Profile, *, measured_roofs: bool = False, chip: ChipPeaks | None = None,
             kernels: Sequence[Kernel] | None = None, operators: Sequence[Operator] | None = None) -> Roofline:
    """Every operator's roofline position against ``chip`` (default: the profile's GPU).

    ``kernels`` and ``operators``: the profile's, already built as models (a ProfileView holds them),
    so a large profile's tables are not turned into models again.
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
    works: dict[object, _Work] = {}
    calls = _call_codes(profile, len(operators))
    shape_keys: dict[int, tuple[object, str]] = {}
    rows = []
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
        work = works.get(key)
        if work is None:
            if names is None:
                names = tuple(kernels[i].name for i in op.kernel_ids if i < n_kernels)
            work = works[key] = _work(op, names, peaks, measured_roofs)
        rows.append(_operator(op, work))
    flagged = [r for r in rows if r.disagreement is not None]
    if flagged:
        warnings.append(f"{len(flagged)} operators' measured FLOPs differ from the shape model by more than "
                        f"{DISAGREEMENT:.0%} (first: {flagged[0].key}, {flagged[0].disagreement:+.0%})")
    return Roofline(chip=peaks, measured_roofs=measured_roofs, operators=rows, classes=_classes(rows),
                    warnings=warnings)


def _call_codes(profile: Profile, n_operators: int) -> list[int] | None:
    """Each operator's distinct call (what its row's time-free part depends on: name, shapes,
    kernel names, the counters read) as a number, worked out on the columns of a profile read
    from tables; None for a profile of models, or ``n_operators`` not the table's length.

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
                            if n_kernels else -1, -1).tolist()
    offsets = ops.offsets.tolist()
    codes: dict[tuple[object, ...], int] = {}
    return [codes.setdefault((name, shapes, counter, tuple(kernel_names[lo:hi])), len(codes))
            for name, shapes, counter, lo, hi in zip(ops.name.codes.tolist(), ops.shapes.codes.tolist(),
                                                     counters.tolist(), offsets, offsets[1:], strict=False)]


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


def _classes(rows: Sequence[OperatorRoofline]) -> list[ClassRoofline]:
    grouped: dict[str, list[OperatorRoofline]] = defaultdict(list)
    for r in rows:
        grouped[r.op_class].append(r)
    out = []
    for op_class, members in grouped.items():
        t_ns = sum(r.duration_ns for r in members)
        flops = _sum_or_none(r.flops for r in members)
        dram = _sum_or_none(r.dram_bytes for r in members)
        roof_ns = _sum_or_none(r.roofline_time_ns for r in members)
        seconds = t_ns * 1e-9
        out.append(ClassRoofline(
            op_class=op_class, operators=len(members), duration_ns=t_ns, flops=flops, dram_bytes=dram,
            arithmetic_intensity=flops / dram if flops is not None and dram else None,
            achieved_flops_per_s=flops / seconds if flops is not None and seconds else None,
            achieved_bytes_per_s=dram / seconds if dram is not None and seconds else None,
            roofline_time_ns=roof_ns,
            headroom_ns=_sum_or_none(r.headroom_ns for r in members)))
    out.sort(key=lambda c: -c.duration_ns)
    return out


def _sum_or_none(values: object) -> float | None:
    """The sum of the values that are known; None when none is (a class total over what was measured)."""
    known = [v for v in values if v is not None]  # type: ignore[attr-defined]
    return float(sum(known)) if known else None
