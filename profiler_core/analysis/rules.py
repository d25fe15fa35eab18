"""The diagnosis rules: measured symptom -> bottleneck -> the transformation it licenses.

A rule is a plain function ``(RuleContext) -> list[Finding]`` registered with the ``@rule``
decorator; built-ins register exactly as an outside plugin would, and a plugin's module is
found through the entry-point group ``operator_profiler.rules`` (as passes are, through
``operator_profiler.passes``)::

    [project.entry-points."operator_profiler.rules"]
    my_rules = "my_package.rules"          # a module holding @rule functions

A finding names its transformation by a pass's registered name; a rule licensing a pass the
diagnosing process does not import names it in ``licenses``. Every number a built-in rule
decides on comes from ``Thresholds`` (thresholds.py) and is listed in docs/diagnose.md. The
built-ins live in rules_compute.py (GEMM, attention, recurrence), rules_runtime.py (memory,
launch, spills, coverage), rules_timeline.py (a host-bound step), rules_models.py
(convolution networks, eager models, training steps) and rules_roofline.py (the roofline);
importing this module registers them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import entry_points

import numpy as np

from profiler_core.analysis.findings import Finding, FindingKind
from profiler_core.analysis.profile_view import CLASS_CODES, KernelsAt, ProfileView
from profiler_core.analysis.thresholds import Thresholds
from profiler_core.errors import ProfilerError
from profiler_core.plugins import load_plugin_modules
from profiler_core.schema import Kernel, Operator, OperatorClass
from profiler_core.transformations import Transformation, check_transformation, register_transformation

RuleFn = Callable[["RuleContext"], list[Finding]]
ENTRY_POINT_GROUP = "operator_profiler.rules"



@dataclass(frozen=True)
class RuleSpec:
    """One registered rule: its id, its function, and how diagnose treats its findings."""

    rule_id: str
    function: RuleFn
    always_reported: bool = False  # kept below the minimum share (a finding about the profile itself)
    needs_roofline: bool = False  # runs only with the roofline on (diagnose(..., roofline=True))
    licenses: tuple[str, ...] = ()  # transformations beyond the built-ins its findings may name
    source: str = "builtin"  # "builtin", or the entry point that brought it in


RULES: dict[str, RuleSpec] = {}
_plugins_loaded = False


def rule(rule_id: str, *, always_reported: bool = False, needs_roofline: bool = False,
         licenses: Iterable[str] = (), source: str = "builtin") -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as diagnosis rule ``rule_id`` (ids are unique); ``licenses``: plugin passes it may name."""
    names = tuple(register_transformation(name) for name in licenses)

    def register(fn: RuleFn) -> RuleFn:
        existing = RULES.get(rule_id)
        if existing is not None and existing.function is not fn:
            raise ProfilerError(f"diagnosis rule {rule_id!r} is registered twice; pick another id")
        RULES[rule_id] = RuleSpec(rule_id=rule_id, function=fn, always_reported=always_reported,
                                  needs_roofline=needs_roofline, licenses=names, source=source)
        return fn

    return register


