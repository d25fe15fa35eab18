"""GPU identity and the counter set per chip, against the real ncu metric lists."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler_core.capture import chip
from profiler_core.errors import ToolFailedError, ToolNotFoundError
from profiler_core.metrics.chips import chip_for_capability
from tests.capture.conftest import FakeLog


def _metric_list(data_dir: Path, name: str) -> frozenset[str]:
    return chip.parse_query_metrics(
        gzip.decompress((data_dir / "ncu_metrics" / f"metrics_{name}.txt.gz").read_bytes()).decode()
    )


def test_parse_query_metrics_reads_base_names_and_section_prefixes(data_dir: Path) -> None:
    names = _metric_list(data_dir, "gh100")
    assert len(names) == 3599  # rows of the gh100 listing, section prefixes stripped
    assert {"dram__bytes_read", "sm__throughput", "smsp__average_warp_latency_per_inst_issued"} <= names
    assert "dramc__throughput" in names  # listed as FBSP.TriageCompute.dramc__throughput
    assert not any(" " in n or n.startswith(("Metric", "Chip", "-")) for n in names)


@pytest.mark.parametrize("name", ["ga100", "gh100", "gb100", "ad102"], ids=str)
def test_all_twenty_counters_resolve_on_datacenter_and_ada_chips(data_dir: Path, name: str) -> None:
    selection = chip.select_counters(name, _metric_list(data_dir, name), ncu_version="2025.3.1.0",
                                     flop_counters=False)
    assert len(selection.metrics) == 20
    assert all(row.available for row in selection.availability)


# FLOP counters each chip's ncu lacks (checked against the shipped --query-metrics lists): ga100 has
# no fp8 tensor path, gh100 counts both fp16 accumulators in one counter and fp8 in one, ad102 has
# one fp8 counter; the Blackwell chips split fp8 by accumulator.
_FLOP_COUNTERS_ABSENT = {
    "ga100": {"tensor_ops_fp8", "tensor_ops_fp8_acc16"},
    "gh100": {"tensor_ops_fp16_acc16", "tensor_ops_fp8_acc16"},
    "gb100": set(),
    "ad102": {"tensor_ops_fp8_acc16"},
    "gb202": set(),
}


@pytest.mark.parametrize("name", sorted(_FLOP_COUNTERS_ABSENT), ids=str)
def test_flop_counters_resolve_per_chip_and_absent_ones_carry_a_reason(data_dir: Path, name: str) -> None:
    from profiler_core.metrics.catalog import FLOP_FIELDS

    selection = chip.select_counters(name, _metric_list(data_dir, name), ncu_version="2025.3.1.0")
    rows = {row.field: row for row in selection.availability}
    absent = {f for f in FLOP_FIELDS if not rows[f].available}
    assert absent == _FLOP_COUNTERS_ABSENT[name]
    assert all(rows[f].reason and name in rows[f].reason for f in absent)
    assert all(rows[f].available for f in rows if f not in FLOP_FIELDS)  # the 20 are untouched
    assert len(selection.metrics) == 20 + len(FLOP_FIELDS) - len(absent)
    if name == "gh100":
        assert selection.ncu_names["tensor_ops_fp16"] == "sm__ops_path_tensor_src_fp16.sum"
    if name == "gb100":
        assert selection.ncu_names["tensor_ops_fp8"] == "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32.sum"


def test_gb202_uses_renamed_dram_counters(data_dir: Path) -> None:
    selection = chip.select_counters("gb202", _metric_list(data_dir, "gb202"), flop_counters=False)
    assert selection.ncu_names["dram_bytes_read"] == "dram__bytes_op_read.sum"
    assert selection.ncu_names["dram_bytes_written"] == "dram__bytes_op_write.sum"
    assert len(selection.metrics) == 20


def test_missing_name_is_dropped_and_recorded_with_the_reason(data_dir: Path) -> None:
    listed = _metric_list(data_dir, "gh100") - {"smsp__average_warp_latency_per_inst_issued"}
    selection = chip.select_counters("gh100", listed, ncu_version="2025.3.1.0", flop_counters=False)
    assert "warp_cycles_per_instruction" not in selection.ncu_names
    assert "smsp__average_warp_latency_per_inst_issued.ratio" not in selection.metrics
    row = next(r for r in selection.availability if r.field == "warp_cycles_per_instruction")
    assert not row.available and row.ncu_name == "smsp__average_warp_latency_per_inst_issued.ratio"
    assert (
        "smsp__average_warp_latency_per_inst_issued.ratio not offered by ncu 2025.3.1.0 on gh100"
        == row.reason
    )
    assert len(selection.metrics) == 19


def test_unknown_chip_keeps_every_name_unverified() -> None:
    selection = chip.select_counters(None, None, flop_counters=False)
    assert len(selection.metrics) == 20


def test_metric_list_is_queried_once_per_chip_then_cached(fake_env: FakeLog) -> None:
    ncu = Path(__import__("shutil").which("ncu"))
    first = chip.available_metrics(ncu, "gh100", ncu_version="2025.3.1.0")
    second = chip.available_metrics(ncu, "gh100", ncu_version="2025.3.1.0")
    assert first == second and "sm__throughput" in first
    queries = [e for e in fake_env.entries("ncu") if "--query-metrics" in e["argv"]]
    assert len(queries) == 1 and queries[0]["argv"][-2:] == ["--chip", "gh100"]
    chip.available_metrics(ncu, "gb202", ncu_version="2025.3.1.0")
    assert len([e for e in fake_env.entries("ncu") if "--query-metrics" in e["argv"]]) == 2


def test_metric_query_failure_names_the_chip(fake_env: FakeLog) -> None:
    ncu = Path(__import__("shutil").which("ncu"))
    with pytest.raises(ToolFailedError, match="Invalid chip 'gz999'.*ncu --list-chips"):
        chip.available_metrics(ncu, "gz999", ncu_version="2025.3.1.0")


class _FakeNvml:
    """The few pynvml calls detect_gpu makes, over a table of devices."""

    def __init__(self, devices: list[dict], fail: bool = False) -> None:
        self.devices, self.fail = devices, fail

    def nvmlInit(self) -> None:
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return next(i for i, d in enumerate(self.devices) if d["uuid"] == uuid)

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.devices[handle]["name"].encode()

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self.devices[handle]["uuid"]

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return self.devices[handle]["cc"]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=150 * 2**30)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.95.05"


_DEVICES = [
    {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-aaaa", "cc": (8, 0)},
    {"name": "NVIDIA H200", "uuid": "GPU-hhhh", "cc": (9, 0)},
]


@pytest.mark.parametrize(
    ("device", "visible", "index", "name"),
    [
        ("cuda", "", 0, "NVIDIA A100-SXM4-80GB"),
        ("cuda:1", "", 1, "NVIDIA H200"),
        ("cuda", "1", 1, "NVIDIA H200"),
        ("cuda:0", "GPU-hhhh", 1, "NVIDIA H200"),
    ],
    ids=["default", "ordinal", "visible-index", "visible-uuid"],
)
def test_detect_gpu_maps_cuda_ordinals_to_nvml(device: str, visible: str, index: int, name: str) -> None:
    env = {"CUDA_VISIBLE_DEVICES": visible} if visible else {}
    gpu = chip.detect_gpu(device, nvml=_FakeNvml(_DEVICES), env=env)
    assert (gpu.nvml_index, gpu.name, gpu.driver_version) == (index, name, "580.95.05")
    assert gpu.chip == chip_for_capability(gpu.compute_capability)


def test_no_gpu_fails_fast_with_the_demo_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ToolNotFoundError) as err:
        chip.detect_gpu("cuda", nvml=_FakeNvml([], fail=True), env={})
    assert str(err.value) == chip.NO_GPU_MESSAGE
    assert "`oprof demo`" in str(err.value)


def test_zero_nvml_devices_is_no_gpu() -> None:
    with pytest.raises(ToolNotFoundError, match="needs an NVIDIA GPU"):
        chip.detect_gpu("cuda", nvml=_FakeNvml([]), env={})


def test_cpu_device_is_refused() -> None:
    with pytest.raises(ToolNotFoundError, match="device 'cpu'"):
        chip.detect_gpu("cpu", nvml=_FakeNvml(_DEVICES), env={})
