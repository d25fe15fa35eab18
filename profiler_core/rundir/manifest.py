"""``manifest.json``: what one capture ran, under which conditions, and what it wrote.

A pydantic model with a ``schema_version``, written atomically after every phase (so a
crash leaves an honest record) and read back by attribution. Artifact paths are relative
to the run directory, so a run directory can be moved or shipped whole. A multi-rank run's
top-level manifest has its own model (:mod:`profiler_core.rundir.ranks`); both are read
through :func:`load_manifest_json`, once, and told apart by their ``kind``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profiler_core.atomic_write import write_text_atomic
from profiler_core.compile_mode import CaptureCompileMode
from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError
from profiler_core.rundir.layout import MANIFEST_NAME
from profiler_core.schema import ClockBasis, CounterAvailability, ToolVersions, first_error

MANIFEST_SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a manifest is kilobytes; more is not one
RANKS_MANIFEST_KIND: Final = "multi-rank"  # "kind" of a multi-rank run's top-level manifest


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"


class PhaseStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class PhaseClocks(_Model):
    """Clocks NVML observed while one phase ran (MHz), over the samples that found the GPU busy."""

    samples: int = 0
    busy_samples: int = 0
    basis: ClockBasis | None = None
    sm_mhz_median: float | None = None
    sm_mhz_min: float | None = None
    sm_mhz_max: float | None = None
    memory_mhz_median: float | None = None
    memory_mhz_min: float | None = None
    memory_mhz_max: float | None = None


class PhaseRecord(_Model):
    """One child process of the capture."""

    name: str  # "probe" | "kineto" | "timeline" | "timeline-export" | "counters" | "counters-import"
    status: PhaseStatus
    command: list[str] = Field(default_factory=list)
    exit_status: int | None = None
    duration_s: float = 0.0
    started_at: str | None = None  # ISO 8601, UTC
    stdout_log: str | None = None
    stderr_log: str | None = None
    clocks: PhaseClocks | None = None
    note: str | None = None
    harness: dict[str, Any] | None = None  # the harness's one-line result


class WorkloadRecord(_Model):
    path: str
    sha256: str
    identity: str | None = None  # which workload this measures (an optimized plan names its original's)
    compile_mode: CaptureCompileMode
    warmup_iterations: int
    measured_iterations: int
    device: str
    seed: int
    python: str


class GpuRecord(_Model):
    name: str | None = None
    chip: str | None = None
    sm_count: int | None = None
    compute_capability: str | None = None
    nvml_index: int | None = None
    uuid: str | None = None
    memory_total_bytes: int | None = None


class ClockRecord(_Model):
    policy: Literal["lock", "observe", "off"]
    locked_sm_mhz: int | None = None
    lock_source: Literal["probed", "cached"] | None = None
    lock_commands: list[list[str]] = Field(default_factory=list)
    locked_phases: list[str] = Field(default_factory=list)


class SpotCheckRecord(_Model):
    """How far K samples of one launch configuration disagree (per counter, worst configuration)."""

    samples_per_config: int
    configs: int = 0
    configs_with_repeats: int = 0
    max_rel_deviation: dict[str, float | None] = Field(default_factory=dict)
    worst_config: dict[str, str] = Field(default_factory=dict)


class CounterRecord(_Model):
    mode: Literal["per-config", "full", "none"]
    replay_mode_requested: Literal["auto", "kernel", "application"] = "auto"
    replay_mode: Literal["kernel", "application"] | None = None  # what produced the report
    replay_fallback_reason: str | None = None
    launch_count: int | None = None
    spot_check: int = 1
    dedup_iterations: bool = False
    kernels_per_iteration: int | None = None
    clock_control: str = "none"
    metrics: dict[str, str] = Field(default_factory=dict)  # profile field -> ncu name asked for
    availability: list[CounterAvailability] = Field(default_factory=list)
    spot_check_spread: SpotCheckRecord | None = None
    rows: int | None = None
    # replay passes ncu needed per measured kernel (from its "- N passes" lines): what the counter set costs
    replay_passes_max: int | None = None
    replay_passes_median: float | None = None


class DeterminismRecord(_Model):
    checked: bool = False
    reference: str = "kineto"
    compared: list[str] = Field(default_factory=list)
    kernels: int | None = None
    passed: bool | None = None
    note: str | None = None


class Artifacts(_Model):
    """Files of the run, relative to the run directory; None when not produced."""

    kineto: str | None = None
    torch_trace: str | None = None
    output_code: str | None = None
    timeline_report: str | None = None
    timeline: str | None = None
    counters_report: str | None = None
    counters_csv: str | None = None
    profile: str | None = None


class RunManifest(_Model):
    schema_version: Literal[1] = 1  # MANIFEST_SCHEMA_VERSION
    operator_profiler: str
    created_at: str
    status: RunStatus = RunStatus.RUNNING
    error: str | None = None
    workload: WorkloadRecord
    gpu: GpuRecord = Field(default_factory=GpuRecord)
    versions: ToolVersions = Field(default_factory=ToolVersions)
    environment: dict[str, str] = Field(default_factory=dict)
    clocks: ClockRecord
    counters: CounterRecord
    timeline_source: Literal["nsys", "kineto"] | None = None
    phases: list[PhaseRecord] = Field(default_factory=list)
    determinism: DeterminismRecord = Field(default_factory=DeterminismRecord)
    artifacts: Artifacts = Field(default_factory=Artifacts)
    total_duration_s: float = 0.0
    warnings: list[str] = Field(default_factory=list)

    def phase(self, name: str) -> PhaseRecord | None:
        """The last record of phase ``name``."""
        for record in reversed(self.phases):
            if record.name == name:
                return record
        return None


def write_manifest(run_dir: str | Path, manifest: RunManifest) -> Path:
    """Write ``<run_dir>/manifest.json`` atomically."""
    return write_text_atomic(Path(run_dir) / MANIFEST_NAME, manifest.model_dump_json(indent=1) + "\n")


def manifest_path(run_dir_or_file: str | Path) -> Path:
    """``<run_dir>/manifest.json``, or the manifest file itself."""
    path = Path(run_dir_or_file)
    return path / MANIFEST_NAME if path.is_dir() else path


def load_manifest_json(path: Path, *, missing_hint: str = "run 'oprof capture' to make one") -> Any:
    """The parsed JSON of a manifest file (of either kind), read within the confinement roots."""
    try:
        return orjson.loads(read_input(path, what="capture manifest", max_bytes=MAX_MANIFEST_BYTES))
    except FileNotFoundError as err:
        raise ArtifactFormatError(f"{path}: no capture manifest; {missing_hint}") from err
    except (OSError, ValueError) as err:
        raise ArtifactFormatError(f"{path}: unreadable manifest ({err}); re-run 'oprof capture'") from err


def is_ranks_data(data: Any) -> bool:
    """Whether parsed manifest JSON is a multi-rank run's top-level manifest."""
    return isinstance(data, dict) and data.get("kind") == RANKS_MANIFEST_KIND


def manifest_from_data(path: Path, data: Any) -> RunManifest:
    """Validate parsed manifest JSON as one capture's manifest (naming the problem and the fix)."""
    if is_ranks_data(data):
        raise ArtifactFormatError(
            f"{path}: a multi-rank run (one run directory per rank); attribute it as a whole with "
            "'oprof attribute' on the run directory, or pass one of its rank<N>/ directories")
    if isinstance(data, dict) and data.get("schema_version") not in (None, MANIFEST_SCHEMA_VERSION):
        raise ArtifactFormatError(
            f"{path}: manifest schema_version {data.get('schema_version')!r} is not supported "
            f"(this oprof reads {MANIFEST_SCHEMA_VERSION}); re-capture with this version"
        )
    try:
        return RunManifest.model_validate(data)
    except ValidationError as err:
        raise ArtifactFormatError(f"{path}: invalid manifest, {first_error(err)}") from err


def read_manifest(run_dir_or_file: str | Path) -> RunManifest:
    """Read and validate a manifest (a run directory or the manifest.json itself)."""
    path = manifest_path(run_dir_or_file)
    return manifest_from_data(path, load_manifest_json(path))
