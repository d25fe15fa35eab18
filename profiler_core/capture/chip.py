"""The GPU a capture runs on (name, chip, SM count) and which of the 20 counters its ncu offers.

The chip name (``gh100``, ``gb202`` ...) picks ncu metric spellings (GB20x renamed the
DRAM byte counters) and is what ``ncu --query-metrics --chip`` takes. The metric list is
queried once per chip and ncu version and cached; a counter whose name the list lacks is
dropped from the ncu command and recorded as unavailable with the reason, never replaced.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler_core.capture import user_cache
from profiler_core.capture.phases import ncu_query_metrics_command
from profiler_core.errors import ToolFailedError, ToolNotFoundError
from profiler_core.metrics.availability import counter_availability, offered_by
from profiler_core.metrics.catalog import ALL_SPECS, CATALOG
from profiler_core.metrics.chips import chip_for_capability
from profiler_core.schema import CounterAvailability

NO_GPU_MESSAGE = (
    "capture needs an NVIDIA GPU with CUDA; on this machine run `oprof demo` on the shipped captures"
)

@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML (or torch) describes it."""

    name: str
    nvml_index: int | None
    uuid: str | None
    compute_capability: tuple[int, int] | None
    driver_version: str | None
    memory_total_bytes: int | None = None
    sm_count: int | None = None

    @property
    def chip(self) -> str | None:
        """The ncu chip name, or None for an architecture this table does not know."""
        return chip_for_capability(self.compute_capability)

    @property
    def cache_key(self) -> str:
        """Stable identity for per-GPU caches."""
        return self.uuid or f"{self.name}-{self.nvml_index}"


def device_ordinal(device: str) -> int:
    """CUDA ordinal of a torch device string ("cuda" -> 0, "cuda:1" -> 1)."""
    if ":" in device:
        tail = device.split(":", 1)[1]
        if tail.isdigit():
            return int(tail)
    return 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_handle(nvml: Any, ordinal: int, env: Mapping[str, str]) -> tuple[Any, int | None]:
    """NVML handle for CUDA ordinal ``ordinal``: NVML ignores CUDA_VISIBLE_DEVICES, so map it."""
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        if ordinal >= len(visible):
            raise ToolNotFoundError(
                f"cuda:{ordinal} asked for but CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} "
                f"shows {len(visible)} GPU(s); pick another device or widen CUDA_VISIBLE_DEVICES"
            )
        entry = visible[ordinal]
        if entry.isdigit():
            return nvml.nvmlDeviceGetHandleByIndex(int(entry)), int(entry)
        handle = nvml.nvmlDeviceGetHandleByUUID(entry)
        return handle, None
    return nvml.nvmlDeviceGetHandleByIndex(ordinal), ordinal


def _gpu_from_nvml(nvml: Any, ordinal: int, env: Mapping[str, str]) -> GpuInfo:
    nvml.nvmlInit()
    if nvml.nvmlDeviceGetCount() < 1:
        raise ToolNotFoundError(NO_GPU_MESSAGE)
    handle, index = _nvml_handle(nvml, ordinal, env)
    if index is None:
        index = int(nvml.nvmlDeviceGetIndex(handle))
    try:
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        capability: tuple[int, int] | None = (int(major), int(minor))
    except Exception:  # older drivers lack the call; torch fills it in later
        capability = None
    try:
        memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    except Exception:
        memory = None
    return GpuInfo(
        name=_text(nvml.nvmlDeviceGetName(handle)),
        nvml_index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        compute_capability=capability,
        driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
        memory_total_bytes=memory,
    )


def _gpu_from_torch(ordinal: int) -> GpuInfo:
    import torch

    if not torch.cuda.is_available():
        raise ToolNotFoundError(NO_GPU_MESSAGE)
    props = torch.cuda.get_device_properties(ordinal)
    return GpuInfo(
        name=props.name, nvml_index=None, uuid=None,
        compute_capability=(props.major, props.minor), driver_version=None,
        memory_total_bytes=int(props.total_memory), sm_count=int(props.multi_processor_count),
    )


