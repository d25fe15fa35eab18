"""Shared fixtures: paths to the real H200 artifacts, and GPU/tool markers that skip cleanly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = _has_cuda()
    ncu = shutil.which("ncu") is not None
    for item in items:
        if "gpu" in item.keywords and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA"))
        if "ncu" in item.keywords and not ncu:
            item.add_marker(pytest.mark.skip(reason="needs Nsight Compute (ncu) on PATH"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def joinable() -> Path:
    """One compiled workload captured in every phase on an H200 (44 kernels, joins 1:1)."""
    return DATA / "h200_joinable"


@pytest.fixture(scope="session")
def tiny() -> Path:
    """Small, separate H200 captures of an MLP (eager and compiled); they do not join."""
    return DATA / "h200_tiny"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
