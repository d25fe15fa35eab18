"""What a profile says beside its kernels: tier confidences, counter availability, capture metadata."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from profiler_core.attribution.counter_join import CounterJoin
from profiler_core.metrics.availability import counter_availability, returned_by
from profiler_core.metrics.catalog import CATALOG, FLOP_CATALOG, CounterSpec
from profiler_core.metrics.chips import chip_from_name
from profiler_core.records import InductorArtifacts, KinetoTrace, NcuReport, NsysTimeline
from profiler_core.schema import CaptureMeta, Confidence, CounterAvailability, SourceInfo, Tier

TIER_ORDER = (Tier.CUPTI_CORRELATION, Tier.NCU_NVTX, Tier.NSYS_NVTX, Tier.INDUCTOR_FUSION, Tier.CUDA_GRAPH)
TIER_CONFIDENCE = {
    Tier.CUPTI_CORRELATION: Confidence.HIGH,
    # ncu recorded the stack for the very launch whose counters it measured: per-launch
    # evidence, joined by the grid/block-validated invocation order (docs/attribution.md).
    Tier.NCU_NVTX: Confidence.HIGH,
    Tier.NSYS_NVTX: Confidence.MEDIUM,
    Tier.INDUCTOR_FUSION: Confidence.MEDIUM,
    Tier.CUDA_GRAPH: Confidence.MEDIUM,
    Tier.UNATTRIBUTED: Confidence.NONE,
}
CONF_RANK = {Confidence.HIGH: 3, Confidence.MEDIUM: 2, Confidence.LOW: 1, Confidence.NONE: 0}
# The counter join's mode -> the profile's counter_mode; any other join mode measured nothing usable.
_COUNTER_MODE_OF_JOIN: dict[str, Literal["full", "per-config"]] = {
    "full": "full", "prefix": "full", "per-config": "per-config"}


def unattributed_reason(kind: str, in_graph: bool, have_kineto: bool, have_ncu: bool, have_nsys: bool) -> str:
    """Why no tier spoke for a kernel."""
    if in_graph:
        return ("launched by a CUDA graph replay: the graph was captured outside the measured region, so "
                "no per-kernel launch record exists and Inductor's map does not name this kernel")
    if not (have_kineto or have_ncu or have_nsys):
        return "no evidence source covers this kernel"
    if kind != "kernel":
        return f"{kind} issued outside any PyTorch operator"
    return "no PyTorch operator was open when it was launched (outside any operator, or an opaque library path)"


def availability(ncu: NcuReport | None, chip: str | None,
                 specs: Sequence[CounterSpec] = CATALOG) -> list[CounterAvailability]:
    """Which counters the counter run returned, each with the reason when it did not."""
    if len(specs) > len(CATALOG):  # FLOP counters were asked for: say which of them came back
        specs = CATALOG + FLOP_CATALOG
    return counter_availability(chip, specs, returned_by(ncu.metrics_returned if ncu is not None else None, chip))


def capture_meta(capture: CaptureMeta | None, kineto: KinetoTrace | None, nsys: NsysTimeline | None,
                 ncu: NcuReport | None, inductor: InductorArtifacts | None, join: CounterJoin | str,
                 use_nsys: bool) -> CaptureMeta:
    """The capture metadata, completed from the artifacts (``join``: the counter join, or its mode)."""
    mode = join if isinstance(join, str) else join.mode
    meta = capture.model_copy(deep=True) if capture else CaptureMeta()
    if kineto is not None:
        props = (kineto.metadata.get("deviceProperties") or [{}])[0] if kineto.metadata else {}
        meta.gpu_name = meta.gpu_name or props.get("name")
        meta.sm_count = meta.sm_count or props.get("numSms")
        meta.versions.cuda = meta.versions.cuda or _s(kineto.metadata.get("cuda_runtime_version"))
        meta.versions.driver = meta.versions.driver or _s(kineto.metadata.get("cuda_driver_version"))
    if nsys is not None and nsys.gpus:
        gpu = nsys.gpus[0]
        meta.gpu_name = meta.gpu_name or gpu.get("name")
        meta.sm_count = meta.sm_count or gpu.get("smCount")
    if meta.chip is None and meta.gpu_name:
        meta.chip = chip_from_name(meta.gpu_name)
    meta.timeline_source = "nsys" if use_nsys else "kineto"
    if meta.counter_mode == "unknown":
        meta.counter_mode = _COUNTER_MODE_OF_JOIN.get(mode, "none")
    if not meta.sources:
        meta.sources = [
            SourceInfo(kind="kineto", path=_p(kineto), used=kineto is not None,
                       detail="; ".join(kineto.notes) if kineto is not None and kineto.notes else None),
            SourceInfo(kind="nsys", path=_p(nsys), used=use_nsys),
            SourceInfo(kind="ncu", path=_p(ncu), used=ncu is not None,
                       detail=None if ncu is None else mode if ncu.source != "cupti-range"
                       else f"{mode}; CUPTI range profiler counters read from the Kineto trace"),
            SourceInfo(kind="inductor", path=_p(inductor), used=inductor is not None,
                       detail=inductor.source if inductor else None),
        ]
    meta.created_at = meta.created_at or datetime.now(UTC).isoformat(timespec="seconds")
    return meta


def _p(obj: object) -> str | None:
    path = getattr(obj, "path", None)
    return path.name if path is not None else None


def _s(value: object) -> str | None:
    return None if value is None else str(value)
