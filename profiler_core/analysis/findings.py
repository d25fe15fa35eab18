"""What ``diagnose`` says: findings (symptom -> bottleneck -> licensed transformation), on disk as JSON.

A finding carries its evidence (operator keys, aggregated counters, share of profiled kernel
time, the attribution tiers and confidence behind those kernels) and an Amdahl upper bound on
the gain: if the affected time vanished entirely, total time would drop by ``gain_bound_pct``
(a speedup of at most ``max_speedup``). No transformation can beat that bound; most reach a
fraction of it. ``expected_shifts`` names the counters the fix should move, so a later
comparison can check that the bottleneck moved in the predicted direction.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from profiler_core.schema import Confidence
from profiler_core.transformations import check_transformation

FINDINGS_SCHEMA_VERSION: Final = 1


class FindingKind(StrEnum):
    OPTIMIZATION = "optimization"  # a graph transformation applies
    STRUCTURAL = "structural"  # the fix is outside the graph (backend, dispatch, model code)
    NOTE = "note"  # worth knowing; licenses nothing by itself


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FindingEvidence(_Model):
    """The measurements behind a finding."""

    duration_ns: int = 0  # profiled kernel time of the affected kernels
    share_pct: float = 0.0  # of total profiled kernel time
    kernel_count: int = 0
    operator_count: int = 0
    counters: dict[str, float | None] = Field(default_factory=dict)  # aggregated over the kernels
    tiers: dict[str, int] = Field(default_factory=dict)  # attribution tier -> kernel count
    confidence: dict[str, int] = Field(default_factory=dict)  # confidence -> kernel count
    kernel_names: list[str] = Field(default_factory=list)  # the most time-consuming, at most 5
    facts: list[str] = Field(default_factory=list)  # short sentences a person can check


class Finding(_Model):
    """One symptom, the bottleneck it implies, and what that bottleneck licenses."""

    rule_id: str
    title: str
    kind: FindingKind
    symptom: str
    bottleneck: str
    transformation: str | None = None  # a pass's registered name (see profiler_core.transformations)
    alternatives: list[str] = Field(default_factory=list)
    is_structural: bool = False
    operators: list[str] = Field(default_factory=list)  # operator keys
    evidence: FindingEvidence = Field(default_factory=FindingEvidence)
    confidence: Confidence = Confidence.NONE  # weakest attribution confidence among its kernels
    gain_bound_pct: float = 0.0
    gain_bound_ns: int = 0
    gain_basis: Literal["kernel_time", "timeline"] = "kernel_time"
    max_speedup: float | None = None  # 1 / (1 - gain_bound_pct/100); None when unbounded
    expected_shifts: dict[str, Literal["up", "down"]] = Field(default_factory=dict)

    @field_validator("transformation")
    @classmethod
    def _known_transformation(cls, name: str | None) -> str | None:
        return None if name is None else check_transformation(name)

    @field_validator("alternatives")
    @classmethod
    def _known_alternatives(cls, names: list[str]) -> list[str]:
        return [check_transformation(n) for n in names]

    @property
    def licenses(self) -> str:
        """The transformation's name, or ``structural`` / ``note`` when there is none."""
        if self.transformation is not None:
            return self.transformation
        return "structural" if self.is_structural else "note"


class FindingsReport(_Model):
    """Every finding for one profile, largest gain bound first."""

    schema_version: Literal[1] = FINDINGS_SCHEMA_VERSION
    workload: str | None = None
    gpu_name: str | None = None
    total_kernel_ns: int = 0
    kernel_count: int = 0
    operator_count: int = 0
    attributed_pct: float = 0.0
    unattributed_pct: float = 0.0
    rules_run: list[str] = Field(default_factory=list)
    thresholds: dict[str, float] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def by_rule(self, rule_id: str) -> list[Finding]:
        """The findings one rule produced."""
        return [f for f in self.findings if f.rule_id == rule_id]


def in_priority_order(findings: list[Finding]) -> list[Finding]:
    """Findings in the order to act on them: structural ones that license a pass first (they remove
    the kernels the tuning findings measured), then by their bound on the gain."""
    return sorted(findings, key=lambda f: (not (f.kind is FindingKind.STRUCTURAL and f.transformation is not None),
                                           -f.gain_bound_pct))