def detect_gpu(device: str = "cuda", *, nvml: Any = None, env: Mapping[str, str] | None = None) -> GpuInfo:
    """Describe the GPU ``device`` names; no GPU raises ToolNotFoundError(NO_GPU_MESSAGE).

    NVML first: it is cheap and does not create a CUDA context in this process. torch is
    the fallback where NVML is missing; the SM count comes from the harness (torch) later.
    """
    if not device.startswith("cuda"):
        raise ToolNotFoundError(f"device {device!r}: {NO_GPU_MESSAGE}")
    env = os.environ if env is None else env
    ordinal = device_ordinal(device)
    if nvml is None:
        try:
            import pynvml

            nvml = pynvml
        except ImportError:
            nvml = None
    if nvml is not None:
        try:
            return _gpu_from_nvml(nvml, ordinal, env)
        except ToolNotFoundError:
            raise
        except Exception:  # NVML present but no driver / no device: let torch decide
            pass
    return _gpu_from_torch(ordinal)


def parse_query_metrics(text: str) -> frozenset[str]:
    """Metric base names from ``ncu --query-metrics`` output.

    Rows look like ``dram__bytes_read   Counter   byte   # of bytes ...``; some carry a
    section prefix (``FBSP.TriageCompute.dramc__throughput``); wrapped descriptions
    continue on indented lines, which are skipped.
    """
    names: set[str] = set()
    for line in text.splitlines():
        if not line or line[0].isspace():
            continue
        token = line.split(None, 1)[0]
        base = token.rsplit(".", 1)[-1]
        if "__" in base:
            names.add(base)
    return frozenset(names)


def _metrics_cache_path(chip: str, ncu_version: str | None, env: Mapping[str, str] | None) -> Path:
    return user_cache.user_cache_dir(env) / "ncu-metrics" / f"{chip}-{ncu_version or 'unknown'}.json"


def available_metrics(ncu: Path, chip: str, *, ncu_version: str | None,
                      env: Mapping[str, str] | None = None, timeout_s: float = 120.0) -> frozenset[str]:
    """Base metric names ncu offers on ``chip``; queried once, then read from the user cache."""
    cache = _metrics_cache_path(chip, ncu_version, env)
    cached = user_cache.read_json(cache).get("metrics")
    if isinstance(cached, list) and cached:
        return frozenset(str(m) for m in cached)
    command = ncu_query_metrics_command(ncu, chip)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=None if env is None else dict(env))
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ToolFailedError(f"{' '.join(command)} did not finish: {err}; check the ncu install") from err
    names = parse_query_metrics(done.stdout)
    if done.returncode != 0 or not names:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ToolFailedError(
            f"{' '.join(command)} failed (exit {done.returncode}): {' | '.join(tail) or 'no output'}; "
            f"check that this ncu knows chip {chip!r} (ncu --list-chips)"
        )
    user_cache.write_json(cache, {"chip": chip, "ncu_version": ncu_version, "metrics": sorted(names)})
    return names


@dataclass(frozen=True)
class CounterSelection:
    """The counters an ncu run will ask for, and those it cannot, with reasons."""

    ncu_names: dict[str, str]  # profile field -> ncu metric name, available ones only
    availability: tuple[CounterAvailability, ...]

    @property
    def metrics(self) -> list[str]:
        """ncu metric names in catalog order (what --metrics gets)."""
        return list(self.ncu_names.values())


def select_counters(chip: str | None, available: frozenset[str] | None, *,
                    ncu_version: str | None = None, flop_counters: bool = True) -> CounterSelection:
    """Resolve the 20-counter set (plus the FLOP counters) for ``chip`` against ncu's metric list.

    ``launch__*`` names are launch attributes, not listed by --query-metrics, and always
    reported. With ``available`` None (the chip is unknown) every name is kept unverified.
    """
    rows = counter_availability(chip, ALL_SPECS if flop_counters else CATALOG,
                                offered_by(chip, available, ncu_version=ncu_version))
    chosen = {row.field: row.ncu_name for row in rows if row.available and row.ncu_name is not None}
    return CounterSelection(ncu_names=chosen, availability=tuple(rows))