def load_rule_plugins() -> None:
    """Import every module advertised under the ``operator_profiler.rules`` entry-point group (once)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    load_plugin_modules(entry_points(group=ENTRY_POINT_GROUP), "rule", ProfilerError)


def registered_rules() -> dict[str, RuleSpec]:
    """Every registered rule (built-in and plugins), in registration order."""
    load_rule_plugins()
    return dict(RULES)


def unregister_rule(rule_id: str) -> None:
    """Remove a rule (plugins under test, or a plugin replacing a built-in on purpose)."""
    RULES.pop(rule_id, None)


@dataclass(frozen=True)
class RuleContext:
    """What a rule reads: the profile view and the thresholds."""

    view: ProfileView
    thresholds: Thresholds

    @cached_property
    def ops(self) -> Sequence[Operator]:
        """Operators in launch order."""
        return self.view.ops_in_order

    @cached_property
    def work_classes(self) -> list[OperatorClass]:
        """The work class of each of :attr:`ops` (``view.work_class``), read at once."""
        return self.view.work_classes_in_order

    @cached_property
    def class_codes(self) -> np.ndarray:
        """:attr:`work_classes` as class codes (``CLASS_CODES``), an array: what a rule selects by."""
        return self.view.work_class_codes[self.view.op_order]

    def of_class(self, cls: OperatorClass) -> np.ndarray:
        """Whether each of :attr:`ops` works as ``cls``."""
        return self.class_codes == CLASS_CODES[cls]

    def finding(
        self,
        rule_id: str,
        *,
        title: str,
        kind: FindingKind,
        symptom: str,
        bottleneck: str,
        ops: Sequence[Operator] = (),
        kernels: Sequence[Kernel] | None = None,
        kernel_positions: np.ndarray | None = None,
        transformation: Transformation | str | None = None,
        alternatives: Iterable[Transformation | str] = (),
        facts: Iterable[str] = (),
        counter_fields: Iterable[str] | None = None,
        expected_shifts: dict | None = None,
        gain_ns: int | None = None,
        gain_basis: str = "kernel_time",
        gain_whole_ns: int | None = None,
    ) -> Finding:
        """Build a finding with its evidence and the Amdahl bound on the affected time.

        Its kernels: ``kernel_positions`` (positions in the view's kernel list, where the rule read
        them off the view's arrays), else ``kernels``, else those of ``ops``.
        """
        at: np.ndarray | None
        ks: Sequence[Kernel]
        if kernel_positions is not None:  # the rule read them off the view's arrays: its very models
            ks = KernelsAt(self.view.kernels, kernel_positions)
            at = kernel_positions
        elif kernels is not None:
            ks = kernels if isinstance(kernels, KernelsAt) else list(kernels)
            at = self.view.positions(ks)
        else:
            ks, at = self.view.kernels_of_ops_at(ops)
        evidence = self.view.evidence_at(ks, at, operator_count=len(ops), facts=facts,
                                         counter_fields=counter_fields)
        affected = evidence.duration_ns if gain_ns is None else gain_ns
        whole = gain_whole_ns if gain_whole_ns is not None else self.view.total_ns
        bound_pct = min(100.0, 100.0 * affected / whole) if whole else 0.0
        return Finding(
            rule_id=rule_id,
            title=title,
            kind=kind,
            symptom=symptom,
            bottleneck=bottleneck,
            transformation=None if transformation is None else check_transformation(transformation),
            alternatives=[check_transformation(a) for a in alternatives],
            is_structural=kind is FindingKind.STRUCTURAL,
            operators=self.view.keys_of(ops),
            evidence=evidence,
            confidence=self.view.confidence_at(ks, at),
            gain_bound_pct=round(bound_pct, 3),
            gain_bound_ns=int(affected),
            gain_basis=gain_basis,  # type: ignore[arg-type]
            max_speedup=round(100.0 / (100.0 - bound_pct), 3) if bound_pct < 100.0 else None,
            expected_shifts=expected_shifts or {},
        )


def counter(counters: dict[str, float | None], field: str) -> float | None:
    """A counter value, or None when absent."""
    value = counters.get(field)
    return float(value) if value is not None else None


def registers_fact(view: ProfileView, kernels: Sequence[Kernel]) -> str:
    """The most registers per thread any of ``kernels`` uses (ncu's counter, else the launch record's)."""
    most = view.max_registers(kernels)
    return f"registers per thread up to {most:.0f}" if most is not None else "registers per thread not recorded"


def fmt_pct(value: float | None) -> str:
    """``61.234`` -> ``61.2%``; None -> ``n/a``."""
    return "n/a" if value is None else f"{value:.1f}%"


def _load_builtin_rules() -> None:
    # Imported for their registration side effect; kept at the bottom to avoid an import cycle.
    from profiler_core.analysis import (  # noqa: F401
        rules_compute,
        rules_models,
        rules_runtime,
        rules_serving,
        rules_timeline,
    )

    # last: the roofline rule is listed after the others in a report's rules_run
    importlib.import_module("profiler_core.analysis.rules_roofline")


_load_builtin_rules()
