"""Fixtures for capture tests: fake NVIDIA tools on PATH, a fake GPU, a fake clock reader."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from profiler_core.capture import tools
from profiler_core.capture.chip import GpuInfo

FAKES = Path(__file__).parent / "fakes"

H200 = GpuInfo(
    name="NVIDIA H200",
    nvml_index=0,
    uuid="GPU-fake-h200",
    compute_capability=(9, 0),
    driver_version="580.95.05",
    memory_total_bytes=150_000_000_000,
)


def make_tool(bin_dir: Path, name: str, script: str) -> Path:
    """An executable ``bin_dir/name`` that runs ``fakes/<script>`` with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{FAKES / script}" "$@"\n')
    path.chmod(0o755)
    return path


class FakeReader:
    """A clock reader that reports 1980 MHz SM and 3201 MHz memory (H200 under load)."""

    def __init__(self) -> None:
        self.reads = 0

    def read_mhz(self) -> tuple[float | None, float | None]:
        self.reads += 1
        return 1980.0, 3201.0

    def read_busy(self) -> bool | None:
        return True


class FakeLog:
    """The invocations the fake tools appended to $FAKE_LOG."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self, tool: str | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeLog:
    """PATH holds only the fake tools; caches and logs live in tmp_path; no real install is searched."""
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "ncu", "fake_ncu.py")
    make_tool(bin_dir, "nsys", "fake_nsys.py")
    make_tool(bin_dir, "nvidia-smi", "fake_nvidia_smi.py")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("OPROF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.jsonl"))
    for var in (
        tools.ENV_NCU,
        tools.ENV_NSYS,
        tools.ENV_NVIDIA_SMI,
        "FAKE_HARNESS_FAIL",
        "FAKE_NSYS_FAIL",
        "FAKE_NCU_FAIL_REPLAY",
        "FAKE_SMI_REFUSE",
        "FAKE_HARNESS_SLEEP",
        "FAKE_KERNELS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tools, "DEFAULT_NCU_GLOBS", ())
    monkeypatch.setattr(tools, "DEFAULT_NSYS_GLOBS", ())
    monkeypatch.setattr(tools, "NCU_INSTALL_GLOBS", ())
    return FakeLog(tmp_path / "calls.jsonl")
