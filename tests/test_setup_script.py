"""scripts/setup.sh picks the torch build for the machine: CPU without an NVIDIA GPU, CUDA with one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Stands in for .venv/bin/python: logs each call; every import check fails, so setup installs.
FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$SETUP_LOG"
case "$*" in
  "-c "*) exit 1 ;;
  *--index-url*) exit "${CPU_INDEX_RC:-0}" ;;
esac
exit 0
"""


def _run_setup(tmp_path: Path, *, gpu: bool, cpu_index_rc: int = 0) -> tuple[list[str], str]:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", checkout / "scripts" / "setup.sh")
    python = checkout / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if gpu:
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n")
        smi.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SETUP_LOG": str(log),
           "CPU_INDEX_RC": str(cpu_index_rc)}
    run = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    installs = [line for line in log.read_text().splitlines() if line.startswith("-m pip install")]
    return installs, run.stderr


no_gpu_here = pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"),
                                 reason="this machine has an NVIDIA driver: setup.sh sees a GPU")


@no_gpu_here
def test_without_a_gpu_the_cpu_build_of_torch_comes_first(tmp_path: Path) -> None:
    installs, stderr = _run_setup(tmp_path, gpu=False)
    assert installs[1] == f"-m pip install -q --timeout 30 --retries 1 --index-url {CPU_INDEX} torch"
    assert installs[2] == '-m pip install -q -e .[dev]'  # torch is then already satisfied
    assert "no NVIDIA GPU: installing the CPU build of torch" in stderr


@no_gpu_here
def test_an_unreachable_cpu_index_falls_back_to_the_default_index(tmp_path: Path) -> None:
    installs, stderr = _run_setup(tmp_path, gpu=False, cpu_index_rc=1)
    assert installs[1].endswith(f"--index-url {CPU_INDEX} torch")
    assert installs[2] == "-m pip install -q torch"
    assert installs[3] == "-m pip install -q -e .[dev]"
    assert "could not be used; installing torch from the default index" in stderr


def test_with_a_gpu_torch_comes_with_cuda(tmp_path: Path) -> None:
    installs, stderr = _run_setup(tmp_path, gpu=True)
    assert installs[1:] == ["-m pip install -q torch", "-m pip install -q -e .[dev]"]
    assert "NVIDIA GPU found" in stderr
