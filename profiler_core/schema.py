"""profile.json, schema version 1: the one on-disk format every stage reads and writes.

Pydantic v2 models; the exported JSON Schema lives beside this module
(``profile.schema.json``) and a test keeps it current. Closed vocabularies are ``str``
enums. Every kernel says where its operator came from (tier, confidence, evidence) and
where its counters came from (measured, inherited, missing).

Reading and writing a profile (``read_profile``, ``write_profile``) is ``profile_io.py``'s:
this module imports nothing of the project but its errors.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.errors import SchemaError

SCHEMA_VERSION: Final = 1
_M = TypeVar("_M", bound=BaseModel)
SCHEMA_PATH = Path(__file__).with_name("profile.schema.json")
SCHEMA_ID: Final = ("https://raw.githubusercontent.com/operator-profiler/operator-profiler/main/"
                    "profiler_core/profile.schema.json")
JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"  # what pydantic emits

# Bounds every reader can rely on: counts, ids, sizes and nanoseconds are never negative.
Count = Annotated[int, Field(ge=0)]
Nanoseconds = Annotated[int, Field(ge=0)]
Dim = Annotated[int, Field(ge=1)]  # one of a grid's or a block's three dimensions
MHz = Annotated[float, Field(ge=0)]
Percent = Annotated[float, Field(ge=0, le=100)]


class Tier(StrEnum):
    """Which evidence attributed a kernel to its operator (best tier wins, all are recorded)."""

    CUPTI_CORRELATION = "cupti_correlation"  # Kineto External id -> launching cpu_op
    NCU_NVTX = "ncu_nvtx"  # the NVTX stack ncu recorded for this very launch
    NSYS_NVTX = "nsys_nvtx"  # NVTX range enclosing the host-side launch in the nsys run
    INDUCTOR_FUSION = "inductor_fusion"  # Inductor provenance / output-code comments
    CUDA_GRAPH = "cuda_graph"  # inherited from the graph's capture-time attribution
    UNATTRIBUTED = "unattributed"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NONE = "none"


class ExecutionContext(StrEnum):
    COMPILED_GRAPH = "compiled_graph"  # inside a torch.compile'd region
    EAGER = "eager"  # eager PyTorch (no compiled region, or after a graph break)
    OPAQUE_LIBRARY = "opaque_library"  # inside one library call (cuDNN RNN, cuBLAS, NCCL)
    CUDA_GRAPH_REPLAY = "cuda_graph_replay"
    UNKNOWN = "unknown"


class CounterSource(StrEnum):
    MEASURED = "measured"  # ncu measured this launch
    INHERITED = "inherited"  # copied from the representative launch of its configuration
    MISSING = "missing"  # no ncu row for this launch (hole, or no counter run)


class OperatorClass(StrEnum):
    GEMM = "gemm"
    ATTENTION = "attention"
    NORMALIZATION = "normalization"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    CAST_COPY = "cast_copy"
    RNN = "rnn"
    CONVOLUTION = "convolution"
    COMMUNICATION = "communication"
    OTHER = "other"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class ToolVersions(_Model):
    torch: str | None = None
    cuda: str | None = None
    driver: str | None = None
    ncu: str | None = None
    nsys: str | None = None
    python: str | None = None
    operator_profiler: str | None = None


# Which NVML samples a phase's clock figures cover: those that found the GPU busy; "idle" when
# none did (the figures are idle clocks); "all" where NVML gave no utilization reading.
ClockBasis = Literal["busy", "idle", "all"]


class ClockSample(_Model):
    """Clocks observed (NVML) during one phase, or the locked values."""

    phase: str
    sm_mhz_median: MHz | None = None
    sm_mhz_min: MHz | None = None
    sm_mhz_max: MHz | None = None
    memory_mhz_median: MHz | None = None
    samples: Count = 0
    basis: ClockBasis | None = None


class SourceInfo(_Model):
    """One artifact that went into the profile."""

    kind: Literal["kineto", "nsys", "ncu", "inductor"]
    path: str | None = None
    used: bool = True
    detail: str | None = None  # e.g. "per-config", "csv", "provenance", why it was not used


class CaptureMeta(_Model):
    workload: str | None = None
    workload_identity: str | None = None  # which workload it measures (the same for a baseline and its plans)
    gpu_name: str | None = None
    chip: str | None = None
    sm_count: Annotated[int, Field(ge=1)] | None = None
    versions: ToolVersions = Field(default_factory=ToolVersions)
    warmup_iterations: Count | None = None
    measured_iterations: Count | None = None
    compile_mode: str | None = None  # "eager" | "default" | "max-autotune" | "reduce-overhead"
    clock_policy: Literal["lock", "observe", "off", "unknown"] = "unknown"
    clocks: list[ClockSample] = Field(default_factory=list)
    counter_mode: Literal["full", "per-config", "none", "unknown"] = "unknown"
    timeline_source: Literal["nsys", "kineto"] | None = None
    sources: list[SourceInfo] = Field(default_factory=list)
    created_at: str | None = None  # ISO 8601, UTC
    rank: Count | None = None
    world_size: Annotated[int, Field(ge=1)] | None = None


class Evidence(_Model):
    """What one tier said about a kernel."""

    tier: Tier
    operator: str | None  # clean name, e.g. "aten::addmm"
    op_id: Count | None = None
    detail: str | None = None


class Attribution(_Model):
    operator_key: str | None  # key of the Operator this kernel belongs to
    tier: Tier
    confidence: Confidence
    evidence: list[Evidence] = Field(default_factory=list)
    tiers_agree: bool | None = None  # None when fewer than two tiers spoke
    reason: str | None = None  # why unattributed / why this tier


class Kernel(_Model):
    id: Count  # position in timeline order (0-based)
    name: str  # demangled or Triton name as the timeline spells it
    short_name: str | None = None
    kind: Literal["kernel", "memcpy", "memset"] = "kernel"
    stream: Count
    device: Count
    start_ns: Nanoseconds
    end_ns: Nanoseconds
    duration_ns: Nanoseconds
    grid: tuple[Dim, Dim, Dim] | None = None
    block: tuple[Dim, Dim, Dim] | None = None
    registers_per_thread: Count | None = None
    static_smem_bytes: Count | None = None
    dynamic_smem_bytes: Count | None = None
    counters: dict[str, float | None] = Field(default_factory=dict)  # field -> base-unit value
    counter_source: CounterSource = CounterSource.MISSING
    ncu_id: Count | None = None
    inherited_from: Count | None = None  # kernel id of the measured representative
    attribution: Attribution
    fused_with: list[str] = Field(default_factory=list)  # ATen ops Inductor fused into it
    graph_id: int | None = None  # CUDA graph that launched it (replay), when known
    library: str | None = None  # "cublas", "cudnn", "nccl", ... when a vendor library ran it
    module_path: str | None = None  # nn.Module it ran under ("h.3.attn"; "" the model itself), when known


class Operator(_Model):
    key: str  # "<name>#<call_index>", unique in the profile
    name: str  # clean: "aten::addmm", never the NVTX text with sizes
    call_index: Count  # 0-based, per name, in launch order
    op_id: Count | None = None
    input_shapes: list | None = None
    op_class: OperatorClass = OperatorClass.OTHER
    execution_context: ExecutionContext = ExecutionContext.UNKNOWN
    is_fused: bool = False
    fused_with: list[str] = Field(default_factory=list)
    source_nodes: list[str] = Field(default_factory=list)
    kernel_ids: list[Count] = Field(default_factory=list)
    kernel_count: Count = 0
    duration_ns: Nanoseconds = 0  # sum of its kernels' timeline durations
    metrics: dict[str, float | None] = Field(default_factory=dict)
    metric_null_reasons: dict[str, str] = Field(default_factory=dict)
    confidence: Confidence = Confidence.NONE  # the weakest confidence among its kernels
    library: str | None = None  # vendor library behind its kernels (cuBLAS, cuDNN RNN, NCCL)
    layer_role: Literal["representative", "duplicate"] | None = None
    inherited_from: str | None = None  # operator key whose counters a duplicate inherits
    module_path: str | None = None  # deepest nn.Module enclosing all its kernels, when known
    # training steps only (attribution/step_phase.py): which part of the step launched it;
    # left out of the file when unknown, so inference profiles read as before
    phase: Literal["forward", "backward", "optimizer"] | None = Field(default=None, exclude_if=lambda v: v is None)


class UnattributedKernel(_Model):
    kernel_id: Count
    name: str
    duration_ns: Nanoseconds
    reason: str


class TierCoverage(_Model):
    kernel_count: Count = 0
    duration_ns: Nanoseconds = 0


class Coverage(_Model):
    kernel_count: Count = 0
    duration_ns: Nanoseconds = 0
    by_tier: dict[str, TierCoverage] = Field(default_factory=dict)
    by_confidence: dict[str, TierCoverage] = Field(default_factory=dict)
    counters_measured: TierCoverage = Field(default_factory=TierCoverage)
    counters_inherited: TierCoverage = Field(default_factory=TierCoverage)
    counters_missing: TierCoverage = Field(default_factory=TierCoverage)
    attributed_time_pct: Percent = 0.0  # high + medium confidence share of kernel time
    tier_overlaps: Count = 0  # kernels where two or more tiers spoke
    tier_disagreements: Count = 0


class CounterAvailability(_Model):
    field: str
    ncu_name: str | None
    available: bool
    reason: str | None = None


class KernelTableRef(_Model):
    """Where a large profile keeps its kernels: a Parquet file beside profile.json (docs/attribution.md)."""

    format: Literal["parquet"] = "parquet"
    path: str  # file name, relative to the profile's folder
    kernel_count: Count
    bytes: Count  # size of the file as written: a truncated or replaced table is caught before it is read
    # SHA-256 of the file as written (hex): a damaged table is refused; absent in profiles written before it
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", exclude_if=lambda v: v is None)


class OperatorTableRef(_Model):
    """Where a large profile keeps its operators: a Parquet file beside profile.json (docs/attribution.md)."""

    format: Literal["parquet"] = "parquet"
    path: str  # file name, relative to the profile's folder
    operator_count: Count
    bytes: Count  # size of the file as written
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", exclude_if=lambda v: v is None)


class Profile(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    capture: CaptureMeta = Field(default_factory=CaptureMeta)
    operators: list[Operator] = Field(default_factory=list)
    kernels: list[Kernel] = Field(default_factory=list)
    unattributed: list[UnattributedKernel] = Field(default_factory=list)
    coverage: Coverage = Field(default_factory=Coverage)
    counters: list[CounterAvailability] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # large profiles only: ``kernels`` is empty in the file and the kernels are this table's rows
    kernel_table: KernelTableRef | None = Field(default=None, exclude_if=lambda v: v is None)
    # large profiles only: ``operators`` is empty in the file and the operators are this table's rows
    operator_table: OperatorTableRef | None = Field(default=None, exclude_if=lambda v: v is None)

    # A large profile's kernels and operators are columns (a lazy view): as one document they are
    # models again, which holds ~10 KB per kernel, so only up to EMIT_MAX_KERNELS.
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return BaseModel.model_dump(self.as_rows(), **kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        return BaseModel.model_dump_json(self.as_rows(), **kwargs)

    def as_rows(self) -> Profile:
        """This profile with every kernel and operator a model (itself when it already is).

        Raises ``SchemaError`` for a columnar profile above ``EMIT_MAX_KERNELS`` kernels.
        """
        if isinstance(self.kernels, list) and isinstance(self.operators, list):
            return self
        n = len(self.kernels)
        if n > EMIT_MAX_KERNELS:
            raise SchemaError(
                f"this profile holds {n} kernels in Parquet tables, too many for one JSON document "
                f"(at most {EMIT_MAX_KERNELS}); read profile.kernels.parquet and profile.operators.parquet "
                "directly (pyarrow, pandas), or use 'oprof summary', 'oprof report' or 'oprof export'")
        return self.model_copy(update={"kernels": list(self.kernels), "operators": list(self.operators),
                                       "kernel_table": None, "operator_table": None})


EMIT_MAX_KERNELS = 200_000


_object_setattr = object.__setattr__


def construct_trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build a model from values that are already complete and typed, without validation.

    ``values`` must name every field (no defaults are filled in). This is what
    ``model_construct`` does, minus its per-field alias and default handling, which costs
    more than the rest of attribution at a million kernels; tests check both agree.
    """
    m = cls.__new__(cls)
    _object_setattr(m, "__dict__", values)
    fields = all_fields_set(cls)
    _object_setattr(m, "__pydantic_fields_set__", fields if values.keys() == fields else set(values))
    _object_setattr(m, "__pydantic_extra__", None)
    _object_setattr(m, "__pydantic_private__", None)
    return m


