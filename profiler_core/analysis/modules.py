"""The ``nn.Module`` rollup: time, counters and roofline position per module, and repeated blocks side by side.

Each operator sits at its module path (attribution/modules.py); a module's *total* covers its
own operators and its submodules', its *self* part only operators placed exactly there (a fused
kernel spanning two submodules sits at their common parent)::

    ""            total 7.8 ms   (the model)
    h             total 7.4 ms   self 0.3 ms (residual + next layer's norm, fused)
    h.0           total 0.6 ms
    h.0.attn      total 0.3 ms   compute-bound, 41% of roofline

Repeated blocks are the children of one module that differ only by their index (``h.0`` ..
``h.11``); each is given with its time, its share of the group's median and its roofline
fraction, so that an outlier layer stands out.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.roofline import FAR_BELOW, Roofline
from profiler_core.metrics.catalog import HEADLINE_COUNTERS
from profiler_core.schema import Profile

_INDEXED = re.compile(r"^(.*?)(?:^|\.)(\d+)$")
ROLLUP_COUNTERS = ("dram_bytes_read", "dram_bytes_written", *HEADLINE_COUNTERS)


@dataclass
class ModuleNode:
    """One module of the tree, with its totals (itself and everything below it)."""

    path: str
    duration_ns: int = 0
    self_ns: int = 0
    operators: int = 0
    kernels: int = 0
    flops: float | None = None
    dram_bytes: float | None = None
    roofline_time_ns: float | None = None
    top_class: str | None = None  # operator class with the most time
    counters: dict[str, float | None] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return 0 if not self.path else self.path.count(".") + 1

    @property
    def fraction_of_roofline(self) -> float | None:
        if self.roofline_time_ns is None or not self.duration_ns:
            return None
        return self.roofline_time_ns / self.duration_ns

    @property
    def headroom_ns(self) -> float | None:
        return None if self.roofline_time_ns is None else max(0.0, self.duration_ns - self.roofline_time_ns)

    @property
    def arithmetic_intensity(self) -> float | None:
        return self.flops / self.dram_bytes if self.flops is not None and self.dram_bytes else None

    @property
    def bottleneck(self) -> str:
        """``latency`` far below both roofs, else the top class and the wider bound of its operators."""
        fraction = self.fraction_of_roofline
        if fraction is not None and fraction < FAR_BELOW:
            return f"latency/occupancy ({self.top_class or 'mixed'}, {fraction:.0%} of roofline)"
        if fraction is None:
            return self.top_class or "unknown"
        return f"{self.top_class or 'mixed'}, {fraction:.0%} of roofline"


@dataclass(frozen=True)
class RepeatedBlock:
    path: str
    index: int
    duration_ns: int
    vs_median: float  # duration / the group's median
    fraction_of_roofline: float | None
    kernels: int


@dataclass(frozen=True)
class BlockGroup:
    """Siblings ``<parent>.0`` .. ``<parent>.N``: the repeated layers of one container."""

    parent: str
    blocks: list[RepeatedBlock]

    @property
    def outliers(self) -> list[RepeatedBlock]:
        """Blocks more than 20% off the group's median time."""
        return [b for b in self.blocks if abs(b.vs_median - 1) > 0.2]


@dataclass(frozen=True)
class ModuleRollup:
    nodes: dict[str, ModuleNode]
    groups: list[BlockGroup]
    covered_ns: int  # operator time with a module path
    total_ns: int

    @property
    def coverage_pct(self) -> float:
        return 100.0 * self.covered_ns / self.total_ns if self.total_ns else 0.0

    def _order_key(self, path: str) -> tuple[int, int, str]:
        """Indexed siblings (``h.0`` .. ``h.11``) by index, after the others by time."""
        match = _INDEXED.match(path)
        if match:
            return (1, int(match.group(2)), path)
        return (0, -self.nodes[path].duration_ns, path)

    def tree(self, max_depth: int | None = None) -> list[ModuleNode]:
        """Nodes depth first, the root first; children by time, repeated blocks by index."""
        out: list[ModuleNode] = []

        def walk(path: str) -> None:
            node = self.nodes[path]
            if max_depth is not None and node.depth > max_depth:
                return
            out.append(node)
            for child in sorted(node.children, key=self._order_key):
                walk(child)

        if "" in self.nodes:
            walk("")
        return out


