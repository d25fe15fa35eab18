"""The diagnosis rules: measured symptom -> bottleneck -> the transformation it licenses.

A rule is a plain function ``(RuleContext) -> list[Finding]`` registered in ``RULES`` with the
``@rule`` decorator; built-ins register exactly as an outside plugin would. Every number a
rule decides on comes from ``Thresholds`` (thresholds.py) and is listed in docs/diagnose.md.
The rules themselves live in rules_compute.py (GEMM, attention, recurrence),
rules_runtime.py (memory, launch, spills, coverage), rules_timeline.py (a host-bound step) and
rules_models.py (convolution networks, eager models, training steps); importing this module
registers them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from profiler_core.analysis.findings import Finding, FindingKind, Transformation
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.thresholds import Thresholds
from profiler_core.errors import ProfilerError
from profiler_core.schema import Kernel, Operator

RuleFn = Callable[["RuleContext"], list[Finding]]
RULES: dict[str, RuleFn] = {}


def rule(rule_id: str) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as diagnosis rule ``rule_id`` (ids are unique)."""

    def register(fn: RuleFn) -> RuleFn:
        if rule_id in RULES and RULES[rule_id] is not fn:
            raise ProfilerError(f"diagnosis rule {rule_id!r} is registered twice; pick another id")
        RULES[rule_id] = fn
        return fn

    return register


@dataclass(frozen=True)
class RuleContext:
    """What a rule reads: the profile view and the thresholds."""

    view: ProfileView
    thresholds: Thresholds

    @cached_property
    def ops(self) -> list[Operator]:
        """Operators in launch order."""
        return self.view.ops_in_order

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
        transformation: Transformation | None = None,
        alternatives: Iterable[Transformation] = (),
        facts: Iterable[str] = (),
        counter_fields: Iterable[str] | None = None,
        expected_shifts: dict | None = None,
        gain_ns: int | None = None,
        gain_basis: str = "kernel_time",
        gain_whole_ns: int | None = None,
    ) -> Finding:
        """Build a finding with its evidence and the Amdahl bound on the affected time."""
        ks = list(kernels) if kernels is not None else self.view.kernels_of_ops(ops)
        evidence = self.view.evidence(ks, operator_count=len(ops), facts=facts,
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
            transformation=transformation,
            alternatives=list(alternatives),
            is_structural=kind is FindingKind.STRUCTURAL,
            operators=[op.key for op in ops],
            evidence=evidence,
            confidence=self.view.confidence_of(ks),
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


def fmt_pct(value: float | None) -> str:
    """``61.234`` -> ``61.2%``; None -> ``n/a``."""
    return "n/a" if value is None else f"{value:.1f}%"


def _load_builtin_rules() -> None:
    # Imported for their registration side effect; kept at the bottom to avoid an import cycle.
    from profiler_core.analysis import rules_compute, rules_models, rules_runtime, rules_timeline  # noqa: F401


_load_builtin_rules()
