"""Clocks: observe with a fake NVML; lock against a fake nvidia-smi (never a real GPU's clocks)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler_core.capture import clocks
from profiler_core.errors import ToolFailedError
from tests.capture.conftest import FakeLog


class _Nvml:
    """pynvml's clock calls over scripted SM readings."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, sm: list[float], fail_init: bool = False, util: list[int] | None = None) -> None:
        self.sm, self.i, self.fail_init = sm, 0, fail_init
        self.util, self.j = util, 0

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("Driver Not Loaded")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetClockInfo(self, handle: str, which: int) -> int:
        if which == self.NVML_CLOCK_MEM:
            return 3201
        value = self.sm[min(self.i, len(self.sm) - 1)]
        self.i += 1
        return int(value)

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        if self.util is None:
            raise RuntimeError("Not Supported")
        value = self.util[min(self.j, len(self.util) - 1)]
        self.j += 1
        return SimpleNamespace(gpu=value, memory=0)


def test_nvml_reader_reads_sm_and_memory_clocks() -> None:
    reader, why = clocks.open_clock_reader(0, nvml=_Nvml([1980]))
    assert why is None and reader.read_mhz() == (1980.0, 3201.0)


def test_missing_nvml_is_reported_not_fatal() -> None:
    reader, why = clocks.open_clock_reader(0, nvml=_Nvml([1980], fail_init=True))
    assert reader is None and "NVML unavailable" in why and "Driver Not Loaded" in why
    assert clocks.open_clock_reader(None)[0] is None


def test_observer_samples_in_the_background_and_summarises() -> None:
    reader, _ = clocks.open_clock_reader(0, nvml=_Nvml([345, 1980, 1980, 1755, 1980]))
    observer = clocks.ClockObserver(reader, interval_s=0.01).start()
    time.sleep(0.15)
    stats = observer.stop()
    assert stats.samples >= 5
    assert stats.sm_mhz_min == 345 and stats.sm_mhz_max == 1980 and stats.sm_mhz_median == 1980
    assert stats.memory_mhz_median == stats.memory_mhz_min == stats.memory_mhz_max == 3201
    count = len(observer.samples)
    time.sleep(0.05)
    assert len(observer.samples) == count  # stopped means stopped


def test_window_keeps_only_the_loaded_part() -> None:
    observer = clocks.ClockObserver(reader=None)  # type: ignore[arg-type]
    observer.samples.extend(
        [(1.0, 345.0, 3201.0, False), (2.0, 1980.0, 3201.0, True), (3.0, 1965.0, 3201.0, True),
         (4.0, 345.0, 3201.0, False)]
    )
    stats = observer.window(1.5, 3.5)
    assert stats.samples == 2 and stats.sm_mhz_median == 1972.5
    assert clocks.lock_mhz_from_probe(stats) == 1972


def test_observer_summarises_the_busy_samples_only() -> None:
    # a phase that compiles for a while (GPU idle at 345 MHz), then runs its kernels at 1980 MHz
    reader, _ = clocks.open_clock_reader(0, nvml=_Nvml([345, 345, 345, 1980, 1980], util=[0, 0, 0, 87, 100]))
    observer = clocks.ClockObserver(reader, interval_s=0.0)
    for _ in range(5):
        sm, mem = reader.read_mhz()
        observer.samples.append((0.0, sm, mem, reader.read_busy()))
    stats = clocks.summarize(observer.samples)
    assert (stats.samples, stats.busy_samples, stats.basis) == (5, 2, "busy")
    assert stats.sm_mhz_median == stats.sm_mhz_min == 1980


@pytest.mark.parametrize(("busy", "basis", "median"), [
    ([False, False, False], "idle", 345),  # no kernel caught: the idle clock, marked as such
    ([None, None, None], "all", 345),  # no utilization reading: every sample counts
], ids=["never-busy", "no-utilization"])
def test_without_a_busy_sample_the_basis_says_what_the_figures_are(busy: list, basis: str, median: float) -> None:
    samples = [(float(i), 345.0, 3201.0, b) for i, b in enumerate(busy)]
    stats = clocks.summarize(samples)
    assert stats.basis == basis and stats.busy_samples == 0 and stats.sm_mhz_median == median
    assert clocks.summarize([]).basis is None


def test_nvml_reader_says_busy_from_utilization() -> None:
    reader, _ = clocks.open_clock_reader(0, nvml=_Nvml([1980], util=[0, 42]))
    assert reader.read_busy() is False and reader.read_busy() is True
    unsupported, _ = clocks.open_clock_reader(0, nvml=_Nvml([1980]))
    assert unsupported.read_busy() is None


def test_probe_without_samples_refuses() -> None:
    with pytest.raises(ToolFailedError, match="no SM clock samples"):
        clocks.lock_mhz_from_probe(clocks.summarize([]))


def test_lock_clock_cache_round_trip(tmp_path: Path) -> None:
    env = {"OPROF_CACHE_DIR": str(tmp_path)}
    assert clocks.cached_lock_mhz("GPU-1", env) is None
    clocks.store_lock_mhz("GPU-1", 1980, env)
    clocks.store_lock_mhz("GPU-2", 1755, env)
    assert clocks.cached_lock_mhz("GPU-1", env) == 1980 and clocks.cached_lock_mhz("GPU-2", env) == 1755


def _smi() -> Path:
    return Path(shutil.which("nvidia-smi"))


def test_lock_then_reset_around_the_body(fake_env: FakeLog) -> None:
    with clocks.locked_clocks(_smi(), 3, 1980) as record:
        assert [e["argv"] for e in fake_env.entries("nvidia-smi")] == [["-i", "3", "-lgc", "1980,1980"]]
    assert [e["argv"] for e in fake_env.entries("nvidia-smi")] == [
        ["-i", "3", "-lgc", "1980,1980"],
        ["-i", "3", "-rgc"],
    ]
    assert record.reset_ok is True and [c[1:] for c in record.commands] == [
        ["-i", "3", "-lgc", "1980,1980"],
        ["-i", "3", "-rgc"],
    ]


def test_reset_runs_even_when_the_phase_fails(fake_env: FakeLog) -> None:
    with pytest.raises(RuntimeError, match="phase blew up"), clocks.locked_clocks(_smi(), 0, 1755):
        raise RuntimeError("phase blew up")
    assert [e["argv"][-1] for e in fake_env.entries("nvidia-smi")] == ["1755,1755", "-rgc"]


def test_refusal_is_a_clear_error_and_nothing_runs(
    fake_env: FakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMI_REFUSE", "1")
    ran = False
    with pytest.raises(ToolFailedError) as err, clocks.locked_clocks(_smi(), 0, 1980):
        ran = True
    assert not ran
    message = str(err.value)
    assert "refused to lock GPU 0's clocks at 1980 MHz" in message and "insufficient permissions" in message
    assert "--clocks observe" in message
    assert [e["argv"][-2] for e in fake_env.entries("nvidia-smi")] == ["-lgc"]  # no reset needed: nothing set