def _ancestors(path: str) -> list[str]:
    if not path:
        return [""]
    parts = path.split(".")
    return ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]


def module_rollup(profile: Profile, roof: Roofline | None = None) -> ModuleRollup:
    """Roll operators up the module tree (operators without a module path are left out and counted)."""
    view = ProfileView.of(profile)  # its models and counter matrix: a large profile's tables are read once
    roof = roof or view.measured_roofline
    nodes: dict[str, ModuleNode] = {}
    class_time: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    kernel_sets: dict[str, list[int]] = defaultdict(list)
    covered = 0
    # each operator's stored figures, off the view's columns (no operator model is built)
    paths, durations, counts, classes, kernel_ids = (view.op_column(f) for f in (
        "module_path", "duration_ns", "kernel_count", "op_class", "kernel_ids"))
    placed = [g for g, path in enumerate(paths) if path is not None]
    keys = view.op_keys
    # each placed operator's row, read off the columns (an operator without a module path is left out)
    for g, row in zip(placed, roof.figures_of([keys[g] for g in placed]), strict=True):
        module_path = paths[g]
        duration, op_class = durations[g], classes[g].value
        covered += duration
        for path in _ancestors(module_path):
            node = nodes.setdefault(path, ModuleNode(path=path))
            node.duration_ns += duration
            node.operators += 1
            node.kernels += counts[g]
            class_time[path][op_class] += duration
            kernel_sets[path].extend(kernel_ids[g])
            if row is not None:
                node.flops = _add(node.flops, row.flops)
                node.dram_bytes = _add(node.dram_bytes, row.dram_bytes)
                node.roofline_time_ns = _add(node.roofline_time_ns, row.roofline_time_ns)
        nodes[module_path].self_ns += duration
    for path, node in nodes.items():
        if path:
            parent = path.rpartition(".")[0]
            if parent in nodes and path not in nodes[parent].children:
                nodes[parent].children.append(path)
        times = class_time[path]
        node.top_class = max(times, key=times.__getitem__) if times else None
    for node, counters in zip(nodes.values(), _rollup_counters(view, [kernel_sets[path] for path in nodes]),
                              strict=True):
        node.counters = counters
    return ModuleRollup(nodes=nodes, groups=_groups(nodes), covered_ns=covered,
                        total_ns=sum(durations))


def _rollup_counters(view: ProfileView, id_sets: list[list[int]]) -> list[dict[str, float | None]]:
    """:data:`ROLLUP_COUNTERS` of each set of kernel ids (an id read as the kernel's position, as the
    engine numbers them), aggregated by position off the view's counter rows."""
    n = len(view.kernels)
    sizes = np.array([len(ids) for ids in id_sets], dtype=np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(id_sets), dtype=np.int64, count=int(sizes.sum()))
    grp = np.repeat(np.arange(len(id_sets)), sizes)
    keep = (flat < n) & (flat >= -n)
    flat, grp = flat[keep], grp[keep]
    flat = np.where(flat < 0, flat + n, flat)
    return view.counters_of_positions(flat, np.bincount(grp, minlength=len(id_sets)).astype(np.int64),
                                      ROLLUP_COUNTERS)


def _groups(nodes: dict[str, ModuleNode]) -> list[BlockGroup]:
    by_parent: dict[str, list[tuple[int, ModuleNode]]] = defaultdict(list)
    for path, node in nodes.items():
        match = _INDEXED.match(path)
        if match and path:
            by_parent[match.group(1)].append((int(match.group(2)), node))
    groups = []
    for parent, members in by_parent.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0])
        median = statistics.median(n.duration_ns for _, n in members) or 1
        groups.append(BlockGroup(parent=parent, blocks=[
            RepeatedBlock(path=n.path, index=i, duration_ns=n.duration_ns, vs_median=n.duration_ns / median,
                          fraction_of_roofline=n.fraction_of_roofline, kernels=n.kernels)
            for i, n in members]))
    groups.sort(key=lambda g: -sum(b.duration_ns for b in g.blocks))
    return groups


def _add(total: float | None, value: float | None) -> float | None:
    if value is None:
        return total
    return value if total is None else total + value


def compare_blocks(group: BlockGroup, first: int = 0, last: int | None = None) -> Sequence[RepeatedBlock]:
    """Two blocks of a group side by side (default: the first and the last layer)."""
    chosen = group.blocks[last] if last is not None else group.blocks[-1]
    return [group.blocks[first], chosen]
