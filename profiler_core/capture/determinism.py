"""Did every phase launch the same kernels? Checked before any evidence is joined.

Attribution joins phases by invocation order, so the Kineto trace, the nsys timeline and
(in full mode) the ncu rows must agree on kernel names (normalised: tools spell them
differently), count, order and grid/block sizes. Two compiles can pick different launch
configurations for the same kernel; a join that ignored that would give launches another
configuration's counters. A violation raises :class:`~profiler_core.errors.DeterminismError`
naming the first divergence and its index in each run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler_core.attribution.counter_join import dims_agree
from profiler_core.attribution.joins import launch_order
from profiler_core.attribution.names import choose_name_key, kernel_base_name, normalize_kernel_name
from profiler_core.errors import DeterminismError
from profiler_core.records import Dim3


def kernel_name_normalizer() -> Callable[[str], str]:
    """The project's kernel-name normaliser (attribution.names)."""
    return normalize_kernel_name


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch, reduced to what every tool reports."""

    name: str  # normalised
    raw_name: str
    grid: Dim3 | None
    block: Dim3 | None

    @property
    def config(self) -> tuple[str, Dim3 | None, Dim3 | None]:
        return (self.name, self.grid, self.block)

    def quoted_name(self) -> str:
        short = self.raw_name if len(self.raw_name) <= 120 else self.raw_name[:117] + "..."
        return f"'{short}'"

    def describe(self) -> str:
        dims = "" if self.grid is None and self.block is None else f" grid {self.grid} block {self.block}"
        return f"{self.quoted_name()}{dims}"


def _dim(value: Any) -> Dim3 | None:
    return tuple(int(v) for v in value) if value is not None else None  # type: ignore[return-value]


def launches(items: Sequence[Any], normalize: Callable[[str], str] | None = None) -> list[Launch]:
    """Kernel launches of TimelineKernel / CounterRow records, in launch order.

    Memcpy/memset activities are dropped (ncu measures kernels only). Timeline kernels
    are put in host launch order the way the attribution engine orders them
    (``attribution.joins.launch_order``); counter rows keep their report order.
    """
    norm = normalize or kernel_name_normalizer()
    kernels = [k for k in items if getattr(k, "kind", "kernel") == "kernel"]
    if kernels and hasattr(kernels[0], "start_ns"):
        kernels = [kernels[i] for i in launch_order(kernels)]
    return [Launch(norm(k.name), k.name, _dim(k.grid), _dim(k.block)) for k in kernels]


def _nth_index(seq: Sequence[Launch], name: str, nth: int) -> int | None:
    seen = 0
    for i, launch in enumerate(seq):
        if launch.name == name:
            if seen == nth:
                return i
            seen += 1
    return None


def _occurrence(seq: Sequence[Launch], index: int) -> int:
    name = seq[index].name
    return sum(1 for launch in seq[:index] if launch.name == name)


def check_same_launches(reference: Sequence[Launch], other: Sequence[Launch], *,
                        reference_label: str, other_label: str) -> None:
    """Raise DeterminismError at the first launch where ``other`` differs from ``reference``."""
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a.name == b.name and dims_agree(a, b):
            continue
        nth = _occurrence(reference, i)
        j = _nth_index(other, a.name, nth)
        count = sum(1 for launch in other if launch.name == a.name)
        where = (f"that launch is #{j} in {other_label}" if j is not None
                 else f"{other_label} launches that kernel only {count} time(s)")
        if a.name == b.name:
            raise DeterminismError(
                f"{other_label} and {reference_label} launch {a.quoted_name()} with different sizes at "
                f"launch #{i}: {reference_label} grid {a.grid} block {a.block}, {other_label} grid "
                f"{b.grid} block {b.block}; the phases ran differently compiled code (one Inductor cache "
                "is shared by every phase, so check for a workload that is not deterministic)"
            )
        raise DeterminismError(
            f"{other_label} diverges from {reference_label} at launch #{i}: {reference_label} launched "
            f"{a.describe()} (launch #{i} in {reference_label}; {where}), {other_label} launched "
            f"{b.describe()}; the phases must run the same kernels: make the workload deterministic "
            "(fixed shapes, no data-dependent control flow)"
        )
    if len(reference) != len(other):
        longer, shorter = (reference_label, other_label) if len(reference) > len(other) else (
            other_label, reference_label)
        extra = (reference if len(reference) > len(other) else other)[min(len(reference), len(other))]
        raise DeterminismError(
            f"{reference_label} launched {len(reference)} kernels but {other_label} {len(other)}: "
            f"{extra.describe()} is launch #{min(len(reference), len(other))} in {longer} and absent "
            f"from {shorter}; the phases must run the same kernels"
        )


def check_configs_covered(reference: Sequence[Launch], sampled: Sequence[Launch], *,
                          reference_label: str, sampled_label: str) -> None:
    """Per-config sampling: every sampled configuration was launched, and every launched one sampled."""
    ref_configs: dict[tuple[Any, ...], int] = {}
    for i, launch in enumerate(reference):
        ref_configs.setdefault(launch.config, i)
    sampled_configs: set[tuple[Any, ...]] = set()
    for j, launch in enumerate(sampled):
        sampled_configs.add(launch.config)
        if launch.config not in ref_configs:
            raise DeterminismError(
                f"{sampled_label} row #{j} measured {launch.describe()}, a configuration {reference_label} "
                "never launched; the phases ran differently compiled code"
            )
    # ncu's per-launch-config filter keys on the function, not the template instantiation:
    # two instantiations of one kernel with one launch configuration are sampled once
    sampled_by_function = {(kernel_base_name(x.raw_name), x.grid, x.block) for x in sampled}
    for config, i in ref_configs.items():
        function_config = (kernel_base_name(reference[i].raw_name), reference[i].grid, reference[i].block)
        if config not in sampled_configs and function_config not in sampled_by_function:
            raise DeterminismError(
                f"{sampled_label} measured no launch of {reference[i].describe()} (launch #{i} in "
                f"{reference_label}); the phases ran differently compiled code"
            )


@dataclass(frozen=True)
class PhaseLaunches:
    """The launches each phase of one run saw, as read back from its artifacts."""

    kineto: list[Launch]
    nsys: list[Launch] | None = None
    ncu: list[Launch] | None = None


def load_phase_launches(run_dir: Path, *, kineto: str, timeline: str | None,
                        counters_csv: str | None) -> PhaseLaunches:
    """Read each phase's kernels with the ingest readers (imported here: heavy, optional)."""
    from profiler_core.ingest import read_kineto, read_ncu, read_nsys

    norm = kernel_name_normalizer()
    kin = launches(read_kineto(run_dir / kineto).kernels, norm)
    nsys = launches(read_nsys(run_dir / timeline).kernels, norm) if timeline else None
    ncu = launches(read_ncu(run_dir / counters_csv).rows, norm) if counters_csv else None
    return PhaseLaunches(kineto=kin, nsys=nsys, ncu=ncu)


