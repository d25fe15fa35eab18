"""Operators as columns: one row per operator invocation, its kernels as one index range.

Kernels of operator ``g`` are ``members[offsets[g]:offsets[g + 1]]`` (launch order); counters
are aggregated over all operators at once (aggregate.aggregate_arrays). A small profile turns
the rows into ``Operator`` models (:meth:`OperatorTable.model`); a large one writes them into
profile.json from :meth:`OperatorTable.record` without building a model per operator.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler_core.attribution.aggregate import Aggregated
from profiler_core.attribution.columns import NONE, Positional
from profiler_core.metrics.catalog import CounterSpec
from profiler_core.schema import Confidence, ExecutionContext, Operator, OperatorClass, construct_trusted

CONFIDENCES = (Confidence.NONE, Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH)  # code = rank
ROLES = (None, "representative", "duplicate")


@dataclass(eq=False)
class OperatorTable(Positional[Operator]):
    """The operators of one profile (see the module docstring)."""

    keys: list[str]
    names: list[str]
    call_index: np.ndarray
    op_id: np.ndarray  # -1: None
    input_shapes: list[Any]  # per shapes code: the parsers' tuple, or None
    shapes: np.ndarray
    op_class: list[OperatorClass]
    context: list[ExecutionContext]
    fused: list[tuple[str, ...]]  # per fused code
    fused_with: np.ndarray
    members: np.ndarray
    offsets: np.ndarray
    duration_ns: np.ndarray
    agg: Aggregated
    specs: tuple[CounterSpec, ...]
    confidence: np.ndarray  # CONFIDENCES codes
    library: list[str | None]
    phase: list[str | None]
    layer_role: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    inherited_from: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inherited_note: dict[int, str] = field(default_factory=dict)  # operator -> reason, after dedup re-aggregated it
    module_path: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.keys)
        if len(self.layer_role) != n:
            self.layer_role = np.zeros(n, dtype=np.int8)
            self.inherited_from = np.full(n, NONE, dtype=np.int64)
        if len(self.module_path) != n:
            self.module_path = [None] * n

    def __len__(self) -> int:
        return len(self.keys)

    def _at(self, g: int) -> Operator:
        return self.model(g)

    def __iter__(self) -> Iterator[Operator]:
        return (self.model(g) for g in range(len(self)))

    def kernel_ids(self, g: int) -> list[int]:
        return self.members[self.offsets[g]:self.offsets[g + 1]].tolist()

    def record(self, g: int, *, shapes_as_lists: bool = True) -> dict[str, Any]:
        """Operator ``g``'s fields, in the model's order (enum members, plain lists).

        ``shapes_as_lists=False`` keeps input shapes as the parsers' tuples (for a JSON writer).
        """
        metrics, reasons = self.agg.group(g, self.specs)
        note = self.inherited_note.get(g)
        if note is not None:
            reasons["_inherited"] = note
        fused = self.fused[self.fused_with[g]]
        shapes = self.input_shapes[self.shapes[g]]
        if not isinstance(shapes, tuple | list):
            shapes = None
        elif shapes_as_lists:
            shapes = _listify(shapes)
        rep = int(self.inherited_from[g])
        return {
            "key": self.keys[g], "name": self.names[g], "call_index": int(self.call_index[g]),
            "op_id": None if self.op_id[g] == NONE else int(self.op_id[g]),
            "input_shapes": shapes, "op_class": self.op_class[g], "execution_context": self.context[g],
            "is_fused": bool(fused), "fused_with": list(fused), "source_nodes": [], "kernel_ids": self.kernel_ids(g),
            "kernel_count": int(self.offsets[g + 1] - self.offsets[g]), "duration_ns": int(self.duration_ns[g]),
            "metrics": metrics, "metric_null_reasons": reasons, "confidence": CONFIDENCES[self.confidence[g]],
            "library": self.library[g], "layer_role": ROLES[self.layer_role[g]],
            "inherited_from": None if rep == NONE else self.keys[rep], "module_path": self.module_path[g],
            "phase": self.phase[g],
        }

    def model(self, g: int) -> Operator:
        return construct_trusted(Operator, self.record(g))

    def models(self) -> list[Operator]:
        return [self.model(g) for g in range(len(self))]

    def execution_contexts(self) -> list[ExecutionContext]:
        return self.context


def _listify(value: tuple | list) -> list:
    """Input shapes as JSON lists (tuples from the parsers), nested lists copied."""
    return [_listify(v) if isinstance(v, tuple | list) else v for v in value]


def slowest(operators: Sequence[Operator], k: int) -> list[Operator]:
    """The ``k`` operators with the most kernel time, longest first, ties in profile order (what a
    stable sort gives). A table's are found on its duration column, and only those ``k`` are built
    as models."""
    durations = getattr(operators, "duration_ns", None)
    if isinstance(durations, np.ndarray) and hasattr(operators, "model"):
        return [operators.model(int(g)) for g in np.argsort(-durations, kind="stable")[:max(k, 0)]]
    return sorted(operators, key=lambda o: -o.duration_ns)[:max(k, 0)]
