"""The optimization plan (plan.json): which passes ran at which level, what each changed, and the numerics.

``PlanRecord`` is what the pass manager knows after transforming a model; ``OptimizationPlan``
adds the workload, the device, the validation verdict and the plan's status. A plan is
``validated`` only when the transformed model's outputs matched the baseline's; a ``rejected``
plan keeps its numbers so the user sees how far apart they were.

    plan = read_plan("plan.json")     # validates; names the offending field
    write_plan("plan.json", plan)      # atomic
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.confinement import read_input
from profiler_core.errors import SchemaError
from profiler_core.passes.registry import PassLevel
from profiler_core.passes.validation import ValidationResult

PLAN_SCHEMA_VERSION = 1


class PassStatus(StrEnum):
    """Whether a pass changed the model (APPLIED), declined with a reason, or is undecided."""

    APPLIED = "APPLIED"
    NOT_APPLIED = "NOT APPLIED"
    PENDING = "PENDING"  # a graph-level pass whose graphs are compiled on the model's first call


class PlanStatus(StrEnum):
    """Whether the plan's numerics were checked against the baseline, and the verdict."""

    VALIDATED = "validated"
    REJECTED = "rejected"
    NOT_VALIDATED = "not_validated"  # built without running the baseline (e.g. from a wrapper)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphRecord(_Model):
    """What one pass did to one Dynamo (Level 1) or post-grad (Level 2) graph."""

    index: int
    level: PassLevel
    applied: bool
    reason: str = ""
    nodes_before: int | None = None  # call nodes (operations) in the graph
    nodes_after: int | None = None
    ops_removed: dict[str, int] = Field(default_factory=dict)  # op -> how many fewer
    ops_added: dict[str, int] = Field(default_factory=dict)  # op -> how many more
    details: dict[str, Any] = Field(default_factory=dict)


class PassRecord(_Model):
    """One pass in the plan: level, status and reason, and a record of what it changed."""

    name: str
    level: PassLevel
    levels: list[PassLevel]  # every hook point it used (bf16_promotion: dynamo_fx and post_grad)
    status: PassStatus
    reason: str = ""
    structural: bool = False
    requested_by: list[str] = Field(default_factory=list)  # "cli", or "finding <id>"
    details: dict[str, Any] = Field(default_factory=dict)
    graphs: list[GraphRecord] = Field(default_factory=list)
    nodes_before: int | None = None  # summed over the Dynamo graphs this pass rewrote
    nodes_after: int | None = None
    ops_removed: dict[str, int] = Field(default_factory=dict)
    ops_added: dict[str, int] = Field(default_factory=dict)


class PlanRecord(_Model):
    """What the pass manager did: the passes in order, and how the model was compiled."""

    passes: list[PassRecord]
    compile_mode: str = "default"
    compiler: str = "inductor"  # "inductor", or "eager": Level-1 rewrites only
    inductor_config: dict[str, Any] = Field(default_factory=dict)
    matmul_precision: str | None = None
    compute_precision: str = "float32"  # lowest precision any applied pass computes in
    graphs_compiled: int = 0  # Dynamo graphs (graph breaks make several)
    compile_s: float | None = None  # wall time of the first call: tracing, passes, compilation
    notes: list[str] = Field(default_factory=list)

    @property
    def applied(self) -> list[str]:
        """Names of the passes that changed the model."""
        return [p.name for p in self.passes if p.status is PassStatus.APPLIED]

    def record(self, name: str) -> PassRecord:
        """The record of pass ``name``; KeyError if the plan has none."""
        for record in self.passes:
            if record.name == name:
                return record
        raise KeyError(name)


class OptimizationPlan(PlanRecord):
    """plan.json: the pass record plus workload, device, validation verdict and written files."""

    schema_version: Literal[1] = 1  # PLAN_SCHEMA_VERSION; a Literal, so another version fails to load
    workload: str
    device: str
    status: PlanStatus
    validation: ValidationResult | None = None
    torch_version: str | None = None
    artifacts: dict[str, str] = Field(default_factory=dict)  # "plan", "workload" -> file paths


def write_plan(path: str | Path, plan: OptimizationPlan) -> Path:
    """Write ``plan`` as JSON, atomically."""
    return write_text_atomic(path, plan.model_dump_json(indent=1) + "\n")


def read_plan(path: str | Path) -> OptimizationPlan:
    """Read and validate a plan.json; SchemaError naming the file and the first bad field."""
    p = Path(path)
    try:
        data = orjson.loads(read_input(p, what="plan file", max_bytes=64 * 1024 * 1024))
    except FileNotFoundError as err:
        raise SchemaError(f"{p}: no such plan file; write one with 'oprof apply-pass --out DIR'") from err
    except (OSError, orjson.JSONDecodeError) as err:
        raise SchemaError(f"{p}: not a readable JSON plan ({err})") from err
    if isinstance(data, dict) and data.get("schema_version") not in (None, PLAN_SCHEMA_VERSION):
        raise SchemaError(f"{p}: plan schema_version {data.get('schema_version')!r} is not supported "
                          f"(this oprof reads {PLAN_SCHEMA_VERSION})")
    try:
        return OptimizationPlan.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SchemaError(f"{p}: invalid plan at '{where}': {first['msg']}") from err