def _common_spelling(found: PhaseLaunches) -> PhaseLaunches:
    others = [launch.raw_name for seq in (found.nsys, found.ncu) if seq is not None for launch in seq]
    key, label = choose_name_key((launch.raw_name for launch in found.kineto), others)
    if label == "join_key":
        return found

    def bare(seq: Sequence[Launch]) -> list[Launch]:
        return [dataclasses.replace(x, name=key(x.raw_name)) for x in seq]

    return dataclasses.replace(found, kineto=bare(found.kineto),
                               nsys=bare(found.nsys) if found.nsys is not None else None,
                               ncu=bare(found.ncu) if found.ncu is not None else None)


def check_phases(found: PhaseLaunches, *, counter_mode: str,
                 kernels_per_iteration: int | None = None) -> list[str]:
    """Check every phase against the Kineto trace; return the labels compared.

    Demanglers differ between tools (nsys spells lambdas and template parameters its own
    way), so when the normalised names do not match as sets, the launches are compared on
    their bare identifiers; order and grid/block still guard every launch.
    """
    found = _common_spelling(found)
    compared: list[str] = []
    if found.nsys is not None:
        check_same_launches(found.kineto, found.nsys, reference_label="the Kineto trace",
                            other_label="the nsys timeline")
        compared.append("nsys")
    if found.ncu is not None:
        if counter_mode == "full":
            reference = found.kineto[:kernels_per_iteration] if kernels_per_iteration else found.kineto
            label = "the first iteration of the Kineto trace" if kernels_per_iteration else "the Kineto trace"
            check_same_launches(reference, found.ncu, reference_label=label,
                                other_label="the ncu report")
        else:
            check_configs_covered(found.kineto, found.ncu, reference_label="the Kineto trace",
                                  sampled_label="the ncu report")
        compared.append("ncu")
    return compared