_ALL_FIELDS: dict[type, set[str]] = {}


def all_fields_set(cls: type[BaseModel]) -> set[str]:
    """The names of every field of ``cls``: the fields set its models built with every field share.

    One set per class, not one per model: a set of 23 names takes 2.3 kB, more than the values it
    names (a million kernel models: 2 GB). Sharing it is safe because it already holds every field:
    pydantic adds a field's name on assignment (a no-op here), and copies the set for a copied model.
    """
    fields = _ALL_FIELDS.get(cls)
    if fields is None:
        fields = _ALL_FIELDS[cls] = set(cls.model_fields)
    return fields


def profile_json_schema() -> dict:
    """The JSON Schema of profile.json (what ``profile.schema.json`` holds).

    JSON Schema cannot say that a kernel's ``operator_key`` names an operator of the same
    file; ``profile_io.check_references`` does, and ``profile_io.read_profile`` runs it.
    """
    schema = Profile.model_json_schema()
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": SCHEMA_ID,
            "description": f"operator-profiler profile.json, schema version {SCHEMA_VERSION}. Cross-references "
                           "(operator keys, kernel ids) are checked by profiler_core.profile_io.check_references.",
            **schema}


def first_error(err: ValidationError) -> str:
    """``field '<dotted.loc>': <message>`` of a validation error's first problem."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"field '{where}': {first['msg']}"
